package raptest_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/gorap/gorap/examples/gettime"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/raptest"
)

// BenchmarkInvokeResult measures one whole call through the fake runtime:
// invocation, acknowledgement, tool_result callback, strict decoding and
// the wake-up of the waiting test. It bounds how many calls per second a
// test suite built on raptest can make.
func BenchmarkInvokeResult(b *testing.B) {
	ctx := context.Background()
	tool := gettime.New(&rap.ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	if err := tool.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer tool.Shutdown(ctx)
	srv := httptest.NewServer(tool)
	defer srv.Close()
	rt := raptest.NewRuntime()
	defer rt.Close()
	if _, err := rt.Discover(ctx, srv.URL); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		call, err := rt.Invoke(ctx, srv.URL, "get_current_time", nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := call.Result(ctx); err != nil {
			b.Fatal(err)
		}
		call.Close()
	}
	if errs := rt.Errors(); len(errs) > 0 {
		b.Fatal(errs)
	}
}
