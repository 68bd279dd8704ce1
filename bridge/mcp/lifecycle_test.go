package mcp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Shutting the bridge down mid-call ends the call with one
// Error: result and cancels the MCP request.
func TestShutdownMidCall(t *testing.T) {
	f := startHTTP(t, nil)
	ctx := ctxT(t)
	c, err := f.rt.Invoke(ctx, f.url, "block", map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the MCP server to start the call", func() bool { return f.hooks.startedCalls() == 1 })
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := f.bridge.Shutdown(sctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	res, err := c.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Text, "Error: ") || !strings.Contains(res.Text, "shut down") {
		t.Errorf("result = %q", res.Text)
	}
}

// Supervision: a call made while the stdio server is
// down and cannot come back ends with an Error: result that says so.
func TestCallWhileServerDown(t *testing.T) {
	f := startStdio(t, func(o *Options) {
		o.MinBackoff, o.MaxBackoff, o.RestartWait = time.Hour, time.Hour, 300*time.Millisecond
	})
	ctx := ctxT(t)
	c, err := f.rt.Invoke(ctx, f.url, "crash", map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Result(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the bridge to notice the server is gone", func() bool {
		f.bridge.mu.Lock()
		defer f.bridge.mu.Unlock()
		return f.bridge.session == nil
	})
	start := time.Now()
	r := f.call(t, "echo", map[string]any{"text": "anyone?"})
	if !strings.HasPrefix(r.Text, "Error: the MCP server \"stdio\"") || !strings.Contains(r.Text, "is not running") {
		t.Errorf("result = %q", r.Text)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("answered after %v; a call should wait RestartWait (300ms) for a restart", d)
	}
}

// swapHandler serves whatever handler it currently holds.
type swapHandler struct{ h atomic.Pointer[http.Handler] }

func (s *swapHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*s.h.Load()).ServeHTTP(w, r)
}

// Supervision: a Streamable HTTP server that restarted
// (its sessions are gone) is reconnected; calls work again.
func TestHTTPServerRestartReconnects(t *testing.T) {
	newHandler := func() http.Handler {
		s := newTestServer(&serverHooks{release: make(chan struct{})})
		var h http.Handler = sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil)
		return h
	}
	sw := &swapHandler{}
	h := newHandler()
	sw.h.Store(&h)
	hs := httptest.NewServer(sw)
	t.Cleanup(hs.Close)
	f := startBridge(t, &Options{Name: "remote", URL: hs.URL, Logger: quietLogger(), MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})
	if got := f.call(t, "echo", map[string]any{"text": "one"}).Text; got != "one" {
		t.Fatalf("echo = %q", got)
	}
	h2 := newHandler() // the server "restarted": the bridge's session is unknown to it
	sw.h.Store(&h2)
	deadline := time.Now().Add(15 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		if last = f.call(t, "echo", map[string]any{"text": "two"}).Text; last == "two" {
			return
		}
		if !strings.HasPrefix(last, "Error: ") {
			t.Fatalf("echo after the restart = %q", last)
		}
	}
	t.Fatalf("the bridge did not reconnect; last result %q", last)
}
