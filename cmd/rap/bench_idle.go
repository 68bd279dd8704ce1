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
		Short: "measure the idle cost (goroutines, RSS) of many hibernating threads with pending calls",
		Example: `  rap bench-idle
  rap bench-idle --threads 10000 --wake 10 --data-dir /tmp/idle`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBenchIdle(cmd.Context(), a, opts, verbose)
		},
	}
	fs := cmd.Flags()
	fs.IntVar(&opts.Threads, "threads", 100_000, "`N` hibernating threads, each with a pending tool call")
	fs.IntVar(&opts.Batch, "batch", 1000, "threads created per store transaction")
	fs.IntVar(&opts.Wake, "wake", 100, "`N` threads woken afterwards with a user message")
	fs.StringVar(&opts.DataDir, "data-dir", "", "keep the SQLite store in `DIR` (default: a temporary directory)")
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
	fmt.Fprintf(stdout, "rap bench-idle: %d threads with a pending call each, created through the store while the runtime runs\n", opts.Threads)
	rep, err := bench.RunIdle(ctx, opts)
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, rep)
	return nil
}
