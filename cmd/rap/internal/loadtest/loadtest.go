// Package loadtest measures how fast a RAP tool server acknowledges
// invocations (RAP TR-2): the engine of "rap loadtest ack". It sends
// invocations over kept-alive connections on a fixed (open-loop) schedule
// or flat out, receives the callbacks on a minimal local receiver, and
// reports latency percentiles, throughput and the CPU and memory it took.
package loadtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorap/gorap/examples/gettime"
	"github.com/gorap/gorap/internal/bearer"
	"github.com/gorap/gorap/internal/cpustat"
	"github.com/gorap/gorap/rap"
)

// Limits of the load generator.
const (
	MaxRate        = 1_000_000      // most invocations per second
	MaxConcurrency = 4096           // most workers
	MaxDuration    = 24 * time.Hour // longest run or warm-up
	// callbackDrain is how long the run waits after the last send for the
	// callbacks still on their way.
	callbackDrain = 5 * time.Second
)

// Config is one "rap loadtest ack" run.
type Config struct {
	URL         string          // base URL of the tool server; empty: the gettime example in process
	Op          string          // the operation invoked
	Args        json.RawMessage // its arguments, a JSON object
	Rate        int             // invocations per second (open loop); 0: flat out from Concurrency workers
	Duration    time.Duration   // how long the measured run sends
	Warmup      time.Duration   // sent before the measured run, not reported
	Concurrency int             // workers for Rate 0; for a fixed rate, the most requests in flight
	Token       string          // bearer token for the tool server
	ServerProc  bool            // run the gettime example as a child process
	// ServerCommand is the child's command line for ServerProc: a program
	// that serves the gettime example on a free loopback port and prints
	// "... listening on URL".
	ServerCommand []string
}

// Check reports the first setting out of its bounds, in words naming the
// flag of "rap loadtest".
func (cfg Config) Check() error {
	switch {
	case cfg.Rate < 0 || cfg.Rate > MaxRate:
		return fmt.Errorf("--rate must be 0 to %d", MaxRate)
	case cfg.Duration <= 0 || cfg.Duration > MaxDuration:
		return fmt.Errorf("--duration must be positive and at most %v", MaxDuration)
	case cfg.Warmup < 0 || cfg.Warmup > MaxDuration:
		return fmt.Errorf("--warmup must be 0 to %v", MaxDuration)
	case cfg.Concurrency < 1 || cfg.Concurrency > MaxConcurrency:
		return fmt.Errorf("--concurrency must be 1 to %d", MaxConcurrency)
	case cfg.URL != "" && cfg.ServerProc:
		return errors.New("--server-proc starts its own server; it cannot be combined with --url")
	case cfg.URL != "" && !strings.HasPrefix(cfg.URL, "http://") && !strings.HasPrefix(cfg.URL, "https://"):
		return fmt.Errorf("--url %q must start with http:// or https://", cfg.URL)
	case !json.Valid(cfg.Args) || !strings.HasPrefix(strings.TrimSpace(string(cfg.Args)), "{"):
		return errors.New("--args must be a JSON object")
	}
	return nil
}

// Report is what a run measured.
type Report struct {
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

// Run runs the load and measures it.
func Run(ctx context.Context, cfg Config, stderr io.Writer) (*Report, error) {
	rep := &Report{target: cfg.URL}

	// The callback receiver counts every callback.
	cb, err := newCallbackReceiver()
	if err != nil {
		return nil, err
	}
	defer cb.close()

	if cfg.URL == "" && cfg.ServerProc {
		child, err := startServerProcess(ctx, cfg.ServerCommand, stderr)
		if err != nil {
			return nil, err
		}
		defer func() { rep.serverCPU, rep.serverCPUKnown = child.stop() }()
		cfg.URL = child.url
		rep.target = cfg.URL + " (gettime in a child process)"
	} else if cfg.URL == "" {
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
		cfg.URL = "http://" + ln.Addr().String()
		rep.target = cfg.URL + " (in-process gettime)"
	}

	ts, _, err := rap.FetchToolset(ctx, bearer.Client(cfg.Token, 30*time.Second), cfg.URL)
	if err != nil {
		return nil, err
	}
	callbackURL := cb.url()
	target, err := newAckTarget(ts.Endpoint, cfg.Token, func(id string) []byte {
		b, _ := json.Marshal(rap.Invocation{
			Operation: cfg.Op,
			Arguments: cfg.Args,
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
	if cfg.Rate > 0 {
		interval = time.Second / time.Duration(cfg.Rate)
		total = int64(cfg.Duration / interval)
	}
	workers := make([]*loadWorker, cfg.Concurrency)
	for i := range workers {
		w := &loadWorker{conn: ackConn{t: target}}
		room := int64(latencyPrealloc)
		if total > 0 {
			room = min(room, total/int64(cfg.Concurrency)+total/8+16)
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
		if cfg.Rate == 0 {
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
	if cfg.Warmup > 0 {
		run(cfg.Warmup)
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
	run(cfg.Duration)
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
