package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	goruntime "runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/store"
)

// IdleOptions configures RunIdle.
type IdleOptions struct {
	// Threads is how many hibernating threads to create; zero means 100,000.
	Threads int
	// Batch is how many threads one store transaction creates; zero means
	// 1,000.
	Batch int
	// Pending is how many of the threads wait for a tool call's result;
	// the others' last turn answered in text. Zero or more than Threads
	// means every thread.
	Pending int
	// Wake is how many of the threads are then woken with a user message
	// to show the runtime owns them; zero means 100.
	Wake int
	// DataDir holds the store; empty means a temporary directory.
	DataDir string
	// Store, when set, is a postgres:// URL: the threads are created in
	// that PostgreSQL database instead of SQLite in DataDir.
	Store string
	// Logger receives the runtime's logs; nil discards them.
	Logger *slog.Logger
	// Progress, when set, is called after each batch.
	Progress func(created int)
}

// IdleReport is the outcome of RunIdle.
type IdleReport struct {
	Threads    int
	CreateTime time.Duration
	// Goroutines and RSS (bytes, from /proc/self/status VmRSS) with the
	// runtime running, before the threads were created and after, each
	// after a garbage collection.
	GoroutinesBefore, GoroutinesAfter int
	RSSBefore, RSSAfter               int64
	// HeapBefore and HeapAfter are the Go heap in use (bytes).
	HeapBefore, HeapAfter uint64
	// PendingCalls is how many calls the store holds as dispatched and
	// waiting for a result.
	PendingCalls int
	// Woken threads processed a user message and dispatched a new call in
	// WakeTime; GoroutinesAfterWake is counted once they went idle again
	// and idle keep-alive connections were closed.
	Woken               int
	WakeTime            time.Duration
	GoroutinesAfterWake int
	// DBBytes is the size of the SQLite files (zero on PostgreSQL).
	DBBytes int64
	// RestartTime is how long a new runtime took, once the first was shut
	// down, from its creation to serving (its Start, recovery included),
	// with every thread and pending call in the store.
	RestartTime time.Duration
}

