package main

import (
	"context"
	"fmt"
	"net"

	"github.com/gorap/gorap/bridge/toolsjson"
	"github.com/spf13/cobra"
)

func newReplayCmd(a *app) *cobra.Command {
	var f toolsJSONFlags
	var bundle, listen string
	cmd := &cobra.Command{
		Use:   "replay TRACE --bundle PATH [flags]",
		Short: "serve a tools.json bundle from a recorded trace: recorded calls get their recorded results, nothing runs",
		Example: `  rap replay ~/.local/share/rap/toolsjson/traces/2026-11-23T10-00-00.jsonl --bundle agents/weather
  rap replay trace.jsonl --bundle agents/weather --listen 127.0.0.1:3102`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runReplay(cmd.Context(), a, f, bundle, listen, args)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&bundle, "bundle", "", "the bundle `PATH` (directory or tools.json) the trace was recorded with")
	fs.StringVar(&listen, "listen", "127.0.0.1:3101", "`ADDR` to listen on")
	f.register(fs, a.getenv)
	return cmd
}

func runReplay(ctx context.Context, a *app, f toolsJSONFlags, bundleFlag, listenFlag string, pos []string) error {
	stdout, bundle, listen := a.stdout, &bundleFlag, &listenFlag
	if len(pos) != 1 || *bundle == "" {
		return fmt.Errorf("%w: want one TRACE file and --bundle PATH", errUsage)
	}
	rp, err := toolsjson.LoadReplay(pos[0])
	if err != nil {
		return err
	}
	log := a.log
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
	url, _ := listenURLs("http", ln.Addr())
	fmt.Fprintf(stdout, "rap replay: serving %s of %s from %s on %s (REPLAY: nothing runs)\n", plural(len(b.Tools), "tool"), b.Dir, pos[0], url)
	return serveToolsJSON(ctx, s, ln)
}
