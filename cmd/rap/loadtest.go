package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	goruntime "runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorap/gorap/examples/gettime"
	"github.com/gorap/gorap/rap"
)

func init() {
	register(&command{
		name:    "loadtest",
		summary: "measure how fast a tool server acknowledges invocations",
		usage:   "rap loadtest ack [--url BASE] [--rate N] [--duration D] [--concurrency C]",
		run:     runLoadtest,
	})
}

// Limits of the load generator.
const (
	maxLoadRate        = 1_000_000
	maxLoadConcurrency = 4096
	maxLoadDuration    = 24 * time.Hour
	// callbackDrain is how long the run waits after the last send for the
	// callbacks still on their way.
	callbackDrain = 5 * time.Second
)

// loadConfig is one "rap loadtest ack" run.
type loadConfig struct {
	url         string
	op          string
	args        json.RawMessage
	rate        int
	duration    time.Duration
	concurrency int
	token       string
}

// loadReport is what a run measured.
type loadReport struct {
	target     string
	sent       int64
	acked      int64
	refused    int64 // non-200 answers
	failed     int64 // transport errors
	firstErr   string
	elapsed    time.Duration
	latencies  []time.Duration // of acknowledged sends
	maxLag     time.Duration   // open loop: worst delay of a send behind its schedule
	callbacks  int64           // received during the run
	drained    int64           // received by the end of the drain
	badCallbks int64           // callbacks that were not JSON objects
	cpu        time.Duration   // CPU time of this process during the run, if known
}

