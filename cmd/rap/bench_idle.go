package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/gorap/gorap/runtime/bench"
	"github.com/spf13/cobra"
)

func newBenchIdleCmd(a *app) *cobra.Command {
	var opts bench.IdleOptions
	var verbose bool
	cmd := &cobra.Command{
		Use:   "bench-idle [flags]",
		Short: "measure the idle cost (goroutines, RSS) of many hibernating threads with pending calls, and the time a restart takes",
		Example: `  rap bench-idle
  rap bench-idle --threads 10000 --wake 10 --data-dir /tmp/idle
  rap bench-idle --threads 100000 --pending 10000 --store postgres://postgres@127.0.0.1:5432/bench`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBenchIdle(cmd.Context(), a, opts, verbose)
		},
	}
	fs := cmd.Flags()
	fs.IntVar(&opts.Threads, "threads", 100_000, "`N` hibernating threads")
	fs.IntVar(&opts.Pending, "pending", 0, "`N` of the threads wait for a tool call's result, the others answered in text (default: every thread)")
	fs.IntVar(&opts.Batch, "batch", 1000, "threads created per store transaction")
	fs.IntVar(&opts.Wake, "wake", 100, "`N` threads woken afterwards with a user message")
	fs.StringVar(&opts.DataDir, "data-dir", "", "keep the SQLite store in `DIR` (default: a temporary directory)")
	fs.StringVar(&opts.Store, "store", "", "create the threads in the PostgreSQL database of this postgres:// `URL` instead of SQLite")
	fs.BoolVar(&verbose, "verbose", false, "show the runtime's warnings and progress")
	return cmd
}

func runBenchIdle(ctx context.Context, a *app, opts bench.IdleOptions, verbose bool) error {
	stdout, stderr := a.stdout, a.stderr
	if opts.Threads < 1 || opts.Threads > 10_000_000 {
		return fmt.Errorf("%w: --threads %d: want 1 to 10000000", errUsage, opts.Threads)
	}
	if verbose {
		opts.Logger = a.logAtLeast(slog.LevelWarn)
		opts.Progress = func(n int) {
			if n%10_000 == 0 || n == opts.Threads {
				fmt.Fprintf(stderr, "created %d threads\n", n)
			}
		}
	}
	if opts.Pending < 0 || opts.Pending > opts.Threads {
		return fmt.Errorf("%w: --pending %d: want 0 (every thread) to --threads (%d)", errUsage, opts.Pending, opts.Threads)
	}
	pending := opts.Pending
	if pending == 0 {
		pending = opts.Threads
	}
	fmt.Fprintf(stdout, "rap bench-idle: %d threads, %d of them with a pending call, created through the store while the runtime runs; then the runtime restarts\n", opts.Threads, pending)
	rep, err := bench.RunIdle(ctx, opts)
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, rep)
	return nil
}
