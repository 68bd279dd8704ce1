package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sort"
	"strings"

	"github.com/gorap/gorap/runtime/config"
)

// ---- "rap bridge" parent verb ------------------------------------------
//
// "rap bridge KIND ..." runs a bridge that serves non-RAP tools as a RAP
// tool server. Each kind is a subverb in bridgeVerbs, registered from an
// init function (toolsjson here; "bridge mcp" can add itself the same way:
// bridgeVerbs["mcp"] = &command{...}). The dispatch below is all the
// parent does.

// bridgeVerbs are the subverbs of "rap bridge", by name.
var bridgeVerbs = map[string]*command{}

func init() {
	register(&command{
		name:    "bridge",
		summary: "serve non-RAP tools as a RAP tool server (rap bridge toolsjson BUNDLE)",
		usage:   "rap bridge KIND [flags] [arguments]",
		run:     runBridge,
	})
}

func runBridge(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	kinds := make([]string, 0, len(bridgeVerbs))
	for k := range bridgeVerbs {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintf(stdout, "usage: rap bridge KIND [flags] [arguments]\n\nKinds:\n")
		for _, k := range kinds {
			fmt.Fprintf(stdout, "  %-10s %s\n", k, bridgeVerbs[k].summary)
		}
		return nil
	}
	sub, ok := bridgeVerbs[args[0]]
	if !ok {
		return fmt.Errorf("%w: unknown bridge %q; want one of: %s", errUsage, args[0], strings.Join(kinds, ", "))
	}
	return sub.run(ctx, args[1:], stdout, stderr)
}

// ---- "rap bridge toolsjson" ---------------------------------------------

func init() {
	bridgeVerbs["toolsjson"] = &command{
		name:    "bridge toolsjson",
		summary: "serve the tools of a tools.json bundle (agents/NAME or agent.bundle) as a RAP tool server",
		usage:   "rap bridge toolsjson BUNDLE [--listen ADDR] [--allow-unsigned] [--no-confirm] [--secrets-file FILE] [--secret-command PROGRAM] [--data-dir DIR]",
		run:     runBridgeToolsJSON,
	}
}

func runBridgeToolsJSON(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := bridgeVerbs["toolsjson"]
	fs := newFlagSet(c, stderr)
	listen := fs.String("listen", "127.0.0.1:3101", "`ADDR` to listen on")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	var f toolsJSONFlags
	f.register(fs)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: want exactly one BUNDLE (a bundle directory or its tools.json), got %d arguments", errUsage, len(pos))
	}
	level, err := config.ParseLogLevel(*logLevel)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	s, b, closeFn, err := toolsJSONServer(pos[0], f, log, nil, stdout)
	if err != nil {
		return err
	}
	defer closeFn()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (pass --listen ADDR to use another address)", *listen, err)
	}
	if ta, ok := ln.Addr().(*net.TCPAddr); ok && !ta.IP.IsLoopback() && f.token == "" {
		ln.Close()
		return fmt.Errorf("%w: refusing to serve a bundle's tools on %s without --token: anyone who reaches it could run them; listen on loopback or set --token (or $%s)", errUsage, ln.Addr(), config.EnvToolToken)
	}
	fmt.Fprintf(stdout, "rap bridge toolsjson: serving %d tools of %s on http://%s\n", len(b.Tools), b.Dir, ln.Addr())
	for _, t := range b.Tools {
		fmt.Fprintf(stdout, "  %-28s %s (%s)\n", t.Name, t.ID, t.Transport.Kind)
	}
	fmt.Fprintf(stdout, "  trace: %s\n", s.TracePath())
	return serveToolsJSON(ctx, s, ln)
}
