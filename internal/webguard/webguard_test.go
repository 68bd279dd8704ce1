package webguard

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func req(method, host string, hdr map[string]string) *http.Request {
	r := httptest.NewRequest(method, "http://"+host+"/v1/threads", strings.NewReader("{}"))
	r.Host = host
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	return r
}

// Loopback names and IP literals always pass; other names only when
// allowed, exactly, by subdomain wildcard, or all by "*".
func TestHostAllowed(t *testing.T) {
	p := &Policy{Hosts: []string{"agent.example.com", "*.corp.example", "proxy.local:8443"}}
	for host, want := range map[string]bool{
		"":                       true,
		"127.0.0.1:8080":         true,
		"127.0.0.1":              true,
		"[::1]:8080":             true,
		"10.1.2.3:80":            true,
		"localhost:8080":         true,
		"LOCALHOST.:8080":        true,
		"agent.example.com":      true,
		"Agent.Example.COM:8080": true,
		"agent.example.com.":     true,
		"x.corp.example:1":       true,
		"corp.example":           false,
		"proxy.local:8443":       true,
		"proxy.local:9000":       false,
		"evil.example:8080":      false,
		"localhost.evil.example": false,
		"127.0.0.1.nip.io:8080":  false,
		"evil:host:8080":         false,
		"github.otc.rap.invalid": true,
		"[fe80::1%25evil]:80":    false,
		"[::ffff:127.0.0.1]:80":  true,
		"x.invalid.example":      false,
	} {
		if got := p.HostAllowed(host); got != want {
			t.Errorf("HostAllowed(%q) = %v, want %v", host, got, want)
		}
	}
	if !(&Policy{Hosts: []string{"*"}}).HostAllowed("anything.example") {
		t.Error(`"*" should allow every host`)
	}
	if (&Policy{}).HostAllowed("evil.example") {
		t.Error("the zero policy allowed a foreign name")
	}
}

// A refused host says which name and what to do.
func TestCheckHostMessage(t *testing.T) {
	p := &Policy{HostAdvice: "pass --allowed-hosts NAME"}
	ref := p.CheckHost(req("GET", "evil.example:8080", nil))
	if ref == nil || ref.Status != http.StatusForbidden {
		t.Fatalf("foreign host: got %+v, want 403", ref)
	}
	if !strings.Contains(ref.Message, `"evil.example:8080"`) || !strings.Contains(ref.Message, "--allowed-hosts NAME") {
		t.Errorf("message %q should name the host and the advice", ref.Message)
	}
}

// Requests a browser makes for another origin are refused; the server's
// own pages, allowed origins and non-browser clients pass.
func TestCheckCrossSite(t *testing.T) {
	p := &Policy{Origins: []string{"https://app.example.com"}}
	cases := []struct {
		name     string
		method   string
		host     string
		hdr      map[string]string
		navigate bool
		refused  bool
	}{
		{"no browser headers", "POST", "127.0.0.1:8080", nil, false, false},
		{"same origin", "POST", "127.0.0.1:8080", map[string]string{"Origin": "http://127.0.0.1:8080", "Sec-Fetch-Site": "same-origin"}, false, false},
		{"same origin behind TLS proxy", "POST", "agent.example", map[string]string{"Origin": "https://agent.example"}, false, false},
		{"default port written", "POST", "agent.example:443", map[string]string{"Origin": "https://agent.example"}, false, false},
		{"allowed origin", "POST", "127.0.0.1:8080", map[string]string{"Origin": "https://app.example.com", "Sec-Fetch-Site": "cross-site"}, false, false},
		{"foreign origin", "POST", "127.0.0.1:8080", map[string]string{"Origin": "https://evil.example"}, false, true},
		{"other local port", "POST", "127.0.0.1:8080", map[string]string{"Origin": "http://127.0.0.1:3000", "Sec-Fetch-Site": "same-site"}, false, true},
		{"opaque origin", "POST", "127.0.0.1:8080", map[string]string{"Origin": "null"}, false, true},
		{"cross-site without origin", "GET", "127.0.0.1:8080", map[string]string{"Sec-Fetch-Site": "cross-site"}, false, true},
		{"same-site without origin", "GET", "127.0.0.1:8080", map[string]string{"Sec-Fetch-Site": "same-site"}, false, true},
		{"typed in the address bar", "GET", "127.0.0.1:8080", map[string]string{"Sec-Fetch-Site": "none"}, false, false},
		{"link to a page", "GET", "127.0.0.1:8080", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}, true, false},
		{"link to the API", "GET", "127.0.0.1:8080", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}, false, true},
		{"form post navigation", "POST", "127.0.0.1:8080", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}, true, true},
	}
	for _, c := range cases {
		ref := p.CheckCrossSite(req(c.method, c.host, c.hdr), c.navigate)
		if (ref != nil) != c.refused {
			t.Errorf("%s: refusal %+v, want refused=%v", c.name, ref, c.refused)
		}
		if ref != nil && ref.Status != http.StatusForbidden {
			t.Errorf("%s: status %d, want 403", c.name, ref.Status)
		}
	}
}

// State-changing requests must say application/json, bodyless ones too;
// reads need not.
func TestCheckJSON(t *testing.T) {
	for _, c := range []struct {
		method, ct string
		ok         bool
	}{
		{"GET", "", true},
		{"HEAD", "", true},
		{"POST", "application/json", true},
		{"POST", "application/json; charset=utf-8", true},
		{"POST", "Application/JSON", true},
		{"POST", "", false},
		{"POST", "text/plain", false},
		{"POST", "text/plain; charset=utf-8", false},
		{"POST", "application/x-www-form-urlencoded", false},
		{"POST", "multipart/form-data; boundary=x", false},
		{"POST", "application/json-seq", false},
		{"DELETE", "", false},
		{"PUT", "text/plain", false},
	} {
		r := req(c.method, "127.0.0.1", nil)
		if c.ct != "" {
			r.Header.Set("Content-Type", c.ct)
		}
		ref := CheckJSON(r)
		if (ref == nil) != c.ok {
			t.Errorf("%s with Content-Type %q: refusal %+v, want ok=%v", c.method, c.ct, ref, c.ok)
		}
		if ref != nil && (ref.Status != http.StatusUnsupportedMediaType || !strings.Contains(ref.Message, "application/json")) {
			t.Errorf("%s %q: got %d %q, want 415 naming application/json", c.method, c.ct, ref.Status, ref.Message)
		}
	}
}
