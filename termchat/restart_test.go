package termchat

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime"
	"github.com/gorap/gorap/runtime/store/sqlite"
)

// Piped rap chat rides out a restart of the runtime while it waits for a
// tool: requests answered "503 Service Unavailable" meanwhile (a proxy in
// front of a runtime that restarts) are retried, the new runtime process
// receives the tool's result, and the chat prints the answer and exits
// with success.
func TestPipedChatRidesOutARestart(t *testing.T) {
	invoked, release := make(chan struct{}, 1), make(chan struct{})
	tools := rap.NewServer("slow", &rap.ServerOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	rap.AddTool(tools, &rap.Tool{Name: "slow_lookup", Description: "looks something up, slowly"}, func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
		invoked <- struct{}{}
		select {
		case <-release:
			return rap.Text("forty-two"), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	toolURL := serveToolServer(t, tools).URL
	script := []scripted.Turn{
		{AfterUser: "look up", Text: "Looking it up.", ToolCalls: []scripted.Call{{Name: "slow_lookup"}}},
		{When: &scripted.When{LastInput: "tool_result"}, Text: "Found: {{last_result}}"},
	}

	// One address for the whole test, as a proxy in front of the runtime
	// gives; behind it the runtime runs, stops and runs again.
	var handler atomic.Pointer[http.Handler]
	var refused atomic.Int64
	down := http.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A read of the thread (its status, its history, its events) is
		// what the chat makes while it waits, and what it must retry.
		if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/threads/") {
			refused.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		json.NewEncoder(w).Encode(map[string]string{"error": "the runtime is restarting"})
	}))
	handler.Store(&down)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*handler.Load()).ServeHTTP(w, r) }))
	t.Cleanup(front.Close)
	dir := t.TempDir()
	secret, err := runtime.LoadOrCreateSecret(dir)
	if err != nil {
		t.Fatal(err)
	}
	start := func() (stop func()) {
		st, err := sqlite.Open(filepath.Join(dir, "runtime.db"))
		if err != nil {
			t.Fatal(err)
		}
		rt, err := runtime.New(&runtime.Config{Store: st, Model: scripted.New(script), ToolServers: []string{toolURL},
			PublicURL: front.URL, Secret: secret, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		if err := rt.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		h := rt.Handler()
		handler.Store(&h)
		return func() {
			handler.Store(&down)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			rt.Shutdown(ctx)
			st.Close()
		}
	}
	stop := start()

	type result struct {
		out, errOut string
		err         error
	}
	done := make(chan result, 1)
	go func() {
		out, errOut, err := runChatFor(t, Options{Server: front.URL, Wait: 45 * time.Second}, "please look up the answer\n")
		done <- result{out, errOut, err}
	}()
	select {
	case <-invoked:
	case <-time.After(30 * time.Second):
		t.Fatal("the tool was never invoked")
	}
	stop() // the runtime restarts: its client API answers 503 meanwhile
	for deadline := time.Now().Add(30 * time.Second); refused.Load() < 1; time.Sleep(20 * time.Millisecond) {
		select {
		case r := <-done:
			t.Fatalf("the chat ended while the runtime was down: %v\nstdout:\n%s\nstderr:\n%s", r.err, r.out, r.errOut)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the chat did not read the thread while the runtime was down")
		}
	}
	stop = start()
	defer stop()
	close(release)
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("chat failed across the restart: %v\nstdout:\n%s\nstderr:\n%s", r.err, r.out, r.errOut)
		}
		if !strings.Contains(r.out, "Found: forty-two") {
			t.Errorf("the answer after the restart is missing:\n%s", r.out)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the chat did not finish after the runtime came back")
	}
}
