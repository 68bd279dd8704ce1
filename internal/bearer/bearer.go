// Package bearer reads and sends bearer tokens, the "Authorization:
// Bearer TOKEN" header of RFC 6750, the one way every gorap client and
// server passes a token.
package bearer

import (
	"net/http"
	"strings"
	"time"
)

// Token returns the token of an Authorization header value in the Bearer
// scheme (the scheme's name in any case, the token with surrounding spaces
// trimmed), or false when the value is empty, of another scheme, or has no
// token.
func Token(header string) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// FromRequest returns the bearer token of r's Authorization header, or
// false (see Token).
func FromRequest(r *http.Request) (string, bool) {
	return Token(r.Header.Get("Authorization"))
}

// Set makes h carry token as a bearer token; an empty token removes the
// header.
func Set(h http.Header, token string) {
	if token == "" {
		h.Del("Authorization")
		return
	}
	h.Set("Authorization", "Bearer "+token)
}

// Transport returns a RoundTripper that sends token on every request that
// carries no Authorization header of its own, through next
// (http.DefaultTransport when nil). An empty token returns next unchanged.
// The caller's request is never modified: a request that gets the header
// is a clone.
func Transport(token string, next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	if token == "" {
		return next
	}
	return transport{token: token, next: next}
}

type transport struct {
	token string
	next  http.RoundTripper
}

// RoundTrip sends req with the token unless it has an Authorization
// header already.
func (t transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Header.Get("Authorization") == "" {
		req = req.Clone(req.Context())
		Set(req.Header, t.token)
	}
	return t.next.RoundTrip(req)
}

// Client returns an HTTP client with the given overall timeout (0 for
// none) that sends token on every request; an empty token sends none.
func Client(token string, timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: Transport(token, nil)}
}

// Challenge sets the WWW-Authenticate header of a 401 answer asking for a
// bearer token in realm.
func Challenge(h http.Header, realm string) {
	h.Set("WWW-Authenticate", `Bearer realm="`+realm+`"`)
}
