package main

import (
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
	"github.com/gorap/gorap/internal/cpustat"
	"github.com/gorap/gorap/rap"
)

func init() {
	register(&command{
		name:    "loadtest",
		summary: "measure how fast a tool server acknowledges invocations",
		usage:   "rap loadtest ack [--url BASE | --server-proc] [--rate N] [--duration D] [--warmup D] [--concurrency C]",
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
	warmup      time.Duration // sent before the measured run, not reported
	concurrency int
	token       string
	serverProc  bool // run the gettime example as a child process
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
	latencies  []time.Duration      // of acknowledged sends
	maxLag     time.Duration        // open loop: worst delay of a send behind its schedule
	lagP99     time.Duration        // open loop: 99th percentile of that delay
	callbacks  int64                // received during the run
	drained    int64                // received by the end of the drain
	badCallbks int64                // callbacks that were not JSON objects
	cpu        time.Duration        // CPU time of this process during the run, if known
	mallocs    uint64               // heap objects this process allocated during the run
	allocBytes uint64               // and their bytes
	gcs        uint32               // garbage collections of this process during the run
	gcPause    time.Duration        // their total stop-the-world pause
	machine    cpustat.MachineTimes // the whole machine's CPU time during the run
	machineOK  bool
	// serverCPU is the CPU time of the child tool server (--server-proc)
	// over its whole life, when serverCPUKnown.
	serverCPU      time.Duration
	serverCPUKnown bool
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
	fs.DurationVar(&cfg.warmup, "warmup", time.Second, "how long to send the same load before the measured run, which is not reported (0: none)")
	fs.IntVar(&cfg.concurrency, "concurrency", 32, "workers for --rate 0; for a fixed rate, the most requests in flight at once")
	fs.StringVar(&cfg.token, "token", "", "bearer token for the tool server (default $"+envToolToken+")")
	fs.BoolVar(&cfg.serverProc, "server-proc", false, "run the gettime example as a child process (this binary's \"example get-time\") instead of in this process")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of this process (load generator and in-process server) to this file")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `usage: %s

Sends invocations to a tool server and measures time-to-acknowledge (RAP
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
acknowledgements are measured but its callbacks are not counted.

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
	case cfg.warmup < 0 || cfg.warmup > maxLoadDuration:
		return fmt.Errorf("%w: --warmup must be 0 to %v", errUsage, maxLoadDuration)
	case cfg.concurrency < 1 || cfg.concurrency > maxLoadConcurrency:
		return fmt.Errorf("%w: --concurrency must be 1 to %d", errUsage, maxLoadConcurrency)
	case cfg.url != "" && cfg.serverProc:
		return fmt.Errorf("%w: --server-proc starts its own server; it cannot be combined with --url", errUsage)
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

// loadWorker is one sender's share of a run. Each worker owns a
// connection and its own preallocated buffers, so recording a result takes
// no lock and allocates nothing.
type loadWorker struct {
	conn      ackConn
	latencies []time.Duration // of acknowledged sends
	lags      []time.Duration // open loop: how late each send started
	sent      int64
	acked     int64
	refused   int64
	failed    int64
	maxLag    time.Duration
}

// latencyPrealloc bounds the room reserved up front for each worker's
// latencies; a longer run grows the slice as it goes.
const latencyPrealloc = 1 << 20

// loadAck runs the load and measures it.
func loadAck(ctx context.Context, cfg loadConfig, stderr io.Writer) (*loadReport, error) {
	rep := &loadReport{target: cfg.url}

	// The callback receiver counts every callback.
	cb, err := newCallbackReceiver()
	if err != nil {
		return nil, err
	}
	defer cb.close()

	if cfg.url == "" && cfg.serverProc {
		child, err := startServerProcess(ctx, stderr)
		if err != nil {
			return nil, err
		}
		defer func() { rep.serverCPU, rep.serverCPUKnown = child.stop() }()
		cfg.url = child.url
		rep.target = cfg.url + " (gettime in a child process)"
	} else if cfg.url == "" {
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

	ts, _, err := rap.FetchToolset(ctx, bearerClient(cfg.token, 30*time.Second), cfg.url)
	if err != nil {
		return nil, err
	}
	callbackURL := cb.url()
	target, err := newAckTarget(ts.Endpoint, cfg.token, func(id string) []byte {
		b, _ := json.Marshal(rap.Invocation{
			Operation: cfg.op,
			Arguments: cfg.args,
			ID:        "lt-" + id,
			// One callback URL per call, as gorap's runtime gives: the
			// SDK delivers the callbacks of one URL in order, one at a
			// time, and those of different URLs concurrently.
			CallbackURL: callbackURL + "/" + id,
			GroupID:     "loadtest",
		})
		return b
	})
	if err != nil {
		return nil, err
	}

	// Every worker's connection is opened before the clock starts.
	var total int64 // open loop: the number of sends
	var interval time.Duration
	if cfg.rate > 0 {
		interval = time.Second / time.Duration(cfg.rate)
		total = int64(cfg.duration / interval)
	}
	workers := make([]*loadWorker, cfg.concurrency)
	for i := range workers {
		w := &loadWorker{conn: ackConn{t: target}}
		room := int64(latencyPrealloc)
		if total > 0 {
			room = min(room, total/int64(cfg.concurrency)+total/8+16)
			var release func()
			w.lags, release = durationBuffer(int(room))
			defer release()
		}
		var release func()
		w.latencies, release = durationBuffer(int(room))
		defer release()
		if err := w.conn.dial(ctx); err != nil {
			for _, o := range workers[:i] {
				o.conn.close()
			}
			return nil, fmt.Errorf("connecting to the tool server at %s: %w", target.addr, err)
		}
		workers[i] = w
	}
	defer func() {
		for _, w := range workers {
			w.conn.close()
		}
	}()

	var (
		errMu sync.Mutex
		seq   atomic.Int64 // numbers the invocations' ids, warm-up included
	)
	send := func(w *loadWorker, n int64) {
		w.sent++
		d, status, err := w.conn.send(ctx, n)
		switch {
		case err != nil:
			w.failed++
			errMu.Lock()
			if rep.firstErr == "" {
				rep.firstErr = err.Error()
			}
			errMu.Unlock()
		case status != http.StatusOK:
			w.refused++
			errMu.Lock()
			if rep.firstErr == "" {
				rep.firstErr = "status " + strconv.Itoa(status)
			}
			errMu.Unlock()
		default:
			w.acked++
			w.latencies = append(w.latencies, d)
		}
	}

	// run sends for d and returns when the last send is answered.
	run := func(d time.Duration) {
		var (
			wg   sync.WaitGroup
			stop atomic.Bool
			slot atomic.Int64
		)
		start := time.Now()
		if cfg.rate == 0 {
			timer := time.AfterFunc(d, func() { stop.Store(true) })
			defer timer.Stop()
			for _, w := range workers {
				wg.Go(func() {
					for !stop.Load() && ctx.Err() == nil {
						send(w, seq.Add(1)) // a send under way when time is up still counts
					}
				})
			}
		} else {
			// Open loop: send n is due at start + n/rate whatever the
			// answers do, and all rate×d sends are made. Each worker takes
			// the next due send, sleeps until it is due and makes it, so at
			// most --concurrency are in flight and no goroutine is started
			// per send.
			total := int64(d / interval)
			for _, w := range workers {
				wg.Go(func() {
					for ctx.Err() == nil {
						n := slot.Add(1) - 1
						if n >= total {
							return
						}
						due := start.Add(time.Duration(n) * interval)
						if d := time.Until(due); d > 0 {
							time.Sleep(d)
						}
						lag := max(0, time.Since(due))
						w.lags = append(w.lags, lag)
						w.maxLag = max(w.maxLag, lag)
						send(w, seq.Add(1))
					}
				})
			}
		}
		wg.Wait()
	}

	// The warm-up brings the server to its steady state (worker goroutines
	// started, callback connections open) and is not reported.
	var warmAcked int64
	if cfg.warmup > 0 {
		run(cfg.warmup)
		for _, w := range workers {
			warmAcked += w.acked
			latencies, lags := w.latencies[:0], w.lags[:0]
			*w = loadWorker{conn: w.conn, latencies: latencies, lags: lags}
		}
	}

	var ms0, ms1 goruntime.MemStats
	goruntime.ReadMemStats(&ms0)
	cpu0, cpuOK := cpustat.Process()
	mach0, machOK := cpustat.Machine()
	start := time.Now()
	run(cfg.duration)
	rep.elapsed = time.Since(start)
	if mach1, ok := cpustat.Machine(); ok && machOK {
		rep.machine = mach1.Sub(mach0)
		rep.machineOK = true
	}
	goruntime.ReadMemStats(&ms1)
	rep.mallocs = ms1.Mallocs - ms0.Mallocs
	rep.allocBytes = ms1.TotalAlloc - ms0.TotalAlloc
	rep.gcs = ms1.NumGC - ms0.NumGC
	rep.gcPause = time.Duration(ms1.PauseTotalNs - ms0.PauseTotalNs)
	rep.callbacks = cb.received.Load() - warmAcked
	if cpu1, ok := cpustat.Process(); ok && cpuOK {
		rep.cpu = cpu1 - cpu0
	}

	var lags []time.Duration
	for _, w := range workers {
		rep.sent += w.sent
		rep.acked += w.acked
		rep.refused += w.refused
		rep.failed += w.failed
		rep.maxLag = max(rep.maxLag, w.maxLag)
		rep.latencies = append(rep.latencies, w.latencies...)
		lags = append(lags, w.lags...)
	}

	// Wait for the callbacks still on their way.
	deadline := time.Now().Add(callbackDrain)
	for cb.received.Load() < warmAcked+rep.acked && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	rep.drained = cb.received.Load() - warmAcked
	rep.badCallbks = cb.bad.Load()
	slices.Sort(rep.latencies)
	slices.Sort(lags)
	rep.lagP99 = percentile(lags, 99)
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

// gcSettings reports the GOGC and GOMEMLIMIT this process runs with (and,
// with --server-proc, the child it starts, which inherits them).
func gcSettings() string {
	v := func(name, def string) string {
		if s := os.Getenv(name); s != "" {
			return name + "=" + s
		}
		return name + " unset (" + def + ")"
	}
	return v("GOGC", "Go's default, 100") + ", " + v("GOMEMLIMIT", "no limit")
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

// processWhat names what runs in this process for a run against target.
func processWhat(target string) string {
	if strings.Contains(target, "(in-process") {
		return "load generator, tool server and callback receiver"
	}
	return "load generator and callback receiver"
}

func printLoadReport(w io.Writer, cfg loadConfig, r *loadReport) {
	secs := r.elapsed.Seconds()
	mode := fmt.Sprintf("open loop at %d/s, at most %d in flight", cfg.rate, cfg.concurrency)
	if cfg.rate == 0 {
		mode = fmt.Sprintf("flat out, %d workers", cfg.concurrency)
	}
	row := func(k, v string) { fmt.Fprintf(w, "  %-20s %s\n", k, v) }
	fmt.Fprintf(w, "rap loadtest ack: %s %s\n", cfg.op, r.target)
	row("machine", machine())
	row("garbage collector", gcSettings())
	warm := "no warm-up"
	if cfg.warmup > 0 {
		warm = fmt.Sprintf("after a %v warm-up at the same load, not reported", cfg.warmup)
	}
	row("mode", fmt.Sprintf("%s for %v, %s", mode, cfg.duration, warm))
	row("sent", strconv.FormatInt(r.sent, 10))
	row("acknowledged (200)", fmt.Sprintf("%d  (%.0f/s)", r.acked, float64(r.acked)/secs))
	row("refused (non-200)", strconv.FormatInt(r.refused, 10))
	row("failed (transport)", strconv.FormatInt(r.failed, 10))
	if r.firstErr != "" {
		row("first problem", r.firstErr)
	}
	l := r.latencies
	row("measured", "time to ack: request's first byte written → 200's headers read, on an open connection")
	row("time to ack p50", ms(percentile(l, 50)))
	row("time to ack p90", ms(percentile(l, 90)))
	row("time to ack p99", ms(percentile(l, 99)))
	row("time to ack max", ms(percentile(l, 100)))
	if cfg.rate > 0 {
		row("schedule lag p99", ms(r.lagP99)+" (how late sends started; not in the latency)")
		row("worst schedule lag", ms(r.maxLag))
	}
	row("callbacks received", fmt.Sprintf("%d during the run (%.0f/s); %d after a %v drain", r.callbacks, float64(r.callbacks)/secs, r.drained, callbackDrain))
	if r.cpu > 0 && r.acked > 0 {
		row("CPU per invocation", fmt.Sprintf("%.0f µs (%s; %.2f CPU-seconds over %.1f s)",
			float64(r.cpu.Microseconds())/float64(r.acked), processWhat(r.target), r.cpu.Seconds(), secs))
	}
	if r.acked > 0 {
		row("heap allocations", fmt.Sprintf("%.0f objects, %.1f KB per invocation (%s); %d GCs, %s stop-the-world in total",
			float64(r.mallocs)/float64(r.acked), float64(r.allocBytes)/1024/float64(r.acked), processWhat(r.target), r.gcs, ms(r.gcPause)))
	}
	if r.machineOK && secs > 0 {
		// Time the hypervisor runs something else on the machine's virtual
		// CPUs is time this process may be waiting to run: a busy host shows
		// up here and in the tail latencies.
		// /proc/stat samples at each clock tick, so short bursts are
		// missed: the figures are rough, unlike the process's own.
		row("machine CPU", fmt.Sprintf("about %.2f cores busy (all processes, /proc/stat), %.2f cores stolen by the hypervisor",
			r.machine.Busy.Seconds()/secs, r.machine.Steal.Seconds()/secs))
	}
	if r.serverCPUKnown && r.acked > 0 {
		row("server CPU per inv.", fmt.Sprintf("%.0f µs (child tool server over its whole life; %.2f CPU-seconds)",
			float64(r.serverCPU.Microseconds())/float64(r.acked), r.serverCPU.Seconds()))
	}
	if r.badCallbks > 0 {
		row("malformed callbacks", strconv.FormatInt(r.badCallbks, 10))
	}
}