// String formats the report as a small table.
func (r *IdleReport) String() string {
	mib := func(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
	return fmt.Sprintf(`threads                             %d
created in                          %v
goroutines before / after           %d / %d
RSS before / after / growth         %s / %s / %s
Go heap before / after              %s / %s
pending calls in the store          %d
woken threads / time                %d / %v
goroutines after they went idle     %d
store size                          %s
restart: new runtime serving in     %v
`, r.Threads, r.CreateTime.Round(time.Millisecond), r.GoroutinesBefore, r.GoroutinesAfter,
		mib(r.RSSBefore), mib(r.RSSAfter), mib(r.RSSAfter-r.RSSBefore),
		mib(int64(r.HeapBefore)), mib(int64(r.HeapAfter)), r.PendingCalls,
		r.Woken, r.WakeTime.Round(time.Millisecond), r.GoroutinesAfterWake, mib(r.DBBytes), r.RestartTime.Round(time.Millisecond))
}

// RunIdle starts the runtime, then creates Threads threads each with an
// assistant turn whose tool call was dispatched and waits for its result —
// directly through the store, in batches, while the runtime runs — and
// reports goroutines and memory before and after. It then wakes Wake of
// them with a user message: each runs a slice, dispatches a new call and
// hibernates again.
func RunIdle(ctx context.Context, opts IdleOptions) (*IdleReport, error) {
	if opts.Threads <= 0 {
		opts.Threads = 100_000
	}
	if opts.Batch <= 0 {
		opts.Batch = 1000
	}
	if opts.Wake <= 0 {
		opts.Wake = 100
	}
	opts.Wake = min(opts.Wake, opts.Threads)
	if opts.Pending <= 0 || opts.Pending > opts.Threads {
		opts.Pending = opts.Threads
	}
	// Every pendingEvery-th thread waits for a call's result, the others
	// answered in text; the woken threads are picked among the former.
	pendingEvery := opts.Threads / opts.Pending
	opts.Wake = min(opts.Wake, opts.Pending)
	tools := newLoopTool(false, 64)
	e, err := newEnv(ctx, opts.DataDir, opts.Store, opts.Logger, tools, "", nil, observers{})
	if err != nil {
		return nil, err
	}
	defer e.close()
	manifest, err := json.Marshal(rap.Toolset{
		Name: "bench", Description: "Benchmark tool.", Endpoint: tools.base + "/invoke",
		Tools: []rap.Tool{{Name: "work", Description: "Answers at once.", InputSchema: rap.EmptyObjectSchema}},
	})
	if err != nil {
		return nil, err
	}

	rep := &IdleReport{Threads: opts.Threads}
	rep.GoroutinesBefore, rep.RSSBefore, rep.HeapBefore = measure()

	st := e.store()
	ids := make([]string, 0, opts.Pending) // the threads with a pending call
	start := time.Now()
	args := json.RawMessage(`{}`)
	for done := 0; done < opts.Threads; {
		n := min(opts.Batch, opts.Threads-done)
		batch := make([]string, n)
		for i := range batch {
			batch[i] = store.NewThreadID()
		}
		var waiting []string
		err := st.Update(ctx, func(tx store.Tx) error {
			waiting = waiting[:0]
			now := time.Now().UTC()
			for i, id := range batch {
				if err := tx.CreateThread(store.Thread{ID: id, RootID: id, Status: store.ThreadActive, Created: now}); err != nil {
					return err
				}
				if err := tx.PutToolset(store.CachedToolset{RootID: id, BaseURL: tools.base, Manifest: manifest, Fetched: now}); err != nil {
					return err
				}
				if (done+i)%pendingEvery != 0 || (done+i)/pendingEvery >= opts.Pending {
					if _, err := tx.AppendMessages(id, []store.Message{
						{Role: store.RoleUser, Text: "say something"},
						{Role: store.RoleAssistant, Text: "something"},
					}); err != nil {
						return err
					}
					continue
				}
				waiting = append(waiting, id)
				msgs, err := tx.AppendMessages(id, []store.Message{
					{Role: store.RoleUser, Text: "wait for the tool"},
					{Role: store.RoleAssistant, ToolCalls: []store.ToolCall{{ID: "call_1", Name: "work", Arguments: args, Display: "work()"}}},
				})
				if err != nil {
					return err
				}
				if err := tx.PutCalls([]store.Call{{ThreadID: id, CallID: "call_1", ToolName: "work", Arguments: args,
					Toolset: "bench", Endpoint: tools.base + "/invoke", TurnSeq: msgs[1].Seq, State: store.CallDispatched, Created: now}}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("create threads %d to %d: %w", done, done+n, err)
		}
		ids = append(ids, waiting...)
		done += n
		if opts.Progress != nil {
			opts.Progress(done)
		}
	}
	rep.CreateTime = time.Since(start)
	rep.GoroutinesAfter, rep.RSSAfter, rep.HeapAfter = measure()

	err = st.View(ctx, func(tx store.Tx) error {
		calls, err := tx.CallsInState(store.CallDispatched)
		rep.PendingCalls = len(calls)
		return err
	})
	if err != nil {
		return nil, err
	}

	// Wake a sample: the runtime owns these threads.
	before := tools.invoked.Load()
	start = time.Now()
	step := max(1, len(ids)/opts.Wake)
	var woken []string
	for i := 0; i < len(ids) && len(woken) < opts.Wake; i += step {
		if err := e.rt.PostMessage(ctx, ids[i], "wake up"); err != nil {
			return nil, fmt.Errorf("wake thread %s: %w", ids[i], err)
		}
		woken = append(woken, ids[i])
	}
	for _, id := range woken {
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		err := e.rt.Idle(wctx, id)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("woken thread %s did not go idle: %w", id, err)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for tools.invoked.Load()-before < int64(len(woken)) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	rep.WakeTime = time.Since(start)
	rep.Woken = int(tools.invoked.Load() - before)
	e.closeIdleConnections()
	// Connection goroutines exit asynchronously: give them up to 5 s.
	for end := time.Now().Add(5 * time.Second); ; {
		rep.GoroutinesAfterWake = goroutines()
		if rep.GoroutinesAfterWake <= rep.GoroutinesBefore || time.Now().After(end) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if opts.Store == "" {
		rep.DBBytes = dbBytes(e.dir)
	}
	if rep.RestartTime, err = e.restart(ctx); err != nil {
		return nil, err
	}
	return rep, nil
}

// measure collects garbage and returns the goroutine count, the resident
// set size and the Go heap in use.
func measure() (int, int64, uint64) {
	goruntime.GC()
	debug.FreeOSMemory()
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	return goroutines(), rss(), ms.HeapInuse
}

func goroutines() int { return goruntime.NumGoroutine() }

// rss reads VmRSS from /proc/self/status; it returns 0 where that file
// does not exist.
func rss() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			fields := strings.Fields(v)
			if len(fields) >= 1 {
				kb, err := strconv.ParseInt(fields[0], 10, 64)
				if err == nil {
					return kb * 1024
				}
			}
		}
	}
	return 0
}

func dbBytes(dir string) int64 {
	var n int64
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if fi, err := os.Stat(dir + "/runtime.db" + suffix); err == nil {
			n += fi.Size()
		}
	}
	return n
}
