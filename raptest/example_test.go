package raptest_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gorap/gorap/examples/gettime"
	"github.com/gorap/gorap/examples/notes"
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

// A tool server whose state moves with a session is tested with two real
// servers: Migrate asks the source to move the session, as a runtime
// moving it to another runtime does, and returns once the destination
// holds it (RAP MI-1).
func ExampleRuntime_Migrate() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// Two notes servers, as the source and the destination runtime would
	// run them, sharing the peer token that signs the notes they exchange.
	dir, err := os.MkdirTemp("", "notes")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	start := func(name string) (*notes.Server, *httptest.Server) {
		s, err := notes.New(&notes.Options{Dir: filepath.Join(dir, name), PeerToken: "shared-secret",
			Server: &rap.ServerOptions{Logger: slog.New(slog.DiscardHandler)}})
		if err != nil {
			panic(err)
		}
		if err := s.Start(ctx); err != nil {
			panic(err)
		}
		return s, httptest.NewServer(s)
	}
	srcTool, src := start("source")
	defer srcTool.Shutdown(ctx)
	defer src.Close()
	dstTool, dst := start("destination")
	defer dstTool.Shutdown(ctx)
	defer dst.Close()

	rt := raptest.NewRuntime(raptest.WithDefaultThread("session-1"))
	defer rt.Close()
	text := func(base, tool string, args any) string {
		call, err := rt.Invoke(ctx, base, tool, args)
		if err != nil {
			panic(err)
		}
		res, err := call.Result(ctx)
		if err != nil {
			panic(err)
		}
		return res.Text
	}
	fmt.Println(text(src.URL, "add_note", map[string]string{"text": "the meeting is at noon"}))
	if err := rt.Migrate(ctx, src.URL, "session-1", dst.URL); err != nil {
		panic(err)
	}
	fmt.Println(text(dst.URL, "list_notes", nil))
	fmt.Println(text(src.URL, "list_notes", nil))
	// Output:
	// noted (1 note in this session)
	// the meeting is at noon
	// no notes yet
}
