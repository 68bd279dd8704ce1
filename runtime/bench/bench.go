// Package bench measures the gorap runtime's two promised figures
// (docs/benchmarks.md, "Runtime"):
//
//   - the cycle rate and latency of a thread's loop: a tool result arrives
//     on the callback endpoint, is appended durably, an instant scripted
//     model answers with the next tool call, and the call is dispatched to a
//     local tool server that acknowledges it and at once posts the next
//     result (RunCycles; "rap bench-runtime"; BenchmarkRuntimeCycle);
//   - the idle cost of many hibernating threads, each with a pending tool
//     call: goroutines and resident memory (RunIdle; "rap bench-idle").
//
// Both run a real runtime with the SQLite store (WAL, each commit synced before it is acknowledged) in
// a data directory and real HTTP over loopback.
package bench

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
	"path/filepath"
	"runtime/metrics"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorap/gorap/internal/cpustat"
	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime"
	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/postgres"
	"github.com/gorap/gorap/runtime/store/sqlite"
	"go.opentelemetry.io/otel/trace"
)

// loopScript makes the model call "work" after every input, instantly:
// every turn repeats, so the scripted model never replays the history.
var loopScript = []scripted.Turn{
	{ToolCalls: []scripted.Call{{Name: "work", Arguments: json.RawMessage(`{}`)}}, Repeat: true},
}

// env is a runtime, its store and a local tool server, all on loopback.
type env struct {
	rt      *runtime.Runtime
	st      *sqlite.Store // nil on PostgreSQL
	pg      *postgres.Store
	tools   *loopTool
	rtSrv   *http.Server
	toolSrv *http.Server
	dir     string
	ownDir  bool
	client  *http.Client // the runtime's client towards the tool server
	base    string       // the runtime's base URL (client API and callbacks)
	cfg     *runtime.Config
}

// closeIdleConnections drops keep-alive connections (and the goroutines
// that serve them) on both sides, so a goroutine count shows threads, not
// connections.
func (e *env) closeIdleConnections() {
	e.client.CloseIdleConnections()
	e.tools.client.CloseIdleConnections()
}

// observers are the runtime's metrics and tracer provider, nil for none.
type observers struct {
	metrics runtime.Metrics
	tp      trace.TracerProvider
}

// newEnv starts a tool server (tools, unless nil: then the one at
// toolsURL serves) and a runtime whose store lives in dataDir (a temporary
// directory when empty).
func newEnv(ctx context.Context, dataDir, storeURL string, log *slog.Logger, tools *loopTool, toolsURL string, prov model.Provider, obs observers) (*env, error) {
	if prov == nil {
		prov = scripted.New(loopScript)
	}
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	e := &env{tools: tools, dir: dataDir}
	if e.dir == "" {
		d, err := os.MkdirTemp("", "rap-bench-")
		if err != nil {
			return nil, fmt.Errorf("create a temporary data dir: %w", err)
		}
		e.dir, e.ownDir = d, true
	} else if err := os.MkdirAll(e.dir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir %s: %w", e.dir, err)
	}
	if tools != nil {
		toolLn, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			e.close()
			return nil, fmt.Errorf("listen for the tool server: %w", err)
		}
		tools.base = "http://" + toolLn.Addr().String()
		toolsURL = tools.base
		e.toolSrv = &http.Server{Handler: tools, ReadHeaderTimeout: 10 * time.Second}
		go e.toolSrv.Serve(toolLn)
	}

	var st store.Store
	var secret []byte
	if storeURL != "" {
		pg, err := postgres.Open(ctx, storeURL)
		if err != nil {
			e.close()
			return nil, err
		}
		e.pg, st = pg, pg
	} else {
		lite, err := sqlite.Open(filepath.Join(e.dir, "runtime.db"))
		if err != nil {
			e.close()
			return nil, err
		}
		e.st, st = lite, lite
		if secret, err = runtime.LoadOrCreateSecret(e.dir); err != nil {
			e.close()
			return nil, err
		}
	}
	rtLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.close()
		return nil, fmt.Errorf("listen for the runtime: %w", err)
	}
	e.client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024}}
	e.cfg = &runtime.Config{
		Store: st, Model: prov, ToolServers: []string{toolsURL},
		PublicURL: "http://" + rtLn.Addr().String(), Secret: secret, KeysFromStore: storeURL != "", Logger: log,
		HTTPClient: e.client, Metrics: obs.metrics, TracerProvider: obs.tp,
	}
	rt, err := runtime.New(e.cfg)
	if err != nil {
		rtLn.Close()
		e.close()
		return nil, err
	}
	if err := rt.Start(ctx); err != nil {
		rtLn.Close()
		e.close()
		return nil, err
	}
	e.rt, e.base = rt, "http://"+rtLn.Addr().String()
	e.rtSrv = runtime.NewHTTPServer(rt.Handler(), rap.HTTPLimits{}, nil)
	go e.rtSrv.Serve(rap.HTTPLimits{}.Listener(rtLn, nil))
	return e, nil
}

