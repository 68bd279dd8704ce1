package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/gorap/gorap/runtime/bench"
)

func init() {
	register(&command{
		name:    "bench-idle",
		summary: "measure the idle cost (goroutines, RSS) of many hibernating threads with pending calls",
		usage:   "rap bench-idle [--threads N] [--wake N] [--data-dir DIR]",
		run:     runBenchIdle,
	})
}

func runBenchIdle(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := commands["bench-idle"]
	fs := newFlagSet(c, stderr)
	var opts bench.IdleOptions
	var verbose bool
	fs.IntVar(&opts.Threads, "threads", 100_000, "`N` hibernating threads, each with a pending tool call")
	fs.IntVar(&opts.Batch, "batch", 1000, "threads created per store transaction")
	fs.IntVar(&opts.Wake, "wake", 100, "`N` threads woken afterwards with a user message")
	fs.StringVar(&opts.DataDir, "data-dir", "", "keep the SQLite store in `DIR` (default: a temporary directory)")
	fs.BoolVar(&verbose, "verbose", false, "show the runtime's warnings and progress")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, pos[0])
	}
	if opts.Threads < 1 || opts.Threads > 10_000_000 {
		return fmt.Errorf("%w: --threads %d: want 1 to 10000000", errUsage, opts.Threads)
	}
	if verbose {
		opts.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
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
