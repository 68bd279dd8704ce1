package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strconv"
	"time"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/anthropic"
	"github.com/gorap/gorap/model/openai"
	"github.com/gorap/gorap/model/wiretest"
	"github.com/gorap/gorap/runtime/bench"
	"github.com/gorap/gorap/runtime/config"
	"github.com/gorap/gorap/runtime/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
)

// benchRuntimeFlags are the flags of "rap bench-runtime".
type benchRuntimeFlags struct {
	opts                            bench.CycleOptions
	verbose, inProcess, metrics     bool
	provider, servePeer, cpuProfile string
	memProfile, otlpSink            string
}

func newBenchRuntimeCmd(a *app) *cobra.Command {
	var f benchRuntimeFlags
	cmd := &cobra.Command{
		Use:   "bench-runtime [flags]",
		Short: "measure the runtime's tool-result → append → completion → dispatch cycle (cycles/s, p50/p99)",
		Long: `Measure the runtime's cycle: a tool result posted to the runtime, appended
durably, a completion, the next tool call dispatched and acknowledged.

--metrics counts the runtime's Prometheus metrics as rap serve does, and
the OTEL_* variables trace the runtime as they do rap serve's
(docs/observability.md): run the two ways, in turn, to see what observing
the runtime costs (docs/benchmarks.md).`,
		Example: `  rap bench-runtime --threads 16 --duration 10s
  rap bench-runtime --provider anthropic --budget 50
  rap bench-runtime --threads 16 --metrics
  OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 rap bench-runtime --threads 16`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runBenchRuntime(cmd.Context(), a, f) },
	}
	fs := cmd.Flags()
	opts := &f.opts
	fs.IntVar(&opts.Threads, "threads", 16, "`N` threads looping concurrently")
	fs.DurationVar(&opts.Duration, "duration", 10*time.Second, "measured `time`")
	fs.DurationVar(&opts.Warmup, "warmup", time.Second, "warm-up `time` before measuring")
	fs.StringVar(&opts.DataDir, "data-dir", "", "keep the SQLite store in `DIR` (default: a temporary directory on the same disk as $TMPDIR)")
	fs.StringVar(&opts.Store, "store", "", "run on the PostgreSQL database of this postgres:// `URL` instead of SQLite in the data dir (its tables are created if missing)")
	fs.StringVar(&f.provider, "provider", "scripted", "the model: scripted (instant, in process), or `anthropic` or openai: the real provider package, streaming from a local server speaking that wire format (model/wiretest) in a child process")
	fs.IntVar(&opts.Budget, "budget", 50, "with --provider anthropic|openai: tool calls per thread before the model answers in text and a new thread takes its place")
	fs.StringVar(&f.servePeer, "serve-peer", "", "internal: be the peer process of a parent bench-runtime: the tool server, the load generator and, for `API` anthropic or openai, a server of that model wire format")
	_ = fs.MarkHidden("serve-peer")
	fs.BoolVar(&f.inProcess, "in-process", false, "run the tool server and the load generator in this process, so the CPU figures count both ends of each HTTP exchange (default: in a peer process, so they are the runtime's alone)")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the measured run (this process) to `FILE`")
	fs.StringVar(&f.memProfile, "memprofile", "", "write an allocation profile of this process, taken at the end of the run, to `FILE`")
	fs.BoolVar(&f.verbose, "verbose", false, "show the runtime's warnings")
	fs.BoolVar(&f.metrics, "metrics", false, "count the runtime's Prometheus metrics, as rap serve does (they are not served)")
	fs.StringVar(&f.otlpSink, "otlp-sink", "", "internal: serve an OTLP/HTTP trace receiver that accepts and discards spans on `ADDR`, until interrupted")
	_ = fs.MarkHidden("otlp-sink")
	return cmd
}