// writerStats returns the SQLite writer's counters (zero on PostgreSQL).
func (e *env) writerStats() sqlite.WriterStats {
	if e.st == nil {
		return sqlite.WriterStats{}
	}
	return e.st.WriterStats()
}

// store returns the runtime's store.
func (e *env) store() store.Store {
	if e.pg != nil {
		return e.pg
	}
	return e.st
}

// restart shuts the runtime down and starts a new one on the same store,
// as a process restart would, and returns how long the new one took from
// its creation to the end of Start (recovery done: serving). The HTTP
// server goes on serving the first runtime's handler; the new runtime is
// shut down by close.
func (e *env) restart(ctx context.Context) (time.Duration, error) {
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := e.rt.Shutdown(sctx); err != nil {
		return 0, fmt.Errorf("shut the runtime down: %w", err)
	}
	start := time.Now()
	rt, err := runtime.New(e.cfg)
	if err != nil {
		e.rt = nil
		return 0, err
	}
	e.rt = rt
	if err := rt.Start(ctx); err != nil {
		return 0, fmt.Errorf("start the runtime again: %w", err)
	}
	return time.Since(start), nil
}

// pgStats returns the PostgreSQL store's transaction counts (zero on
// SQLite).
func (e *env) pgStats() postgres.TxStats {
	if e.pg == nil {
		return postgres.TxStats{}
	}
	return e.pg.TxStats()
}

func (e *env) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if e.tools != nil {
		e.tools.stop()
	}
	if e.rt != nil {
		e.rt.Shutdown(ctx)
	}
	if e.rtSrv != nil {
		e.rtSrv.Shutdown(ctx)
	}
	if e.toolSrv != nil {
		e.toolSrv.Shutdown(ctx)
	}
	if e.tools != nil {
		e.tools.wait()
	}
	if e.st != nil {
		e.st.Close()
	}
	if e.pg != nil {
		e.pg.Close()
	}
	if e.ownDir {
		os.RemoveAll(e.dir)
	}
}

// loopTool is a minimal RAP tool server with one tool, "work". It answers
// every invocation 200 at once and then, when post is on, POSTs a result to
// the callback URL straight away. It records, per thread, how long it took
// from posting a result to receiving the thread's next invocation.
type loopTool struct {
	base   string
	post   bool // post results (cycle benchmark) or leave calls pending (idle benchmark)
	client *http.Client

	stopped   atomic.Bool
	posting   sync.WaitGroup
	mu        sync.Mutex
	measuring bool
	lastPost  map[string]time.Time
	lat       []time.Duration
	cycles    int64
	invoked   atomic.Int64
	failures  atomic.Int64
	firstFail atomic.Pointer[string] // why the first failure failed

	// budget, when positive, is the calls per thread after which the
	// model ends the thread's turn (RunCycles with a real provider);
	// renew then starts a thread in its place, so the pool stays full.
	budget int
	calls  map[string]int
	renew  func()
}

func newLoopTool(post bool, conns int) *loopTool {
	return &loopTool{
		post:     post,
		client:   &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: conns}},
		lastPost: map[string]time.Time{},
		calls:    map[string]int{},
	}
}

func (l *loopTool) stop() { l.stopped.Store(true) }
func (l *loopTool) wait() { l.posting.Wait() }

// startMeasuring resets the counters.
func (l *loopTool) startMeasuring() {
	l.mu.Lock()
	l.measuring = true
	l.lat = l.lat[:0]
	l.cycles = 0
	l.mu.Unlock()
}

// measured returns the cycles counted since startMeasuring.
func (l *loopTool) measured() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cycles
}

// result returns the cycles and latencies recorded since startMeasuring.
func (l *loopTool) result() (int64, []time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.measuring = false
	return l.cycles, append([]time.Duration(nil), l.lat...)
}

