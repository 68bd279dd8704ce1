package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gorap/gorap/cmd/rap/internal/loadtest"
)

func newLoadtestCmd(a *app) *cobra.Command {
	var cfg loadtest.Config
	var argsFlag, cpuProfile string
	cmd := &cobra.Command{
		Use:   "loadtest ack [--url BASE | --server-proc] [--rate N] [--duration D] [--warmup D] [--concurrency C]",
		Short: "measure how fast a tool server acknowledges invocations",
		Long: `Sends invocations to a tool server and measures time-to-acknowledge (RAP
TR-2): from just before the invocation's first byte is written to the
socket to just after the answer's status line and headers have been read
(the whole answer, for a 200 with an empty body). Connections are opened
before the clock starts and kept alive; each worker owns one. With --rate N
it sends N per second on a fixed schedule however slow the answers are
(open loop) and reports the latency percentiles and how late sends started
behind their schedule (not counted in the latency); with --rate 0 it sends
flat out from --concurrency workers and reports acknowledgements per
second. A warm-up at the same load (--warmup) comes first and is not
reported. Callbacks go to a minimal receiver on a local port, which counts
them and answers 200.

Without --url it starts the gettime example in this process (or, with
--server-proc, as a child process) and invokes get_current_time, so the
numbers measure the gorap tool-server SDK. The callback receiver listens on
127.0.0.1: a tool server on another machine cannot reach it, so its
acknowledgements are measured but its callbacks are not counted.`,
		Example: `  rap loadtest ack --rate 2000 --duration 10s
  rap loadtest ack --rate 0 --concurrency 64 --server-proc
  rap loadtest ack --url http://127.0.0.1:3001 --op get_current_time --args '{"timezone":"UTC"}'`,
		ValidArgs: []string{"ack"},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 || args[0] != "ack" {
				return usageErrorf("the only load test is \"ack\"")
			}
			cfg.Args = json.RawMessage(strings.TrimSpace(argsFlag))
			if err := cfg.Check(); err != nil {
				return usageErrorf("%v", err)
			}
			return runLoadtest(cmd.Context(), a, cfg, cpuProfile)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&cfg.URL, "url", "", "base `URL` of the tool server under test (default: an in-process gettime server)")
	fs.StringVar(&cfg.Op, "op", "get_current_time", "`OPERATION` to invoke")
	fs.StringVar(&argsFlag, "args", "{}", "`JSON` arguments of each invocation")
	fs.IntVar(&cfg.Rate, "rate", 1000, "invocations per second on a fixed (open-loop) schedule; 0 sends flat out from --concurrency workers")
	fs.DurationVar(&cfg.Duration, "duration", 10*time.Second, "how long to send")
	fs.DurationVar(&cfg.Warmup, "warmup", time.Second, "how long to send the same load before the measured run, which is not reported (0: none)")
	fs.IntVar(&cfg.Concurrency, "concurrency", 32, "workers for --rate 0; for a fixed rate, the most requests in flight at once")
	addToolTokenFlag(fs, &cfg.Token, "bearer `TOKEN` for the tool server")
	fs.BoolVar(&cfg.ServerProc, "server-proc", false, "run the gettime example as a child process (this binary's \"example get-time\") instead of in this process")
	fs.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of this process (load generator and in-process server) to this `FILE`")
	return cmd
}

func runLoadtest(ctx context.Context, a *app, cfg loadtest.Config, cpuProfile string) error {
	if cfg.ServerProc {
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("--server-proc: finding this program to run it as the tool server: %w", err)
		}
		cfg.ServerCommand = []string{self, "example", "get-time", "--listen", "127.0.0.1:0", "--log-level", "warn"}
	}
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return fmt.Errorf("creating --cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("starting the CPU profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	rep, err := loadtest.Run(ctx, cfg, a.stderr)
	if err != nil {
		return err
	}
	loadtest.PrintReport(a.stdout, cfg, rep)
	if rep.Acked() == 0 {
		return fmt.Errorf("no invocation was acknowledged; first error: %s", rep.FirstError())
	}
	return nil
}
