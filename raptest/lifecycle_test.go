package raptest_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/examples/gettime"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/raptest"
)

// Close returns promptly after a test made several calls.
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
	// What a client's transport does when an idle connection frees up
	// before the one it dialed: the dialed one stays open, unused. Make
	// one such connection for certain.
	idle, err := net.Dial("tcp", strings.TrimPrefix(rt.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
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

// Runtime.ToolCallStatus asks a tool server about a call.
func TestToolCallStatusHelper(t *testing.T) {
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
	call, err := rt.Invoke(ctx, srv.URL, "subscribe_clock", map[string]any{"interval_seconds": 60})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := call.Result(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := rt.ToolCallStatus(ctx, srv.URL, rt.ThreadID(), call.Invocation.ID)
	if err != nil || st.Status != rap.CallSubscribed {
		t.Fatalf("status of a subscription: %+v, %v", st, err)
	}
	st, err = rt.ToolCallStatus(ctx, srv.URL, rt.ThreadID(), "call_unknown")
	if err != nil || st.Status != rap.CallUnknown || st.ToolCallID != "call_unknown" {
		t.Fatalf("status of an unknown call: %+v, %v", st, err)
	}
	// A server without the endpoint: a 404 without the JSON body is an error.
	plain := httptest.NewServer(http.NotFoundHandler())
	defer plain.Close()
	var se *raptest.StatusError
	if _, err := rt.ToolCallStatus(ctx, plain.URL, "t", "c"); !errors.As(err, &se) || se.Status != http.StatusNotFound {
		t.Fatalf("a server without the endpoint: %v, want a *StatusError with 404", err)
	}
}