func (l *loopTool) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == rap.WellKnownPath:
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(rap.Toolset{
			Name: "bench", Description: "Benchmark tool.", Endpoint: l.base + "/invoke",
			Tools: []rap.Tool{{Name: "work", Description: "Answers at once.", InputSchema: rap.EmptyObjectSchema}},
		})
	case r.Method == http.MethodPost && r.URL.Path == "/invoke":
		now := time.Now()
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		inv, err := rap.DecodeInvocation(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		l.invoked.Add(1)
		l.mu.Lock()
		last := false
		if l.budget > 0 {
			l.calls[inv.GroupID]++
			if last = l.calls[inv.GroupID] >= l.budget; last {
				delete(l.calls, inv.GroupID)
				delete(l.lastPost, inv.GroupID)
			}
		}
		if l.measuring {
			l.cycles++
			if t, ok := l.lastPost[inv.GroupID]; ok {
				l.lat = append(l.lat, now.Sub(t))
			}
		}
		l.mu.Unlock()
		w.WriteHeader(http.StatusOK) // RAP TR-2: acknowledge first
		if !l.post || l.stopped.Load() {
			return
		}
		l.posting.Add(1)
		go func() {
			defer l.posting.Done()
			l.sendResult(inv, !last)
			if last && l.renew != nil && !l.stopped.Load() {
				l.renew()
			}
		}()
	default:
		http.NotFound(w, r)
	}
}

// sendResult posts the result of inv; timed says whether the thread's next
// invocation is expected (and its latency measured). A result the run
// ended before posting is not a failure: the runtime never saw it, and
// the measurement is over (the end of a run stops the results still on
// their way, which counted as failures before 2026-11-27).
func (l *loopTool) sendResult(inv *rap.Invocation, timed bool) {
	msg, _ := json.Marshal(&rap.ToolResult{GroupID: inv.GroupID, ID: inv.ID, Text: "ok"})
	why := ""
	for attempt := 0; attempt < 5 && !l.stopped.Load(); attempt++ {
		if timed {
			l.mu.Lock()
			l.lastPost[inv.GroupID] = time.Now()
			l.mu.Unlock()
		}
		resp, err := l.client.Post(inv.CallbackURL, "application/json", bytes.NewReader(msg))
		if err != nil {
			why = err.Error()
		} else {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			why = fmt.Sprintf("%s answered %s: %s", inv.CallbackURL, resp.Status, strings.TrimSpace(string(body)))
			if resp.StatusCode/100 == 4 {
				break
			}
		}
		time.Sleep(time.Duration(50<<attempt) * time.Millisecond)
	}
	if why == "" {
		return // the run ended before the first attempt: nothing failed
	}
	l.addFailure(fmt.Sprintf("result of call %s of thread %s: %s", inv.ID, inv.GroupID, why))
}

// addFailure counts a failure and keeps the first one's reason.
func (l *loopTool) addFailure(why string) {
	l.firstFail.CompareAndSwap(nil, &why) // before the count, which a report reads first
	l.failures.Add(1)
}

// firstFailure is the first failure's reason, or "".
func (l *loopTool) firstFailure() string {
	if p := l.firstFail.Load(); p != nil {
		return *p
	}
	return ""
}

// CycleOptions configures RunCycles.
type CycleOptions struct {
	// Threads is how many threads loop concurrently; zero means 16.
	Threads int
	// Duration is the measured time; zero means 10 s.
	Duration time.Duration
	// Warmup runs before measuring; zero means 1 s.
	Warmup time.Duration
	// Cycles, when positive, ends the measurement after that many cycles
	// (Duration then only bounds it); testing.B uses it for b.N.
	Cycles int64
	// DataDir holds the store; empty means a temporary directory.
	DataDir string
	// Store, when set, is a postgres:// URL: the runtime runs on that
	// PostgreSQL database instead of SQLite in DataDir.
	Store string
	// Logger receives the runtime's logs; nil discards them.
	Logger *slog.Logger
	// Model is the provider the runtime completes with; nil means an
	// instant scripted model that calls the tool after every input.
	// A real provider (against a local server speaking its wire format,
	// such as model/wiretest) must call the tool "work" until the
	// request holds Budget tool calls, then answer in text.
	Model model.Provider
	// Budget, with Model, is the tool calls per thread before its model
	// answers in text; the thread is then replaced by a new one, so
	// histories stay as long as in a real agent loop. Zero means 50.
	Budget int
	// ExternalCPU, when set, returns the CPU time used so far by
	// processes outside this one that serve the run (a model server in
	// a child process); the report shows it per cycle apart.
	ExternalCPU func() (time.Duration, error)
	// Peer, when set, runs the tool server and the load generator in
	// another process (ServePeer), so that this process's CPU time is the
	// runtime's alone; set ExternalCPU to Peer.CPU to report the peer's.
	Peer *Peer
	// Metrics and TracerProvider, when set, are the runtime's
	// (runtime.Config.Metrics, runtime.Config.TracerProvider): what
	// observing the runtime costs a cycle.
	Metrics        runtime.Metrics
	TracerProvider trace.TracerProvider
}

