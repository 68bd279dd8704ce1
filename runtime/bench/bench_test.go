package bench

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkRuntimeCycle measures one cycle of a thread's loop: a tool
// result POSTed to the callback endpoint → durable append (SQLite, WAL,
// synced before it is acknowledged) → instant scripted completion → the next call
// dispatched and acknowledged by a local tool server, which at once posts
// the next result. 1 to 128 threads loop concurrently. It reports cycles/s and
// the p50/p99 latency of a cycle. The target (docs/benchmarks.md) is 2,000
// cycles/s on 2 cores.
func BenchmarkRuntimeCycle(b *testing.B) {
	for _, threads := range []int{1, 16, 64, 128} {
		b.Run(threadsName(threads), func(b *testing.B) {
			rep, err := RunCycles(context.Background(), CycleOptions{
				Threads: threads, Cycles: int64(b.N), Duration: 5 * time.Minute, Warmup: 500 * time.Millisecond,
				DataDir: b.TempDir(),
			})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(rep.PerSecond, "cycles/s")
			b.ReportMetric(float64(rep.P50.Microseconds()), "p50-µs")
			b.ReportMetric(float64(rep.P99.Microseconds()), "p99-µs")
			b.ReportMetric(float64(rep.Duration.Nanoseconds())/float64(rep.Cycles), "ns/cycle")
			if rep.CPUPerCycle > 0 {
				b.ReportMetric(float64(rep.CPUPerCycle.Microseconds()), "cpu-µs/cycle")
			}
			if rep.Machine.Total > 0 {
				b.ReportMetric(rep.Machine.Steal.Seconds()/rep.Duration.Seconds(), "stolen-cores")
			}
			if rep.Writer.Transactions > 0 {
				b.ReportMetric(float64(rep.Writer.Updates)/float64(rep.Writer.Transactions), "updates/commit")
			}
		})
	}
}

func threadsName(n int) string { return "threads=" + strconv.Itoa(n) }

// The cycle loop runs and every result is delivered. (Speed is measured
// by the benchmark, never asserted.)
func TestRunCyclesLoops(t *testing.T) {
	rep, err := RunCycles(context.Background(), CycleOptions{Threads: 4, Duration: time.Second, Warmup: 300 * time.Millisecond, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Cycles == 0 || rep.P50 <= 0 || rep.P99 < rep.P50 || rep.Max < rep.P99 {
		t.Errorf("implausible report:\n%s", rep)
	}
	if rep.Failures != 0 {
		t.Errorf("%d results were not delivered; the first: %s", rep.Failures, rep.FirstFailure)
	}
	t.Logf("\n%s", rep)
}

// Hibernating threads cost store rows, not goroutines: creating threads
// with pending calls leaves the goroutine count unchanged, and woken
// threads go back to sleep.
func TestRunIdleGoroutines(t *testing.T) {
	rep, err := RunIdle(context.Background(), IdleOptions{Threads: 3000, Batch: 500, Wake: 20, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", rep)
	if rep.PendingCalls < rep.Threads {
		t.Errorf("store holds %d pending calls, want at least %d", rep.PendingCalls, rep.Threads)
	}
	if d := rep.GoroutinesAfter - rep.GoroutinesBefore; d > 3 {
		t.Errorf("goroutines grew by %d for %d idle threads", d, rep.Threads)
	}
	if rep.Woken != 20 {
		t.Errorf("%d woken threads dispatched a new call, want 20", rep.Woken)
	}
	if d := rep.GoroutinesAfterWake - rep.GoroutinesBefore; d > 3 {
		t.Errorf("goroutines grew by %d after woken threads went idle again", d)
	}
}

func TestPercentiles(t *testing.T) {
	var lat []time.Duration
	for i := 100; i >= 1; i-- {
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	p50, p90, p99, max := percentiles(lat)
	if p50 != 50*time.Millisecond || p90 != 90*time.Millisecond || p99 != 99*time.Millisecond || max != 100*time.Millisecond {
		t.Errorf("percentiles = %v %v %v %v", p50, p90, p99, max)
	}
	if a, b, c, d := percentiles(nil); a+b+c+d != 0 {
		t.Error("empty input should give zeros")
	}
}

// A report of a run with a peer process gives the runtime's CPU per cycle
// divided by the peer's, the figure that stays put when the machine's
// speed drifts (docs/benchmarks.md).
func TestReportGivesRuntimePerPeerCPU(t *testing.T) {
	rep := &CycleReport{Threads: 1, Duration: time.Second, Cycles: 10, RuntimeOnly: true,
		CPUPerCycle: 900 * time.Microsecond, ExternalCPUPerCycle: 600 * time.Microsecond}
	if s := rep.String(); !strings.Contains(s, "runtime÷peer 1.50 ") {
		t.Errorf("report without runtime÷peer 1.50:\n%s", s)
	}
}
