package main

import (
	"context"
	"fmt"
	"net"

	"github.com/gorap/gorap/runtime/config"
	"github.com/spf13/cobra"
)

// ---- "rap bridge toolsjson" ---------------------------------------------

func newBridgeToolsJSONCmd(a *app) *cobra.Command {
	var f toolsJSONFlags
	var listen, metricsListen string
	cmd := &cobra.Command{
		Use:   "toolsjson BUNDLE [flags]",
		Short: "serve the tools of a tools.json bundle (agents/NAME or agent.bundle) as a RAP tool server",
		Long: `Serves the tools of a tools.json bundle (a bundle directory or its tools.json)
as a RAP tool server, recording a trace of every call (rap replay serves it
again) and an audit log. See docs/toolsjson.md.`,
		Example: `  rap bridge toolsjson agents/weather
  rap bridge toolsjson agents/weather --listen 127.0.0.1:3101 --secrets-file ~/.config/rap/secrets`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("want exactly one BUNDLE (a bundle directory or its tools.json), got %d arguments", len(args))
			}
			reg, stopMetrics, err := bridgeMetrics(cmd.Context(), "toolsjson", metricsListen, a.stdout, a.log) // bridge_metrics.go
			if err != nil {
				return err
			}
			defer stopMetrics()
			f.metrics = reg
			tp, log, stopTracing, err := startTracing(cmd.Context(), "gorap-bridge-toolsjson", a.log) // tracing.go
			if err != nil {
				return err
			}
			defer stopTracing()
			f.tracer = tp
			run := *a
			run.log = log
			return runBridgeToolsJSON(cmd.Context(), &run, f, listen, args[0])
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:3101", "`ADDR` to listen on")
	addMetricsListenFlag(cmd.Flags(), &metricsListen)
	f.register(cmd.Flags(), a.getenv)
	return cmd
}

func runBridgeToolsJSON(ctx context.Context, a *app, f toolsJSONFlags, listen, bundle string) error {
	stdout, log, pos := a.stdout, a.log, []string{bundle}
	s, b, closeFn, err := toolsJSONServer(pos[0], f, log, nil, stdout)
	if err != nil {
		return err
	}
	defer closeFn()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (pass --listen ADDR to use another address)", listen, err)
	}
	if ta, ok := ln.Addr().(*net.TCPAddr); ok && !ta.IP.IsLoopback() && f.token == "" {
		ln.Close()
		return fmt.Errorf("%w: refusing to serve a bundle's tools on %s without --tool-token: anyone who reaches it could run them; listen on loopback or set --tool-token (or $%s)", errUsage, ln.Addr(), config.EnvToolToken)
	}
	url, _ := listenURLs("http", ln.Addr())
	fmt.Fprintf(stdout, "rap bridge toolsjson: serving %s of %s on %s\n", plural(len(b.Tools), "tool"), b.Dir, url)
	for _, t := range b.Tools {
		fmt.Fprintf(stdout, "  %-28s %s (%s)\n", t.Name, t.ID, t.Transport.Kind)
	}
	fmt.Fprintf(stdout, "  trace: %s\n", s.TracePath())
	return serveToolsJSON(ctx, s, ln)
}
