package main

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/gorap/gorap/examples/gettime"
	"github.com/gorap/gorap/rap"
)

// startGettime serves the gettime example tool server over loopback.
func startGettime(t testing.TB, opts *rap.ServerOptions) string {
	t.Helper()
	if opts == nil {
		opts = &rap.ServerOptions{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := gettime.New(opts)
	srv := serveToolServer(t, s)
	return srv.URL
}

func wantLines(t *testing.T, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q; output:\n%s", w, out)
		}
	}
}
