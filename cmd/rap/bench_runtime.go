package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/gorap/gorap/runtime/bench"
)

func init() {
	register(&command{
		name:    "bench-runtime",
		summary: "measure the runtime's tool-result → append → completion → dispatch cycle (cycles/s, p50/p99)",
		usage:   "rap bench-runtime [--threads N] [--duration D] [--data-dir DIR]",
		run:     runBenchRuntime,
	})
}

func runBenchRuntime(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := commands["bench-runtime"]
	fs := newFlagSet(c, stderr)
	var opts bench.CycleOptions
	var verbose bool
	fs.IntVar(&opts.Threads, "threads", 16, "`N` threads looping concurrently")
	fs.DurationVar(&opts.Duration, "duration", 10*time.Second, "measured `time`")
	fs.DurationVar(&opts.Warmup, "warmup", time.Second, "warm-up `time` before measuring")
	fs.StringVar(&opts.DataDir, "data-dir", "", "keep the SQLite store in `DIR` (default: a temporary directory on the same disk as $TMPDIR)")
	fs.BoolVar(&verbose, "verbose", false, "show the runtime's warnings")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, pos[0])
	}
	if opts.Threads < 1 || opts.Threads > 100_000 {
		return fmt.Errorf("%w: --threads %d: want 1 to 100000", errUsage, opts.Threads)
	}
	if opts.Duration <= 0 {
		return fmt.Errorf("%w: --duration must be positive", errUsage)
	}
	if verbose {
		opts.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	fmt.Fprintf(stdout, "rap bench-runtime: %d threads, %v (after %v warm-up); SQLite WAL, synchronous=FULL; scripted model in instant mode; loopback tool server\n",
		opts.Threads, opts.Duration, opts.Warmup)
	rep, err := bench.RunCycles(ctx, opts)
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, rep)
	return nil
}
