package main

import (
	"context"
	"fmt"

	"github.com/gorap/gorap/runtime/bench"
	"github.com/spf13/cobra"
)

func newBenchLatencyCmd(a *app) *cobra.Command {
	var opts bench.LatencyOptions
	cmd := &cobra.Command{
		Use:   "bench-latency [flags]",
		Short: "measure what the runtime adds to a user's wait: message to first streamed word, tool result to model request",
		Long: `Measures what the runtime itself adds to what a user waits for, with a
model and a tool that both answer at once, so that every microsecond shown
is the runtime's (durable writes included):

  message→first word  from a user message POSTed to the client API to the
                      first text_delta event of the answer on the thread's
                      event stream;
  callback→model      from a tool's result POSTed to the callback URL to
                      the start of the model request that carries it.

--threads threads play --rounds rounds at once, each round a message answered
in words and a message answered through a tool call. Everything runs in this
process on loopback, on SQLite in a temporary directory or on the PostgreSQL
database of --store.`,
		Example: `  rap bench-latency
  rap bench-latency --threads 128 --rounds 20 --pause 1s
  rap bench-latency --rounds 200 --stages
  rap bench-latency --store postgres://postgres@127.0.0.1:5432/bench`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBenchLatency(cmd.Context(), a, opts)
		},
	}
	fs := cmd.Flags()
	fs.IntVar(&opts.Threads, "threads", 1, "`N` threads taking turns at once")
	fs.IntVar(&opts.Rounds, "rounds", 50, "`N` rounds per thread")
	fs.DurationVar(&opts.Pause, "pause", 0, "mean `TIME` a thread waits between its rounds, as a user would (0: back to back, the runtime saturated)")
	fs.StringVar(&opts.DataDir, "data-dir", "", "keep the SQLite store in `DIR` (default: a temporary directory)")
	fs.BoolVar(&opts.Stages, "stages", false, "also break the callback→model time down by stage, read from the runtime's own spans (making them costs a little)")
	fs.StringVar(&opts.Store, "store", "", "run on the PostgreSQL database of this postgres:// `URL` instead of SQLite")
	return cmd
}

func runBenchLatency(ctx context.Context, a *app, opts bench.LatencyOptions) error {
	if opts.Threads < 1 || opts.Threads > 10_000 {
		return fmt.Errorf("%w: --threads %d: want 1 to 10000", errUsage, opts.Threads)
	}
	if opts.Rounds < 1 || opts.Rounds > 100_000 {
		return fmt.Errorf("%w: --rounds %d: want 1 to 100000", errUsage, opts.Rounds)
	}
	fmt.Fprintf(a.stderr, "rap bench-latency: %d threads × %d rounds, instant model and tool...\n", opts.Threads, opts.Rounds)
	rep, err := bench.RunLatency(ctx, opts)
	if err != nil {
		return err
	}
	fmt.Fprint(a.stdout, rep)
	return nil
}
