package otc

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/rap/durable"
	"github.com/gorap/gorap/raptest"
)

// durableBridge starts a bridge on st, served over loopback, and returns
// its URL and a function that shuts it down (also run when the test ends).
func durableBridge(t *testing.T, o Options, st *durable.Store) (string, func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o.Logger = slog.New(slog.DiscardHandler)
	o.Server = &rap.ServerOptions{Store: st, Retry: rap.RetryPolicy{Initial: 5 * time.Millisecond, Max: 50 * time.Millisecond}}
	b, err := New(ctx, &o)
	if err != nil {
		t.Fatal(err)
	}
	// Delivery runs until the context of Start ends: not this function's.
	if err := b.Server().Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(b.Server())
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		hs.Close()
		sctx, c := context.WithTimeout(context.Background(), 10*time.Second)
		defer c()
		if err := b.Server().Shutdown(sctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	}
	t.Cleanup(stop)
	return hs.URL, stop
}

// durableWait bounds the waits of the durability tests.
const durableWait = 60 * time.Second

func openStore(t *testing.T) *durable.Store {
	t.Helper()
	st, err := durable.Open(filepath.Join(t.TempDir(), "bridge.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// journalHas reports whether the journal holds a call whose saved state
// contains s.
func journalHas(t *testing.T, st *durable.Store, s string) bool {
	calls, err := st.UnfinishedCalls(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range calls {
		if strings.Contains(string(c.State), s) {
			return true
		}
	}
	return false
}

// waitUntil polls cond until it holds or durableWait passes.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(durableWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", durableWait, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// messages counts a call's callbacks by type.
func messages(c *raptest.Call) (results, oauth int) {
	for _, m := range c.Messages() {
		switch m.(type) {
		case *rap.ToolResult:
			results++
		case *rap.OAuth:
			oauth++
		}
	}
	return results, oauth
}

// An Arcade worker does not deduplicate calls by execution_id: a call the
// bridge was running when it stopped may or may not have run, so the
// restarted bridge ends it with one error result that says so, and does
// not send it again.
func TestArcadeCallInterruptedByRestartEndsWithError(t *testing.T) {
	w := newArcadeWorker(t, "worker-secret-1")
	st := openStore(t)
	rt, err := raptest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts := Options{Client: &Client{BaseURL: w.srv.URL, Secret: []byte("worker-secret-1")}}
	url, stop := durableBridge(t, opts, st)
	call, err := rt.Invoke(ctx, url, "Slow_Hang", nil)
	if err != nil {
		t.Fatal(err)
	}
	<-w.started
	stop() // the call is left in the journal
	if n := len(call.Messages()); n != 0 {
		t.Fatalf("the call got %d callbacks at shutdown, want none", n)
	}
	durableBridge(t, Options{Client: &Client{BaseURL: w.srv.URL, Secret: []byte("worker-secret-1")}}, st)
	res, err := call.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if txt := res.ModelText(); !strings.HasPrefix(txt, "Error: ") || !strings.Contains(txt, "may or may not have run") {
		t.Fatalf("result %q, want an error saying the call may or may not have run", txt)
	}
	w.mu.Lock()
	n := len(w.requests)
	w.mu.Unlock()
	if n != 1 {
		t.Errorf("the worker got %d requests, want 1: the call must not be repeated", n)
	}
}

// A call waiting for an authorization when the bridge stops is resumed by
// the next start: without a check_url (Arcade) it repeats the call until
// the worker runs it; the user is not shown the link again and the runtime
// gets one result.
func TestArcadeAuthorizationWaitResumesAfterRestart(t *testing.T) {
	w := newArcadeWorker(t, "worker-secret-1")
	st := openStore(t)
	rt, err := raptest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := func() *Client { return &Client{BaseURL: w.srv.URL, Secret: []byte("worker-secret-1")} }
	// The first bridge waits long between checks, so that it stops while
	// it waits, not while it repeats the call.
	url, stop := durableBridge(t, Options{Client: client(), AuthPollMin: time.Hour}, st)
	call, err := rt.Invoke(ctx, url, "Github_Me", nil, raptest.WithUserID("ada"))
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the bridge to save that it waits for the authorization", func() bool { return journalHas(t, st, `"phase":"auth"`) })
	stop()
	w.authorized.Store(true)
	durableBridge(t, Options{Client: client(), AuthPollMin: 5 * time.Millisecond, AuthPollMax: 20 * time.Millisecond}, st)
	res, err := call.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.ModelText() != "octocat (ada)" {
		t.Fatalf("result %q", res.ModelText())
	}
	if results, oauth := messages(call); results != 1 || oauth != 1 {
		t.Errorf("%d results and %d oauth messages, want 1 and 1", results, oauth)
	}
	waitUntil(t, "the journal to forget the call", func() bool {
		calls, err := st.UnfinishedCalls(ctx)
		return err == nil && len(calls) == 0
	})
}
