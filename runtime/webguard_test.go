package runtime

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/runtime/store"
)

// rawRequest sends one HTTP/1.1 request exactly as written (so that its
// Host header can be any name) and returns the status and body.
func rawRequest(t *testing.T, srvURL, method, path, host string, hdr map[string]string, body string) (int, string) {
	t.Helper()
	u, _ := url.Parse(srvURL)
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\nContent-Length: %d\r\n", method, path, host, len(body))
	for k, v := range hdr {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	b.WriteString("\r\n" + body)
	if _, err := c.Write([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

func (e *env) threadCount() int {
	e.t.Helper()
	n := 0
	err := e.rt.store.View(context.Background(), func(tx store.Tx) error {
		ths, err := tx.ListThreads()
		n = len(ths)
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// A web page cannot drive the runtime with cross-site "simple" requests
// (text/plain or form bodies, which need no CORS preflight), nor through a
// DNS name rebound to the runtime's address; nothing such a request
// carries is stored. The runtime's own clients keep working.
func TestClientAPIRefusesWebPages(t *testing.T) {
	e := newEnv(t, envOptions{
		turns: []scripted.Turn{{Text: "ok", Repeat: true}},
		tweak: func(c *Config) { c.AllowedHosts = []string{"agent.internal"} },
	})
	th := e.newThread()
	local := strings.TrimPrefix(e.srv.URL, "http://")
	before := e.threadCount()

	cases := []struct {
		name   string
		method string
		path   string
		host   string
		hdr    map[string]string
		body   string
		status int
		want   string
	}{
		{"text/plain from another site", "POST", "/v1/threads", local,
			map[string]string{"Content-Type": "text/plain", "Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, `{}`, 403, "evil.example"},
		{"form post from another site", "POST", "/v1/threads/" + th + "/messages", local,
			map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": "https://evil.example"}, `text=hi`, 403, "cross-origin"},
		{"JSON claimed from another site", "POST", "/v1/threads", local,
			map[string]string{"Content-Type": "application/json", "Origin": "https://evil.example"}, `{}`, 403, "cross-origin"},
		{"cross-site without Origin", "POST", "/v1/threads", local,
			map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"}, `{}`, 403, "cross-site"},
		{"text/plain without browser headers", "POST", "/v1/threads/" + th + "/messages", local,
			map[string]string{"Content-Type": "text/plain"}, `{"text":"hi"}`, 415, "application/json"},
		{"bodyless close without JSON", "POST", "/v1/threads/" + th + "/close", local, nil, ``, 415, "application/json"},
		{"rebound name lists threads", "GET", "/v1/threads", "evil.example:" + e.srvPort(), nil, ``, 403, "evil.example"},
		{"rebound name posts", "POST", "/v1/threads/" + th + "/messages", "evil.example:" + e.srvPort(),
			map[string]string{"Content-Type": "application/json"}, `{"text":"hi"}`, 403, "--allowed-hosts"},
	}
	for _, c := range cases {
		status, body := rawRequest(t, e.srv.URL, c.method, c.path, c.host, c.hdr, c.body)
		if status != c.status || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s; want %d mentioning %q", c.name, status, body, c.status, c.want)
		}
	}
	if n := e.threadCount(); n != before {
		t.Errorf("refused requests created threads: %d before, %d after", before, n)
	}
	if h := e.history(th); len(h) != 0 {
		t.Errorf("refused requests stored messages: %+v", h)
	}

	// Allowed: the configured name, loopback names, the runtime's own
	// page (same origin), and a program that sends JSON.
	for _, c := range []struct {
		name string
		host string
		hdr  map[string]string
	}{
		{"allowed name", "agent.internal:" + e.srvPort(), nil},
		{"localhost", "localhost:" + e.srvPort(), nil},
		{"own page", local, map[string]string{"Origin": e.srv.URL, "Sec-Fetch-Site": "same-origin"}},
	} {
		hdr := map[string]string{"Content-Type": "application/json"}
		for k, v := range c.hdr {
			hdr[k] = v
		}
		if status, body := rawRequest(t, e.srv.URL, "GET", "/v1/threads", c.host, c.hdr, ``); status != 200 {
			t.Errorf("%s: list threads: %d %s", c.name, status, body)
		}
		if status, body := rawRequest(t, e.srv.URL, "POST", "/v1/threads", c.host, hdr, `{}`); status != 201 {
			t.Errorf("%s: create a thread: %d %s", c.name, status, body)
		}
	}
	if status, body := rawRequest(t, e.srv.URL, "POST", "/v1/threads/"+th+"/close", local, map[string]string{"Content-Type": "application/json"}, ``); status != 200 && status != 202 {
		t.Errorf("close with Content-Type: application/json and no body: %d %s", status, body)
	}
}

// The callback endpoint answers to any host name: tools reach it by
// whatever name the public URL gives, and each URL carries its own token.
func TestCallbackEndpointIgnoresHost(t *testing.T) {
	e := newEnv(t, envOptions{turns: []scripted.Turn{{Text: "ok", Repeat: true}}})
	status, body := rawRequest(t, e.srv.URL, "POST", CallbackPath+"not-a-token", "tools.cluster.svc:8080",
		map[string]string{"Content-Type": "application/json"}, `{}`)
	if strings.Contains(body, "host name") || !strings.Contains(body, "callback token") {
		t.Fatalf("callback under a foreign Host was refused by the browser checks: %d %s", status, body)
	}
}

// A message that is not valid UTF-8 is refused with 400, as the callback
// endpoint refuses one, and nothing is stored.
func TestPostMessageRefusesInvalidUTF8(t *testing.T) {
	e := newEnv(t, envOptions{turns: []scripted.Turn{{Text: "ok", Repeat: true}}})
	th := e.newThread()
	status, body := do(t, "POST", e.srv.URL+"/v1/threads/"+th+"/messages", "{\"text\":\"caf\xe9\"}")
	if status != http.StatusBadRequest || !strings.Contains(body, "UTF-8") || !strings.Contains(body, "offset 12") {
		t.Fatalf("invalid UTF-8: %d %s; want 400 naming UTF-8 and the offset", status, body)
	}
	if h := e.history(th); len(h) != 0 {
		t.Fatalf("the refused message was stored: %+v", h)
	}
}

func (e *env) srvPort() string {
	u, _ := url.Parse(e.srv.URL)
	return u.Port()
}