func runLoadtest(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := commands["loadtest"]
	fs := newFlagSet(c, stderr)
	var cfg loadConfig
	fs.StringVar(&cfg.url, "url", "", "base URL of the tool server under test (default: an in-process gettime server)")
	fs.StringVar(&cfg.op, "op", "get_current_time", "operation to invoke")
	argsFlag := fs.String("args", "{}", "JSON arguments of each invocation")
	fs.IntVar(&cfg.rate, "rate", 1000, "invocations per second on a fixed (open-loop) schedule; 0 sends flat out from --concurrency workers")
	fs.DurationVar(&cfg.duration, "duration", 10*time.Second, "how long to send")
	fs.IntVar(&cfg.concurrency, "concurrency", 32, "workers for --rate 0; for a fixed rate, the most requests in flight at once")
	fs.StringVar(&cfg.token, "token", "", "bearer token for the tool server (default $"+envToolToken+")")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of this process (load generator and in-process server) to this file")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `usage: %s

Sends invocations to a tool server and measures time-to-acknowledge: from
sending the invocation to its 200 answer (RAP TR-2). With --rate N it sends
N per second on a fixed schedule however slow the answers are (open loop),
and reports the latency percentiles; with --rate 0 it sends flat out from
--concurrency workers and reports acknowledgements per second. Callbacks go
to a receiver on a local port, which counts them.

Without --url it starts the gettime example in this process and invokes
get_current_time, so the numbers measure the gorap tool-server SDK. The
callback receiver listens on 127.0.0.1: a tool server on another machine
cannot reach it, so its acknowledgements are measured but its callbacks are
not counted.

Flags:
`, c.usage)
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || pos[0] != "ack" {
		return fmt.Errorf("%w: the only load test is \"ack\"", errUsage)
	}
	switch {
	case cfg.rate < 0 || cfg.rate > maxLoadRate:
		return fmt.Errorf("%w: --rate must be 0 to %d", errUsage, maxLoadRate)
	case cfg.duration <= 0 || cfg.duration > maxLoadDuration:
		return fmt.Errorf("%w: --duration must be positive and at most %v", errUsage, maxLoadDuration)
	case cfg.concurrency < 1 || cfg.concurrency > maxLoadConcurrency:
		return fmt.Errorf("%w: --concurrency must be 1 to %d", errUsage, maxLoadConcurrency)
	case cfg.url != "" && !isURL(cfg.url):
		return fmt.Errorf("%w: --url %q must start with http:// or https://", errUsage, cfg.url)
	}
	cfg.args = json.RawMessage(strings.TrimSpace(*argsFlag))
	if !json.Valid(cfg.args) || !strings.HasPrefix(string(cfg.args), "{") {
		return fmt.Errorf("%w: --args must be a JSON object", errUsage)
	}
	if cfg.token == "" {
		cfg.token = os.Getenv(envToolToken)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("creating --cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("starting the CPU profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	rep, err := loadAck(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	printLoadReport(stdout, cfg, rep)
	if rep.acked == 0 {
		return fmt.Errorf("no invocation was acknowledged; first error: %s", rep.firstErr)
	}
	return nil
}

// loadAck runs the load and measures it.
func loadAck(ctx context.Context, cfg loadConfig, stderr io.Writer) (*loadReport, error) {
	rep := &loadReport{target: cfg.url}

	// The callback receiver counts every callback.
	var received, bad atomic.Int64
	cbLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening for callbacks: %w", err)
	}
	cbSrv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if len(body) == 0 || body[0] != '{' {
			bad.Add(1)
		}
		received.Add(1)
	})}
	go cbSrv.Serve(cbLn) //nolint:errcheck // ends with Close
	defer cbSrv.Close()
	callbackBase := "http://" + cbLn.Addr().String() + "/cb"

	if cfg.url == "" {
		// The tool server under test, in this process. Its logs would
		// cost more than the work measured: only warnings are shown.
		log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		tool := gettime.New(&rap.ServerOptions{Logger: log})
		if err := tool.Start(ctx); err != nil {
			return nil, err
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("listening for the in-process tool server: %w", err)
		}
		hs := &http.Server{Handler: tool, ReadHeaderTimeout: 10 * time.Second}
		go hs.Serve(ln) //nolint:errcheck // ends with Close
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			hs.Shutdown(sctx)   //nolint:errcheck // best effort at exit
			tool.Shutdown(sctx) //nolint:errcheck // best effort at exit
		}()
		cfg.url = "http://" + ln.Addr().String()
		rep.target = cfg.url + " (in-process gettime)"
	}

	client := &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			MaxIdleConns:        cfg.concurrency * 2,
			MaxIdleConnsPerHost: cfg.concurrency * 2,
			MaxConnsPerHost:     cfg.concurrency,
			IdleConnTimeout:     90 * time.Second,
		},
	}
	defer client.CloseIdleConnections()
	ts, _, err := rap.FetchToolset(ctx, bearerClient(cfg.token, 30*time.Second), cfg.url)
	if err != nil {
		return nil, err
	}
	endpoint := ts.Endpoint

	var (
		mu        sync.Mutex
		latencies = make([]time.Duration, 0, 1024)
		seq       atomic.Int64
	)
	record := func(d time.Duration, status int, err error) {
		switch {
		case err != nil:
			if rep.failed == 0 {
				mu.Lock()
				rep.firstErr = err.Error()
				mu.Unlock()
			}
			atomic.AddInt64(&rep.failed, 1)
		case status != http.StatusOK:
			mu.Lock()
			if rep.firstErr == "" {
				rep.firstErr = "status " + strconv.Itoa(status)
			}
			mu.Unlock()
			atomic.AddInt64(&rep.refused, 1)
		default:
			atomic.AddInt64(&rep.acked, 1)
			mu.Lock()
			latencies = append(latencies, d)
			mu.Unlock()
		}
	}
	send := func(ctx context.Context) {
		n := seq.Add(1)
		body, _ := json.Marshal(rap.Invocation{
			Operation:   cfg.op,
			Arguments:   cfg.args,
			ID:          "lt-" + strconv.FormatInt(n, 10),
			CallbackURL: callbackBase,
			GroupID:     "loadtest",
		})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
		if err != nil {
			record(0, 0, err)
			return
		}
		req.Header.Set("Content-Type", "application/json")
		if cfg.token != "" {
			req.Header.Set("Authorization", "Bearer "+cfg.token)
		}
		atomic.AddInt64(&rep.sent, 1)
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			record(0, 0, err)
			return
		}
		d := time.Since(start)
		io.Copy(io.Discard, resp.Body) //nolint:errcheck // drain for reuse
		resp.Body.Close()
		record(d, resp.StatusCode, nil)
	}

	runCtx, cancel := context.WithTimeout(ctx, cfg.duration)
	defer cancel()
	cpu0, cpuOK := processCPU()
	start := time.Now()
	var wg sync.WaitGroup
	if cfg.rate == 0 {
		for range cfg.concurrency {
			wg.Go(func() {
				for runCtx.Err() == nil {
					send(ctx) // a send under way when time is up still counts
				}
			})
		}
	} else {
		// Open loop: the n-th send is due at start + n/rate whatever the
		// answers do, and all rate×duration sends are made; a semaphore
		// bounds the requests in flight.
		slots := make(chan struct{}, cfg.concurrency)
		interval := time.Second / time.Duration(cfg.rate)
		total := int(cfg.duration / interval)
	schedule:
		for i := range total {
			due := start.Add(time.Duration(i) * interval)
			if d := time.Until(due); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
					break schedule
				}
			}
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				break schedule
			}
			if lag := time.Since(due); lag > rep.maxLag {
				rep.maxLag = lag
			}
			wg.Go(func() {
				defer func() { <-slots }()
				send(ctx)
			})
		}
	}
	wg.Wait()
	rep.elapsed = time.Since(start)
	rep.callbacks = received.Load()
	if cpu1, ok := processCPU(); ok && cpuOK {
		rep.cpu = cpu1 - cpu0
	}

	// Wait for the callbacks still on their way.
	deadline := time.Now().Add(callbackDrain)
	for received.Load() < atomic.LoadInt64(&rep.acked) && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	rep.drained = received.Load()
	rep.badCallbks = bad.Load()
	slices.Sort(latencies)
	rep.latencies = latencies
	if ctx.Err() != nil {
		return rep, errors.New("interrupted")
	}
	return rep, nil
}

// machine describes the CPUs and, where /proc/loadavg exists, the load,
// since both bound what a run on one machine can show.
func machine() string {
	s := fmt.Sprintf("%d CPUs, GOMAXPROCS %d", goruntime.NumCPU(), goruntime.GOMAXPROCS(0))
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			s += ", load average " + strings.Join(f[:3], " ")
		}
	}
	return s
}

// percentile returns the p-th percentile (0..100) of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p/100*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/float64(time.Millisecond)) }

func printLoadReport(w io.Writer, cfg loadConfig, r *loadReport) {
	secs := r.elapsed.Seconds()
	mode := fmt.Sprintf("open loop at %d/s, at most %d in flight", cfg.rate, cfg.concurrency)
	if cfg.rate == 0 {
		mode = fmt.Sprintf("flat out, %d workers", cfg.concurrency)
	}
	row := func(k, v string) { fmt.Fprintf(w, "  %-20s %s\n", k, v) }
	fmt.Fprintf(w, "rap loadtest ack: %s %s\n", cfg.op, r.target)
	row("machine", machine())
	row("mode", fmt.Sprintf("%s for %v", mode, cfg.duration))
	row("sent", strconv.FormatInt(r.sent, 10))
	row("acknowledged (200)", fmt.Sprintf("%d  (%.0f/s)", r.acked, float64(r.acked)/secs))
	row("refused (non-200)", strconv.FormatInt(r.refused, 10))
	row("failed (transport)", strconv.FormatInt(r.failed, 10))
	if r.firstErr != "" {
		row("first problem", r.firstErr)
	}
	l := r.latencies
	row("time to ack p50", ms(percentile(l, 50)))
	row("time to ack p90", ms(percentile(l, 90)))
	row("time to ack p99", ms(percentile(l, 99)))
	row("time to ack max", ms(percentile(l, 100)))
	if cfg.rate > 0 {
		row("worst schedule lag", ms(r.maxLag))
	}
	row("callbacks received", fmt.Sprintf("%d during the run (%.0f/s); %d after a %v drain", r.callbacks, float64(r.callbacks)/secs, r.drained, callbackDrain))
	if r.cpu > 0 && r.acked > 0 {
		what := "load generator and callback receiver"
		if strings.Contains(r.target, "in-process") {
			what = "load generator, tool server and callback receiver"
		}
		row("CPU per invocation", fmt.Sprintf("%.0f µs (%s; %.2f CPU-seconds over %.1f s)",
			float64(r.cpu.Microseconds())/float64(r.acked), what, r.cpu.Seconds(), secs))
	}
	if r.badCallbks > 0 {
		row("malformed callbacks", strconv.FormatInt(r.badCallbks, 10))
	}
}