// CycleReport is the outcome of RunCycles.
type CycleReport struct {
	Threads   int
	Duration  time.Duration
	Cycles    int64
	PerSecond float64
	// P50, P90, P99 and Max are latencies from a tool POSTing a result to
	// the runtime dispatching the thread's next call.
	P50, P90, P99, Max time.Duration
	// Failures counts results the tool could not deliver (and, with a
	// real provider, threads that could not be started in place of a
	// finished one); FirstFailure says why the first of them failed.
	Failures     int64
	FirstFailure string
	// Goroutines is the process's goroutine count at the end of the run.
	Goroutines int
	// CPUPerCycle is the process's CPU time (user and system) per cycle:
	// the runtime's alone with CycleOptions.Peer, else the runtime's, the
	// tool server's and the load generator's together; zero where the
	// platform does not report CPU time.
	CPUPerCycle time.Duration
	// RuntimeOnly says that CPUPerCycle and the allocations are the
	// runtime's alone (CycleOptions.Peer).
	RuntimeOnly bool
	// Machine is the whole machine's CPU time during the measurement
	// (zero where /proc/stat is not there): its Steal is time the
	// hypervisor took from the virtual CPUs, which explains most of the
	// run-to-run variation on a virtual machine.
	Machine cpustat.MachineTimes
	// ExternalCPUPerCycle is CycleOptions.ExternalCPU's time per cycle.
	ExternalCPUPerCycle time.Duration
	// AllocsPerCycle and AllocBytesPerCycle are the heap allocations
	// (objects and bytes) of the whole process per cycle: a count that
	// varies far less than CPU time on a shared machine.
	AllocsPerCycle, AllocBytesPerCycle float64
	// Model names the provider used.
	Model string
	// Writer is what the store's single writer did during the measurement:
	// Writer.Updates/Writer.Transactions Update calls shared each commit.
	Writer sqlite.WriterStats
	// PostgresTx counts the transactions the runtime ran on PostgreSQL
	// during the measurement (zero on SQLite): commits per cycle is what
	// a cycle costs the database server.
	PostgresTx postgres.TxStats
}

