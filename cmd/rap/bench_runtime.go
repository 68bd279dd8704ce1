package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorap/gorap/internal/cpustat"
	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/anthropic"
	"github.com/gorap/gorap/model/openai"
	"github.com/gorap/gorap/model/wiretest"
	"github.com/gorap/gorap/runtime/bench"
	"github.com/gorap/gorap/runtime/config"
	"github.com/spf13/cobra"
)

// benchRuntimeFlags are the flags of "rap bench-runtime".
type benchRuntimeFlags struct {
	opts                            bench.CycleOptions
	verbose                         bool
	provider, serveWire, cpuProfile string
	memProfile                      string
}

func newBenchRuntimeCmd(a *app) *cobra.Command {
	var f benchRuntimeFlags
	cmd := &cobra.Command{
		Use:   "bench-runtime [flags]",
		Short: "measure the runtime's tool-result → append → completion → dispatch cycle (cycles/s, p50/p99)",
		Example: `  rap bench-runtime --threads 16 --duration 10s
  rap bench-runtime --provider anthropic --budget 50`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runBenchRuntime(cmd.Context(), a, f) },
	}
	fs := cmd.Flags()
	opts := &f.opts
	fs.IntVar(&opts.Threads, "threads", 16, "`N` threads looping concurrently")
	fs.DurationVar(&opts.Duration, "duration", 10*time.Second, "measured `time`")
	fs.DurationVar(&opts.Warmup, "warmup", time.Second, "warm-up `time` before measuring")
	fs.StringVar(&opts.DataDir, "data-dir", "", "keep the SQLite store in `DIR` (default: a temporary directory on the same disk as $TMPDIR)")
	fs.StringVar(&opts.Store, "store", "", "run on the PostgreSQL database of this postgres:// `URL` instead of SQLite in the data dir (issue 14; its tables are created if missing)")
	fs.StringVar(&f.provider, "provider", "scripted", "the model: scripted (instant, in process), or `anthropic` or openai: the real provider package, streaming from a local server speaking that wire format (model/wiretest) in a child process")
	fs.IntVar(&opts.Budget, "budget", 50, "with --provider anthropic|openai: tool calls per thread before the model answers in text and a new thread takes its place")
	fs.StringVar(&f.serveWire, "serve-wire", "", "internal: serve the model wire format `API` for a parent bench-runtime")
	_ = fs.MarkHidden("serve-wire")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the measured run (this process) to `FILE`")
	fs.StringVar(&f.memProfile, "memprofile", "", "write an allocation profile of this process, taken at the end of the run, to `FILE`")
	fs.BoolVar(&f.verbose, "verbose", false, "show the runtime's warnings")
	return cmd
}

func runBenchRuntime(ctx context.Context, a *app, f benchRuntimeFlags) error {
	stdout := a.stdout
	opts, verbose, provider, serveWire, cpuProfile, memProfile := f.opts, f.verbose, f.provider, f.serveWire, f.cpuProfile, f.memProfile
	if serveWire != "" {
		return serveBenchWire(ctx, serveWire, opts.Budget, os.Stdin, stdout)
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
	what := "scripted model in instant mode"
	switch provider {
	case "scripted":
	case "anthropic", "openai":
		child, err := startBenchWire(ctx, provider, opts.Budget)
		if err != nil {
			return err
		}
		defer child.stop()
		// The providers' default HTTP client, as rap serve uses it.
		if provider == "anthropic" {
			opts.Model, err = anthropic.New(anthropic.Options{APIKey: "bench", BaseURL: child.url, Model: "bench"})
		} else {
			opts.Model, err = openai.New(openai.Options{APIKey: "bench", BaseURL: child.url + "/v1", Model: "bench"})
		}
		if err != nil {
			return err
		}
		opts.ExternalCPU = child.cpu
		what = fmt.Sprintf("%s provider streaming from a local %s wire server (child process), %d tool calls per thread", provider, provider, opts.Budget)
	default:
		return fmt.Errorf("%w: --provider %q: want scripted, anthropic or openai", errUsage, provider)
	}
	storeWhat := "SQLite WAL, synchronous=FULL"
	if opts.Store != "" {
		storeWhat = "PostgreSQL " + config.StoreLabel(opts.Store)
	}
	fmt.Fprintf(stdout, "rap bench-runtime: %d threads, %v (after %v warm-up); %s; %s; loopback tool server\n",
		opts.Threads, opts.Duration, opts.Warmup, storeWhat, what)
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

// serveBenchWire runs the child side: a wiretest server for api, its URL
// printed on the first line of out, then the process's CPU time in
// nanoseconds for each line read from in; it ends when in closes.
func serveBenchWire(ctx context.Context, api string, budget int, in io.Reader, out io.Writer) error {
	var srv *wiretest.Server
	switch api {
	case "anthropic":
		srv = wiretest.NewAnthropic(benchScript(budget))
	case "openai":
		srv = wiretest.NewOpenAI(benchScript(budget))
	default:
		return fmt.Errorf("%w: --serve-wire %q: want anthropic or openai", errUsage, api)
	}
	srv.ForgetRequests().WithoutPromptCache()
	defer srv.Close()
	fmt.Fprintln(out, srv.URL)
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		cpu, _ := cpustat.Process()
		fmt.Fprintln(out, int64(cpu))
	}
	return nil
}

// benchWire is the child process serving a model wire format.
type benchWire struct {
	cmd *exec.Cmd
	url string
	in  io.WriteCloser
	out *bufio.Reader
	mu  sync.Mutex
}

func startBenchWire(ctx context.Context, api string, budget int) (*benchWire, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this program to start the model server: %w", err)
	}
	cmd := exec.CommandContext(ctx, exe, "bench-runtime", "--serve-wire", api, "--budget", strconv.Itoa(budget))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the model server: %w", err)
	}
	w := &benchWire{cmd: cmd, in: in, out: bufio.NewReader(outPipe)}
	line, err := w.out.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "http://") {
		w.stop()
		return nil, fmt.Errorf("the model server did not print its URL (got %q): %v", line, err)
	}
	w.url = strings.TrimSpace(line)
	return w, nil
}

// cpu asks the child for its CPU time so far.
func (w *benchWire) cpu() (time.Duration, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := io.WriteString(w.in, "cpu\n"); err != nil {
		return 0, fmt.Errorf("ask the model server for its CPU time: %w", err)
	}
	line, err := w.out.ReadString('\n')
	if err != nil {
		return 0, fmt.Errorf("read the model server's CPU time: %w", err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
	if err != nil {
		return 0, errors.New("the model server answered no CPU time: " + line)
	}
	return time.Duration(n), nil
}

func (w *benchWire) stop() {
	w.in.Close()
	w.cmd.Wait()
}
