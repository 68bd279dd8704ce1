package raptest_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/gorap/gorap/examples/gettime"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/raptest"
)

// Testing a tool takes a real server on a loopback port, a fake runtime,
// one Invoke and one Result.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	tool := gettime.New(&rap.ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	if err := tool.Start(ctx); err != nil {
		panic(err)
	}
	defer tool.Shutdown(ctx)
	srv := httptest.NewServer(tool)
	defer srv.Close()

	rt := raptest.NewRuntime()
	defer rt.Close()
	call, err := rt.Invoke(ctx, srv.URL, "get_time_in_zone", map[string]string{"timezone": "Mars/Olympus_Mons"})
	if err != nil {
		panic(err)
	}
	res, err := call.Result(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(strings.HasPrefix(res.Text, "Error: "), len(rt.Errors()))
	// Output: true 0
}

// A subscription is confirmed by its result and then sends events; with a
// count, the last one is final.
func ExampleCall_Events() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	tool := gettime.New(&rap.ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	if err := tool.Start(ctx); err != nil {
		panic(err)
	}
	defer tool.Shutdown(ctx)
	srv := httptest.NewServer(tool)
	defer srv.Close()

	rt := raptest.NewRuntime()
	defer rt.Close()
	call, err := rt.Invoke(ctx, srv.URL, "subscribe_clock", map[string]any{"interval_seconds": 0.1, "count": 2})
	if err != nil {
		panic(err)
	}
	res, err := call.Result(ctx)
	if err != nil {
		panic(err)
	}
	events, err := call.Events(ctx, 2)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Subscription, events[0].Final, events[1].Final)
	// Output: true false true
}
