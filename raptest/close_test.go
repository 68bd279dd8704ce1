package raptest_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gorap/gorap/examples/gettime"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/raptest"
)

// issue 9 item 22: Close returns promptly after a test made several calls.
// A tool's callback client may open a connection it ends up not using; the
// HTTP server's graceful shutdown counted such a never-used connection as
// busy for 5 s, so Close stalled.
func TestCloseAfterSeveralCallsIsPrompt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tool := gettime.New(&rap.ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	if err := tool.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer tool.Shutdown(ctx)
	srv := httptest.NewServer(tool)
	defer srv.Close()

	rt := raptest.NewRuntime()
	defer rt.Close()
	var calls []*raptest.Call
	for range 3 {
		call, err := rt.Invoke(ctx, srv.URL, "get_time_in_zone", map[string]string{"timezone": "UTC"})
		if err != nil {
			t.Fatal(err)
		}
		calls = append(calls, call)
	}
	for _, call := range calls {
		if _, err := call.Result(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// A generous bound, far below the 5 s stall, measured with a deadline.
	closed := make(chan struct{})
	go func() { rt.Close(); close(closed) }()
	bound, stop := context.WithTimeout(ctx, 3*time.Second)
	defer stop()
	select {
	case <-closed:
	case <-bound.Done():
		t.Fatal("raptest.Runtime.Close did not return within 3 s after 3 calls")
	}
}
