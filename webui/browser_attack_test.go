package webui_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/gorap/gorap/model/scripted"
)

// threadCount lists the runtime's threads over its API, as a program
// (not a browser) does.
func (s *stack) threadCount() int {
	s.t.Helper()
	resp, err := http.Get(s.URL + "/v1/threads")
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	var page struct{ Threads []json.RawMessage }
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		s.t.Fatal(err)
	}
	return len(page.Threads)
}

// fetchStatus evaluates a promise of an HTTP status in the page.
func (b *browser) fetchStatus(expr string) float64 {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, waitFor)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[float64](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// In a real browser, a page of another site cannot create threads or post
// messages in a local runtime without a token, by any request a page may
// send without the runtime's consent (text/plain and form bodies, a form
// posted in a frame), and a page whose name is rebound to the runtime's
// address is refused; the web UI itself still works.
func TestBrowserWebPagesCannotDriveTheRuntime(t *testing.T) {
	s := newStack(t, stackOptions{model: scripted.New([]scripted.Turn{{Text: "ok", Repeat: true}})})
	// The thread the attacks aim their messages at.
	resp, err := http.Post(s.URL+"/v1/threads", "application/json", strings.NewReader(`{}`))
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("create a thread: %v %v", resp, err)
	}
	var th struct{ ID string }
	json.NewDecoder(resp.Body).Decode(&th)
	resp.Body.Close()
	before := s.threadCount()

	target := s.URL
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(`<!doctype html><html><body>
<iframe name="sink"></iframe>
<form id="f" method="POST" target="sink" action="` + target + `/v1/threads/` + th.ID + `/messages" enctype="text/plain">
<input name='{"text":"from a form","x":"' value='"}'></form>
<script>
window.results = [];
const post = (path, type, body) => fetch('` + target + `' + path, {method: 'POST', mode: 'no-cors', headers: {'Content-Type': type}, body})
  .then(() => results.push('sent'), (e) => results.push('error ' + e));
Promise.all([
  post('/v1/threads', 'text/plain', '{}'),
  post('/v1/threads/` + th.ID + `/messages', 'text/plain', '{"text":"from text/plain"}'),
  post('/v1/threads/` + th.ID + `/messages', 'application/x-www-form-urlencoded', 'text=from+a+form'),
]).then(() => { document.getElementById('f').submit(); window.done = true; });
</script></body></html>`))
	}))
	t.Cleanup(evil.Close)

	u, _ := url.Parse(s.URL)
	b := newBrowser(t, 800, 600, chromedp.Flag("host-resolver-rules", "MAP rebound.example 127.0.0.1"))
	b.allowNetworkErrors.Store(true)
	b.run("open the other site's page", chromedp.Navigate(evil.URL))
	b.wait("the page's requests to be sent", "window.done === true")
	// The form post goes on after the page's scripts: give it time to
	// reach the runtime (and be refused) by loading the sink's answer.
	b.wait("the framed form post to be answered", `(() => { try { return frames[0].location.href !== 'about:blank' } catch (e) { return true } })()`)
	if n := s.threadCount(); n != before {
		t.Errorf("another site's page created threads: %d before, %d after", before, n)
	}
	if h, err := s.RT.History(t.Context(), th.ID); err != nil || len(h) != 0 {
		t.Errorf("another site's page posted messages: %v %v", h, err)
	}

	// DNS rebinding: the browser resolves rebound.example to the runtime.
	rebound := "http://rebound.example:" + u.Port()
	b.run("open the runtime under a rebound name", chromedp.Navigate(rebound+"/"))
	b.wait("the refusal", `document.body.innerText.includes('does not answer to the host name')`)
	status := b.fetchStatus(`fetch('/v1/threads', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: '{}'}).then(r => r.status)`)
	if status != http.StatusForbidden {
		t.Errorf("a same-origin request under the rebound name: %v, want 403", status)
	}
	if n := s.threadCount(); n != before {
		t.Errorf("the rebound page created threads: %d before, %d after", before, n)
	}

	// The web UI under its own address still creates and lists threads.
	b.run("open the web UI", chromedp.Navigate(s.URL+"/"))
	status = b.fetchStatus(`fetch('/v1/threads', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: '{}'}).then(r => r.status)`)
	if status != http.StatusCreated {
		t.Errorf("the web UI's own request: %v, want 201", status)
	}
	if n := s.threadCount(); n != before+1 {
		t.Errorf("after the web UI's request: %d threads, want %d", n, before+1)
	}
}
