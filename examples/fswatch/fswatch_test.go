package fswatch_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/display"
	"github.com/gorap/gorap/examples/fswatch"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/raptest"
)

func serve(t *testing.T) (context.Context, string, *raptest.Runtime) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	s := fswatch.New(&rap.ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	rt := raptest.NewRuntime()
	t.Cleanup(func() {
		sctx, c := context.WithTimeout(context.Background(), 10*time.Second)
		defer c()
		if err := s.Shutdown(sctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		srv.Close()
		rt.Close()
		if errs := rt.Errors(); len(errs) > 0 {
			t.Errorf("the tool sent bad callbacks: %v", errs)
		}
	})
	return ctx, srv.URL, rt
}

// subscribe starts a watch of dir and waits for its confirmation. The
// watch is live once confirmed (rap.ConfirmInHandler), so the caller may
// change dir at once.
func subscribe(t *testing.T, ctx context.Context, rt *raptest.Runtime, url, dir string, recursive bool) *raptest.Call {
	t.Helper()
	call, err := rt.Invoke(ctx, url, "watch_directory", map[string]any{"path": dir, "recursive": recursive})
	if err != nil {
		t.Fatal(err)
	}
	res, err := call.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Subscription {
		t.Fatalf("result %q is not a subscription confirmation", res.Text)
	}
	return call
}

// RAP SU-1: a file created right after the confirmation arrives is
// reported; nothing is missed between the confirmation and the watch.
func TestWatchLiveAtConfirmation(t *testing.T) {
	ctx, url, rt := serve(t)
	for i := range 5 {
		dir := t.TempDir()
		call := subscribe(t, ctx, rt, url, dir, i%2 == 1)
		f := filepath.Join(dir, "first.txt")
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, call, fswatch.Event{Op: "create", Path: f})
		if err := call.Cancel(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// waitFor reads events until one matches want, and returns the events read.
func waitFor(t *testing.T, ctx context.Context, call *raptest.Call, want fswatch.Event) []fswatch.Event {
	t.Helper()
	var got []fswatch.Event
	for {
		evs, err := call.Events(ctx, 1)
		if err != nil {
			t.Fatalf("waiting for %+v, got %+v: %v", want, got, err)
		}
		var ev fswatch.Event
		if err := json.Unmarshal([]byte(evs[0].Text), &ev); err != nil {
			t.Fatalf("event %q: %v", evs[0].Text, err)
		}
		got = append(got, ev)
		if ev == want {
			return got
		}
	}
}

func TestWatchReportsChanges(t *testing.T) {
	ctx, url, rt := serve(t)
	dir := t.TempDir()
	call := subscribe(t, ctx, rt, url, dir, false)
	f := filepath.Join(dir, "a.txt")
	if err := os.WriteFile(f, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, call, fswatch.Event{Op: "create", Path: f})
	if err := os.WriteFile(f, []byte("more"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, call, fswatch.Event{Op: "write", Path: f})
	g := filepath.Join(dir, "b.txt")
	if err := os.Rename(f, g); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, call, fswatch.Event{Op: "rename", Path: f})
	waitFor(t, ctx, call, fswatch.Event{Op: "create", Path: g})
	if err := os.Remove(g); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, call, fswatch.Event{Op: "remove", Path: g})
	for _, m := range call.Messages() {
		if ev, ok := m.(*rap.SubscriptionEvent); ok && ev.Final {
			t.Errorf("final event %q while the directory exists", ev.Text)
		}
	}
}

func TestWatchRecursive(t *testing.T) {
	ctx, url, rt := serve(t)
	dir := t.TempDir()
	deep := filepath.Join(dir, "old", "deeper")
	os.MkdirAll(deep, 0o700)
	call := subscribe(t, ctx, rt, url, dir, true)
	f := filepath.Join(deep, "x")
	os.WriteFile(f, nil, 0o600)
	waitFor(t, ctx, call, fswatch.Event{Op: "create", Path: f})
	sub := filepath.Join(dir, "new")
	os.Mkdir(sub, 0o700)
	waitFor(t, ctx, call, fswatch.Event{Op: "create", Path: sub})
	g := filepath.Join(sub, "y")
	os.WriteFile(g, nil, 0o600)
	waitFor(t, ctx, call, fswatch.Event{Op: "create", Path: g})
}

func TestWatchNotRecursive(t *testing.T) {
	ctx, url, rt := serve(t)
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	os.Mkdir(sub, 0o700)
	call := subscribe(t, ctx, rt, url, dir, false)
	os.WriteFile(filepath.Join(sub, "hidden"), nil, 0o600)
	sentinel := filepath.Join(dir, "sentinel")
	os.WriteFile(sentinel, nil, 0o600)
	got := waitFor(t, ctx, call, fswatch.Event{Op: "create", Path: sentinel})
	for _, ev := range got {
		if strings.HasPrefix(ev.Path, sub+string(filepath.Separator)) {
			t.Errorf("non-recursive watch reported %+v", ev)
		}
	}
}

// RAP SU-4: removing the watched directory ends the subscription with a
// final event.
func TestWatchRootRemovedIsFinal(t *testing.T) {
	ctx, url, rt := serve(t)
	dir := filepath.Join(t.TempDir(), "w")
	os.Mkdir(dir, 0o700)
	call := subscribe(t, ctx, rt, url, dir, false)
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	for {
		evs, err := call.Events(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		if evs[0].Final {
			if evs[0].Text != `{"op":"remove","path":"`+dir+`"}` {
				t.Errorf("final event %q", evs[0].Text)
			}
			return
		}
	}
}

// RAP IN-5, RE-4: a path that is not a directory gets an error result.
func TestWatchRejectsBadPath(t *testing.T) {
	ctx, url, rt := serve(t)
	file := filepath.Join(t.TempDir(), "f")
	os.WriteFile(file, nil, 0o600)
	for path, want := range map[string]string{
		"/no/such/dir": "does not exist",
		file:           "is a file, not a directory",
	} {
		call, err := rt.Invoke(ctx, url, "watch_directory", map[string]any{"path": path})
		if err != nil {
			t.Fatal(err)
		}
		res, err := call.Result(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if res.Subscription || !strings.HasPrefix(res.Text, "Error: ") || !strings.Contains(res.Text, want) {
			t.Errorf("%s: result %+v, want an error naming %q", path, res, want)
		}
	}
}

func TestDisplayScript(t *testing.T) {
	ctx, url, rt := serve(t)
	ts, err := rt.Discover(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	got := display.Render(ctx, "watch_directory", ts.Tools[0].DisplayScript, json.RawMessage(`{"path":"/srv","recursive":true}`))
	if got != "Watching /srv and below" {
		t.Errorf("display = %q", got)
	}
}