// String formats the report as a small table.
func (r *CycleReport) String() string {
	s := ""
	if r.Model != "" {
		s += fmt.Sprintf("model        %s\n", r.Model)
	}
	s += fmt.Sprintf("threads      %d\nduration     %v\ncycles       %d\ncycles/s     %.0f\nlatency p50  %v\nlatency p90  %v\nlatency p99  %v\nlatency max  %v\nfailures     %d\n",
		r.Threads, r.Duration, r.Cycles, r.PerSecond, r.P50, r.P90, r.P99, r.Max, r.Failures)
	if r.FirstFailure != "" {
		s += fmt.Sprintf("first failure %s\n", r.FirstFailure)
	}
	what, ext := "whole process: runtime, tool server, load", "model server"
	if r.RuntimeOnly {
		what, ext = "runtime process alone", "peer"
	}
	if r.CPUPerCycle > 0 {
		s += fmt.Sprintf("cpu/cycle    %v (%s)\n", r.CPUPerCycle.Round(time.Microsecond), what)
	}
	if r.AllocsPerCycle > 0 {
		s += fmt.Sprintf("allocs/cycle %.0f (%.1f KB), %s\n", r.AllocsPerCycle, r.AllocBytesPerCycle/1024, what)
	}
	if r.ExternalCPUPerCycle > 0 {
		if r.RuntimeOnly {
			s += fmt.Sprintf("peer         %v cpu/cycle (its own process: tool server, load generator and any model server)\n", r.ExternalCPUPerCycle.Round(time.Microsecond))
			s += fmt.Sprintf("both         %v cpu/cycle (runtime and peer)\n", (r.CPUPerCycle + r.ExternalCPUPerCycle).Round(time.Microsecond))
			if r.CPUPerCycle > 0 {
				s += fmt.Sprintf("runtime÷peer %.2f (CPU over the same seconds: steadier than either figure across machines and hours)\n",
					float64(r.CPUPerCycle)/float64(r.ExternalCPUPerCycle))
			}
		} else {
			s += fmt.Sprintf("%s %v cpu/cycle (its own process, not counted above)\n", ext, r.ExternalCPUPerCycle.Round(time.Microsecond))
		}
	}
	if m := r.Machine; m.Total > 0 && r.Duration > 0 {
		s += fmt.Sprintf("machine CPU  %.2f cores busy (all processes), %.2f cores stolen by the hypervisor\n",
			m.Busy.Seconds()/r.Duration.Seconds(), m.Steal.Seconds()/r.Duration.Seconds())
	}
	if w := r.Writer; w.Transactions > 0 && r.Duration > 0 {
		s += fmt.Sprintf("store writer %.0f commits/s, %.1f updates/commit, %.2f ms/commit (%.2f ms appending to the WAL), busy %.0f%%\n",
			float64(w.Transactions)/r.Duration.Seconds(), float64(w.Updates)/float64(w.Transactions),
			float64(w.Busy)/float64(w.Transactions)/1e6, float64(w.Commit)/float64(w.Transactions)/1e6,
			100*w.Busy.Seconds()/r.Duration.Seconds())
		if w.QuickViews > 0 {
			s += fmt.Sprintf("store reads  %.0f/s on the writer (slice loads), %.0f µs each\n",
				float64(w.QuickViews)/r.Duration.Seconds(), float64(w.QuickViewTime.Microseconds())/float64(w.QuickViews))
		}
		if w.Syncs > 0 {
			s += fmt.Sprintf("store syncs  %.0f/s, %.2f ms each (off the writer); %d checkpoints\n",
				float64(w.Syncs)/r.Duration.Seconds(), float64(w.Sync)/float64(w.Syncs)/1e6, w.Checkpoints)
		}
	}
	if p := r.PostgresTx; p.Commits > 0 && r.Cycles > 0 {
		n := float64(r.Cycles)
		s += fmt.Sprintf("postgres     %.2f commits/cycle, %.2f read-only transactions/cycle, %.3f retries/cycle, %.1f round trips/cycle\n",
			float64(p.Commits)/n, float64(p.Views)/n, float64(p.Retries)/n, float64(p.RoundTrips)/n)
	}
	return s
}

