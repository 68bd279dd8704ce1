// Package client is a typed Go client of gorap's client API (/v1, see
// docs/api.md): threads, messages, user choices, history, and the event
// stream, which it resumes after a disconnection by event id without gaps
// or duplicates. Requests and answers are the types of package api, the
// ones the runtime serves.
//
//	c, err := client.New("http://127.0.0.1:8080", client.WithToken(os.Getenv("RAP_TOKEN")))
//	th, err := c.CreateThread(ctx, api.CreateThreadRequest{})
//	s, err := c.Events(ctx, th.ID, client.StreamOptions{})
//	_, err = c.PostMessage(ctx, th.ID, "What time is it?")
//	for {
//		ev, err := s.Next()
//		...
//	}
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/gorap/gorap/internal/bearer"
	"github.com/gorap/gorap/runtime/api"
)

// Client talks to one runtime. It is safe for concurrent use.
type Client struct {
	base  string // without a trailing slash
	token string
	hc    *http.Client
}

// Option configures a Client.
type Option func(*Client)

// WithToken sets the client token (RAP_TOKEN of the runtime), sent as
// "Authorization: Bearer TOKEN" with every request; empty sends none.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithHTTPClient sets the HTTP client used for requests. Its Timeout, if
// any, must be zero: event streams last as long as they are read. The
// default is a client without timeout over http.DefaultTransport.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// New returns a client of the runtime at baseURL, such as
// "http://127.0.0.1:8080".
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("runtime URL %q: want an absolute http(s) URL such as http://127.0.0.1:8080", baseURL)
	}
	// Redirects are not followed: the API answers 308 only for a session
	// that moved to another runtime, which wants its own token; the
	// answer becomes an *Error with MovedTo set.
	c := &Client{base: strings.TrimRight(baseURL, "/"), hc: &http.Client{
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// BaseURL returns the runtime's URL the client was made with.
func (c *Client) BaseURL() string { return c.base }

// Errors a *Error wraps, by status, for errors.Is.
var (
	// ErrUnauthorized: the runtime refused the client token (401, 403).
	ErrUnauthorized = errors.New("the runtime refused the client token")
	// ErrNotFound: no such thread, or no such choice waiting (404).
	ErrNotFound = errors.New("not found")
	// ErrBadRequest: the runtime refused the request as malformed (400).
	ErrBadRequest = errors.New("bad request")
	// ErrBusy: the runtime asks to retry later (429, 503).
	ErrBusy = errors.New("the runtime is busy")
	// ErrConflict: the thread cannot do that now, such as deleting a
	// session being moved to another runtime (409).
	ErrConflict = errors.New("conflict")
	// ErrMoved: the session moved to another runtime (308); the *Error's
	// MovedTo says where.
	ErrMoved = errors.New("the session moved to another runtime")
)

// Error is an answer of the runtime other than success.
type Error struct {
	// Method and Path are the request's.
	Method, Path string
	// Status is the HTTP status.
	Status int
	// Message is the runtime's explanation (its {"error"}), shortened.
	Message string
	// MovedTo, for a 308 answer, is the session's address at the runtime
	// it moved to (such as https://b.example/v1/threads/ID).
	MovedTo string
}

// maxMessage bounds the runtime's message quoted in an Error.
const maxMessage = 500

func (e *Error) Error() string {
	switch e.Status {
	case http.StatusUnauthorized, http.StatusForbidden:
		return fmt.Sprintf("the runtime refused the client token (%s %s: %d %s: %s): give the client the token the runtime was started with (its RAP_TOKEN)",
			e.Method, e.Path, e.Status, http.StatusText(e.Status), e.Message)
	case http.StatusNotFound:
		return fmt.Sprintf("%s %s: not found: %s", e.Method, e.Path, e.Message)
	case http.StatusPermanentRedirect:
		return fmt.Sprintf("the session moved to another runtime: it is now at %s; continue there with that runtime's URL and token", e.MovedTo)
	}
	return fmt.Sprintf("%s %s: %d %s: %s", e.Method, e.Path, e.Status, http.StatusText(e.Status), e.Message)
}

// Unwrap returns the sentinel error of the status (ErrUnauthorized,
// ErrNotFound, ErrBadRequest, ErrBusy, ErrConflict), if any.
func (e *Error) Unwrap() error {
	switch e.Status {
	case http.StatusUnauthorized, http.StatusForbidden:
		return ErrUnauthorized
	case http.StatusNotFound:
		return ErrNotFound
	case http.StatusBadRequest:
		return ErrBadRequest
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		return ErrBusy
	case http.StatusConflict:
		return ErrConflict
	case http.StatusPermanentRedirect:
		return ErrMoved
	}
	return nil
}

// statusError reads a failed answer into an *Error.
func statusError(method, path string, resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	msg := strings.TrimSpace(string(body))
	var e api.ErrorResponse
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		msg = e.Error
	}
	movedTo := ""
	if resp.StatusCode == http.StatusPermanentRedirect {
		var m api.MovedResponse
		if json.Unmarshal(body, &m) == nil && m.MovedTo != "" {
			movedTo = m.MovedTo
		} else {
			movedTo = resp.Header.Get("Location")
		}
	}
	if len(msg) > maxMessage {
		cut := maxMessage
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "…"
	}
	if msg == "" {
		msg = "(no message)"
	}
	return &Error{Method: method, Path: path, Status: resp.StatusCode, Message: msg, MovedTo: movedTo}
}

// request makes a request of the API with the token set.
func (c *Client) request(ctx context.Context, method, path string, body any) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("%s %s: encode the request: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if body != nil || (method != http.MethodGet && method != http.MethodHead) {
		// Every state-changing request says JSON, bodyless ones too: the
		// runtime refuses any other (a web page could send it).
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		bearer.Set(req.Header, c.token)
	}
	return req, nil
}

// send sends req and explains a failure to connect.
func (c *Client) send(req *http.Request) (*http.Response, error) {
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctxErr := req.Context().Err(); ctxErr != nil {
			return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, ctxErr)
		}
		return nil, fmt.Errorf("cannot reach the runtime at %s (is 'rap serve' running there?): %w", c.base, err)
	}
	return resp, nil
}

// do sends a request with an optional JSON body and decodes a JSON answer
// into out (when not nil).
func (c *Client) do(ctx context.Context, method, path string, body, out any, header ...string) error {
	req, err := c.request(ctx, method, path, body)
	if err != nil {
		return err
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.send(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return statusError(method, path, resp)
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: the answer is not the expected JSON (is %s a gorap runtime?): %w", method, path, c.base, err)
	}
	return nil
}

// threadPath is the path of a thread's resource.
func threadPath(id string, rest ...string) string {
	p := "/v1/threads/" + url.PathEscape(id)
	for _, r := range rest {
		p += "/" + url.PathEscape(r)
	}
	return p
}