func runBenchRuntime(ctx context.Context, a *app, f benchRuntimeFlags) error {
	stdout := a.stdout
	opts, verbose, provider, cpuProfile, memProfile := f.opts, f.verbose, f.provider, f.cpuProfile, f.memProfile
	if f.servePeer != "" {
		return serveBenchPeer(ctx, f.servePeer, opts.Budget, 2*opts.Threads, os.Stdin, stdout)
	}
	if f.otlpSink != "" {
		return serveOTLPSink(ctx, f.otlpSink, stdout) // bench_otlp_sink.go
	}
	if opts.Threads < 1 || opts.Threads > 100_000 {
		return fmt.Errorf("%w: --threads %d: want 1 to 100000", errUsage, opts.Threads)
	}
	if opts.Duration <= 0 {
		return fmt.Errorf("%w: --duration must be positive", errUsage)
	}
	if verbose {
		opts.Logger = a.logAtLeast(slog.LevelWarn)
	}
	switch provider {
	case "scripted", "anthropic", "openai":
	default:
		return fmt.Errorf("%w: --provider %q: want scripted, anthropic or openai", errUsage, provider)
	}
	if opts.Budget <= 0 {
		opts.Budget = 50
	}
	// The peer process: the model server (for a real provider) and, unless
	// --in-process, the tool server and the load generator.
	var peer *bench.Peer
	if provider != "scripted" || !f.inProcess {
		api, budget := provider, opts.Budget
		if provider == "scripted" {
			api, budget = "none", 0 // the scripted model's threads loop forever
		}
		var err error
		if peer, err = startBenchPeer(ctx, api, budget, opts.Threads); err != nil {
			return err
		}
		defer peer.Close()
		opts.ExternalCPU = peer.CPU
		if !f.inProcess {
			opts.Peer = peer
		}
	}
	what := "scripted model in instant mode"
	if provider != "scripted" {
		// The providers' default HTTP client, as rap serve uses it.
		var err error
		if provider == "anthropic" {
			opts.Model, err = anthropic.New(&anthropic.Options{APIKey: "bench", BaseURL: peer.ModelURL, Model: "bench"})
		} else {
			opts.Model, err = openai.New(&openai.Options{APIKey: "bench", BaseURL: peer.ModelURL + "/v1", Model: "bench"})
		}
		if err != nil {
			return err
		}
		what = fmt.Sprintf("%s provider streaming from a local %s wire server, %d tool calls per thread", provider, provider, opts.Budget)
	}
	where := "tool server and load generator in a peer process"
	if f.inProcess {
		where = "tool server and load generator in this process"
	}
	if provider != "scripted" {
		where += "; model server in a peer process"
	}
	storeWhat := "SQLite WAL, synchronous=FULL"
	if opts.Store != "" {
		storeWhat = "PostgreSQL " + config.StoreLabel(opts.Store)
	}
	observed := "metrics off"
	if f.metrics {
		m, err := metrics.New(prometheus.NewRegistry(), nil)
		if err != nil {
			return err
		}
		opts.Metrics, observed = m, "metrics on"
	}
	tp, _, stopTracing, err := startTracing(ctx, "rap-bench-runtime", slog.New(slog.DiscardHandler))
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	defer stopTracing()
	if tp != nil {
		opts.TracerProvider = tp
		observed += ", traces exported (OTEL_* variables)"
	} else {
		observed += ", traces off"
	}
	fmt.Fprintf(stdout, "rap bench-runtime: %d threads, %v (after %v warm-up); %s; %s; %s (loopback); %s\n",
		opts.Threads, opts.Duration, opts.Warmup, storeWhat, what, where, observed)
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return fmt.Errorf("create the CPU profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if memProfile != "" {
		runtime.MemProfileRate = 64 << 10
	}
	rep, err := bench.RunCycles(ctx, opts)
	if err != nil {
		return err
	}
	if memProfile != "" {
		f, err := os.Create(memProfile)
		if err != nil {
			return fmt.Errorf("create the allocation profile: %w", err)
		}
		defer f.Close()
		if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
			return fmt.Errorf("write the allocation profile: %w", err)
		}
	}
	fmt.Fprint(stdout, rep)
	return nil
}

// benchScript is the model of a benchmark thread: it calls the tool
// "work" until the conversation holds budget calls, then answers in text.
func benchScript(budget int) wiretest.Script {
	return func(req wiretest.Request) wiretest.Reply {
		n := 0
		for _, m := range req.Messages {
			n += len(m.ToolCalls)
		}
		if n >= budget {
			return wiretest.Reply{Text: "done"}
		}
		return wiretest.Reply{ToolCalls: []model.ToolCall{{Name: "work", Arguments: json.RawMessage(`{}`)}}}
	}
}

// serveBenchPeer runs the peer process of a parent bench-runtime
// (bench.ServePeer): the tool server and the load generator and, for api
// anthropic or openai, a wiretest server of that wire format, whose URL it
// prints first.
func serveBenchPeer(ctx context.Context, api string, budget, conns int, in io.Reader, out io.Writer) error {
	var srv *wiretest.Server
	switch api {
	case "none":
	case "anthropic":
		srv = wiretest.NewAnthropic(benchScript(budget))
	case "openai":
		srv = wiretest.NewOpenAI(benchScript(budget))
	default:
		return fmt.Errorf("%w: --serve-peer %q: want none, anthropic or openai", errUsage, api)
	}
	var header []string
	if srv != nil {
		srv.ForgetRequests().WithoutPromptCache().Shallow()
		defer srv.Close()
		header = append(header, "model "+srv.URL)
	}
	return bench.ServePeer(ctx, bench.PeerOptions{Budget: budget, Conns: conns, Header: header}, in, out)
}

// startBenchPeer starts this program as the peer process of a run
// (serveBenchPeer).
func startBenchPeer(ctx context.Context, api string, budget, threads int) (*bench.Peer, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this program to start the bench peer: %w", err)
	}
	cmd := exec.CommandContext(ctx, exe, "bench-runtime", "--serve-peer", api,
		"--budget", strconv.Itoa(budget), "--threads", strconv.Itoa(threads))
	cmd.Stderr = os.Stderr
	return bench.StartPeer(cmd)
}
