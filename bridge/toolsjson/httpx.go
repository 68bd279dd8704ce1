package toolsjson

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// runHTTP runs an http tool: the url's templates are
// filled from the input (escaped), static and secret headers are set, and
// the input is the JSON body of methods that carry one. The request's host
// must be covered by a net: grant, redirects included.
func runHTTP(ctx context.Context, client *http.Client, t *Tool, policy *Policy, input []byte, secrets map[string]string, timeout time.Duration) ([]byte, error) {
	tmpl, err := ParseURLTemplate(t.Transport.URL)
	if err != nil {
		return nil, err
	}
	target, err := tmpl.Expand(input)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("the url %q is not valid: %v", target, err)
	}
	if !policy.GrantsHost(u.Host) {
		return nil, fmt.Errorf("host %s is not covered by a net: grant in policy.caps", u.Host)
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var body io.Reader
	hasBody := t.Transport.Method == http.MethodPost || t.Transport.Method == http.MethodPut || t.Transport.Method == http.MethodPatch
	if hasBody {
		body = bytes.NewReader(input)
	}
	req, err := http.NewRequestWithContext(ctx, t.Transport.Method, target, body)
	if err != nil {
		return nil, err
	}
	if hasBody {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	for _, k := range sortedKeys(t.Transport.Headers) {
		v := placeholderPattern.ReplaceAllStringFunc(t.Transport.Headers[k], func(m string) string {
			return secrets[placeholderPattern.FindStringSubmatch(m)[1]]
		})
		req.Header.Set(k, v)
	}
	c := *client
	c.CheckRedirect = func(r *http.Request, via []*http.Request) error {
		if len(via) >= 5 {
			return fmt.Errorf("stopped after %d redirects", len(via))
		}
		if !policy.GrantsHost(r.URL.Host) {
			return fmt.Errorf("redirected to host %s, which no net: grant covers", r.URL.Host)
		}
		if r.URL.Host != u.Host {
			// Secret headers stay with the declared host.
			for k := range t.Transport.Headers {
				r.Header.Del(k)
			}
		}
		return nil
	}
	resp, err := c.Do(req)
	if err != nil {
		if parent.Err() != nil {
			return nil, context.Cause(parent)
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s %s timed out after %v", t.Transport.Method, u.Redacted(), timeout)
		}
		return nil, fmt.Errorf("%s %s failed: %v", t.Transport.Method, u.Redacted(), unwrapURLError(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxOutputBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the answer of %s: %v", u.Host, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		snippet := strings.TrimSpace(string(data))
		if len(snippet) > 300 {
			snippet = snippet[:300] + "…"
		}
		return nil, fmt.Errorf("%s answered %s: %s", u.Host, resp.Status, snippet)
	}
	if len(data) > MaxOutputBytes {
		return nil, fmt.Errorf("%s answered more than %d bytes", u.Host, MaxOutputBytes)
	}
	return data, nil
}

func unwrapURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}
