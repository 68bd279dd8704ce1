package loadtest

import (
	"fmt"
	"io"
	"os"
	goruntime "runtime"
	"strconv"
	"strings"
	"time"
)

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

func PrintReport(w io.Writer, cfg Config, r *Report) {
	secs := r.elapsed.Seconds()
	mode := fmt.Sprintf("open loop at %d/s, at most %d in flight", cfg.Rate, cfg.Concurrency)
	if cfg.Rate == 0 {
		mode = fmt.Sprintf("flat out, %d workers", cfg.Concurrency)
	}
	row := func(k, v string) { fmt.Fprintf(w, "  %-20s %s\n", k, v) }
	fmt.Fprintf(w, "rap loadtest ack: %s %s\n", cfg.Op, r.target)
	row("machine", machine())
	row("garbage collector", gcSettings())
	warm := "no warm-up"
	if cfg.Warmup > 0 {
		warm = fmt.Sprintf("after a %v warm-up at the same load, not reported", cfg.Warmup)
	}
	row("mode", fmt.Sprintf("%s for %v, %s", mode, cfg.Duration, warm))
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
	if cfg.Rate > 0 {
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
		own, whose := r.cpu, "this process"
		if r.serverCPUKnown {
			own += r.serverCPU
			whose = "this process and its child tool server, whose CPU over its whole life is taken off"
		}
		row("other load", fmt.Sprintf("about %.2f cores busy outside %s (other work competing with the run)",
			otherLoad(r.machine.Busy, own, secs), whose))
	}
	if r.serverCPUKnown && r.acked > 0 {
		row("server CPU per inv.", fmt.Sprintf("%.0f µs (child tool server over its whole life; %.2f CPU-seconds)",
			float64(r.serverCPU.Microseconds())/float64(r.acked), r.serverCPU.Seconds()))
	}
	if r.badCallbks > 0 {
		row("malformed callbacks", strconv.FormatInt(r.badCallbks, 10))
	}
}

// Acked is how many invocations were acknowledged with a 200.
func (r *Report) Acked() int64 { return r.acked }

// FirstError is the first refusal or transport error of the run, if any.
func (r *Report) FirstError() string { return r.firstErr }

// otherLoad is the cores the machine kept busy over secs seconds, outside
// the CPU time own spent by the processes measured: busy is rough (sampled
// per clock tick), so the figure is too, and never below zero.
func otherLoad(busy, own time.Duration, secs float64) float64 {
	if secs <= 0 {
		return 0
	}
	return max(0, (busy-own).Seconds()/secs)
}
