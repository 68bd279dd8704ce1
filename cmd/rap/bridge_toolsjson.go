package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"

	"github.com/gorap/gorap/runtime/config"
)

// ---- "rap bridge toolsjson" ---------------------------------------------

func init() {
	registerBridge(&command{
		name:    "toolsjson",
		summary: "serve the tools of a tools.json bundle (agents/NAME or agent.bundle) as a RAP tool server",
		usage:   "rap bridge toolsjson BUNDLE [--listen ADDR] [--allow-unsigned] [--no-confirm] [--secrets-file FILE] [--secret-command PROGRAM] [--data-dir DIR]",
		run:     runBridgeToolsJSON,
	})
}

func runBridgeToolsJSON(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := bridgeCommands["toolsjson"]
	c = &command{name: "bridge toolsjson", usage: c.usage, summary: c.summary}
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
