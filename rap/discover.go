package rap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxManifestBytes is the largest toolset manifest FetchToolset and
// ParseToolset accept.
const MaxManifestBytes = 4 << 20

// DiscoveryURL returns the discovery URL of a tool server: its base URL
// followed by /.well-known/rap-toolset (RAP TS-4). A trailing slash on the
// base is dropped first. The base must be an absolute http or https URL
// without query or fragment.
func DiscoveryURL(baseURL string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(baseURL))
	if err != nil {
		reason := err
		var ue *url.Error
		if errors.As(err, &ue) {
			reason = ue.Err // url.Error repeats the URL, which may hold a credential
		}
		return "", fmt.Errorf("tool server base URL is not a valid URL (%v); give one such as https://tools.example.com", reason)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("tool server base URL %q must start with http:// or https:// (RAP TS-4)", u.Redacted())
	}
	if u.Hostname() == "" {
		return "", fmt.Errorf("tool server base URL %q has no host; give one such as https://tools.example.com", u.Redacted())
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return "", fmt.Errorf("tool server base URL %q must not have a query or fragment: %s is appended to it (RAP TS-4)", u.Redacted(), WellKnownPath)
	}
	if u.RawPath != "" {
		u.RawPath = strings.TrimRight(u.RawPath, "/") + WellKnownPath
	}
	u.Path = strings.TrimRight(u.Path, "/") + WellKnownPath
	return u.String(), nil
}

// DiscoveryError reports a discovery request that did not return a
// manifest: the server answered with a status other than 200.
type DiscoveryError struct {
	// URL is the discovery URL, with any password redacted.
	URL string
	// StatusCode is the HTTP status the server answered with.
	StatusCode int
	// Excerpt is the start of the response body, made printable.
	Excerpt string
}

// Error names the URL, the status and the start of the body.
func (e *DiscoveryError) Error() string {
	msg := fmt.Sprintf("fetching toolset manifest from %s: server answered %d %s", e.URL, e.StatusCode, http.StatusText(e.StatusCode))
	if e.Excerpt != "" {
		msg += ": " + e.Excerpt
	}
	return msg + "; check the base URL and that the tool server is running"
}

// FetchToolset fetches a tool server's manifest from its discovery URL
// (RAP TS-4) and parses it with ParseToolset. It sends Accept:
// application/json, reads at most MaxManifestBytes, and treats any status
// other than 200 as a *DiscoveryError. It returns the toolset together with
// the raw manifest bytes, so that a runtime can cache them for the session
// (RAP TS-7). On any error both are nil. A nil client means
// http.DefaultClient.
func FetchToolset(ctx context.Context, client *http.Client, baseURL string) (*Toolset, []byte, error) {
	if client == nil {
		client = http.DefaultClient
	}
	u, err := DiscoveryURL(baseURL)
	if err != nil {
		return nil, nil, err
	}
	shown := redactURL(u)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("fetching toolset manifest from %s: %w", shown, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the URL, which may hold a credential
		}
		return nil, nil, fmt.Errorf("fetching toolset manifest from %s: %w; check the base URL and that the tool server is running", shown, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		head, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, nil, &DiscoveryError{URL: shown, StatusCode: resp.StatusCode, Excerpt: printable(head, 200)}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxManifestBytes+1))
	if err != nil {
		return nil, nil, fmt.Errorf("fetching toolset manifest from %s: reading the body: %w", shown, err)
	}
	if len(body) > MaxManifestBytes {
		return nil, nil, fmt.Errorf("fetching toolset manifest from %s: manifest is larger than %d bytes (4 MiB); a manifest lists tools, not data", shown, MaxManifestBytes)
	}
	ts, err := ParseToolset(body)
	if err != nil {
		return nil, nil, fmt.Errorf("toolset manifest from %s: %w", shown, err)
	}
	return ts, body, nil
}

// printable returns at most n characters of b with invalid UTF-8 and control
// characters replaced, for quoting a response body in an error.
func printable(b []byte, n int) string {
	var sb strings.Builder
	count := 0
	for len(b) > 0 && count < n {
		r, size := utf8.DecodeRune(b)
		b = b[size:]
		switch {
		case r == utf8.RuneError && size <= 1:
			sb.WriteRune('\uFFFD')
		case r == '\n' || r == '\r' || r == '\t':
			sb.WriteByte(' ')
		case unicode.IsControl(r):
			sb.WriteRune('\uFFFD')
		default:
			sb.WriteRune(r)
		}
		count++
	}
	s := strings.TrimSpace(sb.String())
	if len(b) > 0 {
		s += "…"
	}
	return s
}
