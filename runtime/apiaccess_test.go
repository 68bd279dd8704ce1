package runtime

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// serveFrom serves one request to h as if it came from remote.
func serveFrom(h http.Handler, remote, method, path string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, "http://127.0.0.1"+path, strings.NewReader("{}"))
	req.RemoteAddr = remote
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

// A runtime embedded without client authentication answers its client API
// only to clients on this machine: a request from another address gets 403
// saying how to configure a token, and nothing is created for it. The
// callback endpoint stays reachable from anywhere (its URLs carry their
// own token).
func TestEmbeddedRuntimeWithoutAuthAnswersOnlyLoopback(t *testing.T) {
	e := newEnv(t, envOptions{})
	h := e.rt.Handler()
	for _, remote := range []string{"192.0.2.1:1234", "[2001:db8::1]:1234", "10.0.0.5:80", "@"} {
		w := serveFrom(h, remote, "POST", "/v1/threads")
		if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "client token") {
			t.Errorf("POST /v1/threads from %s: %d %s; want 403 naming the client token", remote, w.Code, w.Body)
		}
	}
	threads, err := e.rt.Threads(t.Context())
	if err != nil || len(threads) != 0 {
		t.Fatalf("threads after refused requests: %d (%v); want none", len(threads), err)
	}
	for _, remote := range []string{"127.0.0.1:1234", "[::1]:1234", "[::ffff:127.0.0.1]:1234"} {
		if w := serveFrom(h, remote, "POST", "/v1/threads"); w.Code != http.StatusCreated && w.Code != http.StatusOK {
			t.Errorf("POST /v1/threads from %s: %d %s; want it served", remote, w.Code, w.Body)
		}
	}
	// The callback endpoint judges the request itself (here: a bad
	// callback token), not by the client's address.
	if w := serveFrom(h, "192.0.2.1:1234", "POST", CallbackPath+"not-a-token"); strings.Contains(w.Body.String(), "client token") ||
		!strings.Contains(w.Body.String(), "callback token") {
		t.Errorf("callback from another machine: %d %s; want the callback endpoint's own answer", w.Code, w.Body)
	}
}

// With Config.ClientAuth the client API is behind it for every address,
// loopback included, and the callback endpoint is not; with
// Config.InsecureClientAPI (and no ClientAuth) every address is served.
func TestEmbeddedRuntimeClientAuthGuardsTheAPI(t *testing.T) {
	var seen []string
	deny := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen = append(seen, r.URL.Path)
			if r.Header.Get("Authorization") != "Bearer good" {
				http.Error(w, `{"error":"no"}`, http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	e := newEnv(t, envOptions{tweak: func(c *Config) { c.ClientAuth = deny }})
	h := e.rt.Handler()
	if w := serveFrom(h, "127.0.0.1:1234", "GET", "/v1/threads"); w.Code != http.StatusUnauthorized {
		t.Errorf("GET /v1/threads without a token from loopback: %d; want ClientAuth's 401", w.Code)
	}
	req := httptest.NewRequest("GET", "http://127.0.0.1/v1/threads", nil)
	req.RemoteAddr = "192.0.2.1:1234"
	req.Header.Set("Authorization", "Bearer good")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		t.Errorf("GET /v1/threads with the token from another machine: %d %s; want 200", w.Code, w.Body)
	}
	serveFrom(h, "192.0.2.1:1234", "POST", CallbackPath+"not-a-token")
	for _, p := range seen {
		if IsCallbackPath(p) {
			t.Errorf("ClientAuth saw the callback request %s", p)
		}
	}
	if len(seen) != 2 {
		t.Errorf("ClientAuth saw %d requests (%q); want the 2 client API requests", len(seen), seen)
	}

	open := newEnv(t, envOptions{tweak: func(c *Config) { c.InsecureClientAPI = true }})
	if w := serveFrom(open.rt.Handler(), "192.0.2.1:1234", "GET", "/v1/threads"); w.Code != http.StatusOK {
		t.Errorf("GET /v1/threads from another machine with InsecureClientAPI: %d %s; want 200", w.Code, w.Body)
	}
}
