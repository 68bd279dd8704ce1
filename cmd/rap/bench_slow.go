package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gorap/gorap/cmd/rap/internal/loadtest"
	"github.com/gorap/gorap/rap"
)

// newBenchSlowCmd is the hidden "rap bench-slow": the figures of
// docs/benchmarks.md's "Memory and latency under abuse".
func newBenchSlowCmd(a *app) *cobra.Command {
	var cfg loadtest.SlowConfig
	cmd := &cobra.Command{
		Use:   "bench-slow [flags] [-- SERVER-COMMAND...]",
		Short: "measure a server's memory and a legitimate client's latency while thousands of slow clients hold connections",
		Long: `Keeps --conns slow connections open against a server (half send part of a
request's headers and stall; half send the headers of a 1 MB body and trickle
it a byte a second for 10 s, then stall; each is reopened when the server
closes it, after --reconnect), and after --ramp sends a legitimate GET --path on a new
connection every --every for --duration. It reports that request's latency
percentiles (a failure counts at the time it failed) and the server's RSS.

The server is either --url (and --pid, to sample its RSS), or the command
after "--", started here; the first http://host:port it prints is its URL.`,
		Example: `  rap bench-slow -- rap example get-time --listen 127.0.0.1:0
  rap bench-slow --path /v1/threads --body-path /v1/threads -- rap serve --model scripted:script.json --listen 127.0.0.1:0
  rap bench-slow --url http://127.0.0.1:3101 --pid 4242`,
		Hidden: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Command = args
			if (cfg.URL == "") == (len(args) == 0) {
				return usageErrorf("give the server as --url URL or as a command after --, not both")
			}
			if cfg.Conns < 1 || cfg.Every <= 0 || cfg.Duration <= 0 {
				return usageErrorf("--conns, --every and --duration must be positive")
			}
			return runBenchSlow(cmd.Context(), a, cfg)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&cfg.URL, "url", "", "base `URL` of a running server")
	fs.IntVar(&cfg.PID, "pid", 0, "`PID` of the server at --url, whose RSS is sampled")
	fs.IntVar(&cfg.Conns, "conns", 5000, "`N` slow connections")
	fs.DurationVar(&cfg.Ramp, "ramp", 5*time.Second, "how long the slow clients run before the measurement")
	fs.DurationVar(&cfg.Duration, "duration", 30*time.Second, "how long the measurement lasts")
	fs.DurationVar(&cfg.Every, "every", 100*time.Millisecond, "interval between two legitimate requests")
	fs.StringVar(&cfg.Path, "path", rap.WellKnownPath, "`PATH` of the legitimate GET request")
	fs.StringVar(&cfg.BodyPath, "body-path", "/", "`PATH` the slow bodies are POSTed to")
	fs.DurationVar(&cfg.Timeout, "timeout", 60*time.Second, "bound of one legitimate request")
	fs.DurationVar(&cfg.Reconnect, "reconnect", time.Second, "how long a slow client waits before reopening a connection the server closed, as slowloris-style tools do")
	return cmd
}

func runBenchSlow(ctx context.Context, a *app, cfg loadtest.SlowConfig) error {
	rep, err := loadtest.RunSlow(ctx, cfg, a.stderr)
	if err != nil {
		return fmt.Errorf("bench-slow: %w", err)
	}
	loadtest.PrintSlowReport(a.stdout, cfg, rep)
	return nil
}
