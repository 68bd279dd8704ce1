package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"

	"github.com/gorap/gorap/bridge/toolsjson"
)

func init() {
	register(&command{
		name:    "replay",
		summary: "serve a tools.json bundle from a recorded trace: recorded calls get their recorded results, nothing runs",
		usage:   "rap replay TRACE --bundle PATH [--listen ADDR]",
		run:     runReplay,
	})
}

func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := commands["replay"]
	fs := newFlagSet(c, stderr)
	bundle := fs.String("bundle", "", "the bundle `PATH` (directory or tools.json) the trace was recorded with")
	listen := fs.String("listen", "127.0.0.1:3101", "`ADDR` to listen on")
	var f toolsJSONFlags
	f.register(fs)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || *bundle == "" {
		return fmt.Errorf("%w: want one TRACE file and --bundle PATH", errUsage)
	}
	rp, err := toolsjson.LoadReplay(pos[0])
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	s, b, closeFn, err := toolsJSONServer(*bundle, f, log, rp, stdout)
	if err != nil {
		return err
	}
	defer closeFn()
	for _, id := range rp.Missing(b) {
		fmt.Fprintf(stdout, "MISSING TOOL: the trace records tool %q, which the bundle does not serve; its calls cannot be replayed\n", id)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (pass --listen ADDR to use another address)", *listen, err)
	}
	fmt.Fprintf(stdout, "rap replay: serving %d tools of %s from %s on http://%s (REPLAY: nothing runs)\n", len(b.Tools), b.Dir, pos[0], ln.Addr())
	return serveToolsJSON(ctx, s, ln)
}
