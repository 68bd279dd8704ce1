package mcp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/rap/durable"
	"github.com/gorap/gorap/raptest"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// countSubs counts "+uri" entries the MCP server saw.
func countSubs(h *serverHooks, uri string) int {
	n := 0
	for _, e := range h.subEvents() {
		if e == "+"+uri {
			n++
		}
	}
	return n
}

// With a durable store, a resource subscription
// survives a restart of the bridge: the new bridge subscribes again at
// the MCP server and keeps delivering the updates to the same RAP
// callback.
func TestResourceSubscriptionSurvivesBridgeRestart(t *testing.T) {
	hooks := &serverHooks{release: make(chan struct{})}
	t.Cleanup(func() { close(hooks.release) })
	server := newTestServer(hooks)
	mcpHTTP := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, nil))
	t.Cleanup(mcpHTTP.Close)
	dbPath := filepath.Join(t.TempDir(), "bridge.db")
	rt, err := raptest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	ctx := ctxT(t)

	// start runs a bridge on the store; stop shuts it down and closes the store.
	start := func() (url string, stop func()) {
		st, err := durable.Open(dbPath)
		if err != nil {
			t.Fatal(err)
		}
		b, err := New(&Options{Name: "test", URL: mcpHTTP.URL, Logger: quietLogger(), Server: &rap.ServerOptions{Store: st}})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Start(ctx); err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(b)
		stopped := false
		stop = func() {
			if stopped {
				return
			}
			stopped = true
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = b.Shutdown(sctx)
			hs.Close()
			_ = st.Close()
		}
		t.Cleanup(stop)
		return hs.URL, stop
	}

	url, stop := start()
	c, err := rt.Invoke(ctx, url, "test_subscribe_resource", map[string]any{"uri": "mem://counter"})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := c.Result(ctx); err != nil || !res.Subscription {
		t.Fatalf("confirming result = %+v, %v", res, err)
	}
	waitFor(t, "the first subscription", func() bool { return countSubs(hooks, "mem://counter") == 1 })
	stop()

	start()
	waitFor(t, "the subscription renewed by the new bridge", func() bool { return countSubs(hooks, "mem://counter") == 2 })
	hooks.counter.Store(42)
	if err := server.ResourceUpdated(ctx, &sdk.ResourceUpdatedNotificationParams{URI: "mem://counter"}); err != nil {
		t.Fatal(err)
	}
	evs, err := c.Events(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(evs[0].Text, `"text":"42"`) {
		t.Errorf("event after the restart = %s", evs[0].Text)
	}
}