// RunCycles measures the runtime's loop with Threads threads for Duration.
func RunCycles(ctx context.Context, opts CycleOptions) (*CycleReport, error) {
	if opts.Threads <= 0 {
		opts.Threads = 16
	}
	if opts.Duration <= 0 {
		opts.Duration = 10 * time.Second
	}
	if opts.Warmup <= 0 {
		opts.Warmup = time.Second
	}
	var (
		end   toolEnd
		local *loopTool
	)
	if opts.Peer != nil {
		end = &peerTools{p: opts.Peer}
	} else {
		local = newLoopTool(true, 2*opts.Threads)
		if opts.Model != nil {
			local.budget = opts.Budget
			if local.budget <= 0 {
				local.budget = 50
			}
		}
		end = localTools{local}
	}
	e, err := newEnv(ctx, opts.DataDir, opts.Store, opts.Logger, local, end.url(), opts.Model, observers{opts.Metrics, opts.TracerProvider})
	if err != nil {
		return nil, err
	}
	defer e.close()
	start := func() error {
		id, err := e.rt.CreateThread(ctx)
		if err != nil {
			return fmt.Errorf("create thread: %w", err)
		}
		if err := e.rt.PostMessage(ctx, id, "loop"); err != nil {
			return fmt.Errorf("start thread %s: %w", id, err)
		}
		return nil
	}
	if opts.Model != nil {
		end.setRenew(func() {
			if err := start(); err != nil {
				end.addFailure(err.Error())
			}
		})
	}
	for i := 0; i < opts.Threads; i++ {
		if err := start(); err != nil {
			return nil, fmt.Errorf("thread %d: %w", i, err)
		}
	}
	if err := sleep(ctx, opts.Warmup); err != nil {
		return nil, err
	}
	if _, invoked, err := end.counts(); err != nil {
		return nil, err
	} else if invoked == 0 {
		return nil, errors.New("no invocation reached the tool server during the warmup: the loop does not run")
	}
	if err := end.startMeasuring(); err != nil {
		return nil, err
	}
	begin := time.Now()
	cpu0, cpuOK := cpustat.Process()
	var ext0 time.Duration
	if opts.ExternalCPU != nil {
		if ext0, err = opts.ExternalCPU(); err != nil {
			return nil, err
		}
	}
	mach0, machOK := cpustat.Machine()
	w0 := e.writerStats()
	pg0 := e.pgStats()
	allocs0, bytes0 := heapAllocs()
	if opts.Cycles > 0 {
		deadline := time.Now().Add(opts.Duration)
		for {
			n, _, err := end.counts()
			if err != nil {
				return nil, err
			}
			if n >= opts.Cycles {
				break
			}
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("only %d of %d cycles within %v", n, opts.Cycles, opts.Duration)
			}
			if err := sleep(ctx, time.Millisecond); err != nil {
				return nil, err
			}
		}
	} else if err := sleep(ctx, opts.Duration); err != nil {
		return nil, err
	}
	counted, err := end.finish()
	if err != nil {
		return nil, err
	}
	cycles := counted.cycles
	elapsed := time.Since(begin)
	cpu1, _ := cpustat.Process()
	var ext1 time.Duration
	if opts.ExternalCPU != nil {
		if ext1, err = opts.ExternalCPU(); err != nil {
			return nil, err
		}
	}
	mach1, _ := cpustat.Machine()
	w1 := e.writerStats()
	pg1 := e.pgStats()
	allocs1, bytes1 := heapAllocs()
	rep := &CycleReport{Threads: opts.Threads, Duration: elapsed, Cycles: cycles, RuntimeOnly: opts.Peer != nil,
		PerSecond: float64(cycles) / elapsed.Seconds(), Failures: counted.failures, FirstFailure: counted.firstFailure, Goroutines: goroutines(),
		Writer: sqlite.WriterStats{Transactions: w1.Transactions - w0.Transactions, Updates: w1.Updates - w0.Updates,
			Busy: w1.Busy - w0.Busy, Commit: w1.Commit - w0.Commit, Syncs: w1.Syncs - w0.Syncs, Sync: w1.Sync - w0.Sync,
			Checkpoints: w1.Checkpoints - w0.Checkpoints, QuickViews: w1.QuickViews - w0.QuickViews,
			QuickViewTime: w1.QuickViewTime - w0.QuickViewTime},
		PostgresTx: pg1.Sub(pg0)}
	if cpuOK && cycles > 0 {
		rep.CPUPerCycle = (cpu1 - cpu0) / time.Duration(cycles)
	}
	if cycles > 0 {
		rep.AllocsPerCycle = float64(allocs1-allocs0) / float64(cycles)
		rep.AllocBytesPerCycle = float64(bytes1-bytes0) / float64(cycles)
	}
	if opts.ExternalCPU != nil && cycles > 0 {
		rep.ExternalCPUPerCycle = (ext1 - ext0) / time.Duration(cycles)
	}
	rep.Model = "scripted (instant)"
	if opts.Model != nil {
		rep.Model = opts.Model.Name()
	}
	if machOK {
		rep.Machine = mach1.Sub(mach0)
	}
	rep.P50, rep.P90, rep.P99, rep.Max = counted.p50, counted.p90, counted.p99, counted.max
	return rep, nil
}

// heapAllocs returns the objects and bytes the process has allocated on
// the heap so far (runtime/metrics: no stop-the-world, unlike ReadMemStats).
func heapAllocs() (objects, bytes uint64) {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}, {Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 || s[1].Value.Kind() != metrics.KindUint64 {
		return 0, 0
	}
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// percentiles returns p50, p90, p99 and the maximum of lat.
func percentiles(lat []time.Duration) (p50, p90, p99, max time.Duration) {
	if len(lat) == 0 {
		return
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	at := func(q float64) time.Duration {
		i := int(q*float64(len(lat))+0.5) - 1
		if i < 0 {
			i = 0
		}
		if i >= len(lat) {
			i = len(lat) - 1
		}
		return lat[i]
	}
	return at(0.50), at(0.90), at(0.99), lat[len(lat)-1]
}
