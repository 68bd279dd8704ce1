package bench

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/gorap/gorap/runtime/metrics"
)

// BenchmarkRuntimeCycleObserved measures the cycle of
// BenchmarkRuntimeCycle (16 threads, tool server and load generator in
// this process) three ways: unobserved, with the runtime's Prometheus
// metrics, and with its traces exported over OTLP/HTTP (batched, as
// internal/tracing sets it up) to a local receiver that reads and
// discards them. The allocations and CPU time per cycle say what
// observing costs; docs/benchmarks.md has the figures.
func BenchmarkRuntimeCycleObserved(b *testing.B) {
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer sink.Close()
	for _, mode := range []string{"off", "metrics", "tracing"} {
		b.Run(mode, func(b *testing.B) {
			opts := CycleOptions{Threads: 16, Cycles: int64(b.N), Duration: 5 * time.Minute, Warmup: 500 * time.Millisecond, DataDir: b.TempDir()}
			switch mode {
			case "metrics":
				m, err := metrics.New(prometheus.NewRegistry(), nil)
				if err != nil {
					b.Fatal(err)
				}
				opts.Metrics = m
			case "tracing":
				exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpoint(strings.TrimPrefix(sink.URL, "http://")), otlptracehttp.WithInsecure())
				if err != nil {
					b.Fatal(err)
				}
				tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
				defer tp.Shutdown(context.Background())
				opts.TracerProvider = tp
			}
			rep, err := RunCycles(context.Background(), opts)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(rep.PerSecond, "cycles/s")
			b.ReportMetric(float64(rep.Duration.Nanoseconds())/float64(rep.Cycles), "ns/cycle")
			if rep.CPUPerCycle > 0 {
				b.ReportMetric(float64(rep.CPUPerCycle.Microseconds()), "cpu-µs/cycle")
			}
			b.ReportMetric(rep.AllocsPerCycle, "allocs/cycle")
			b.ReportMetric(rep.AllocBytesPerCycle, "B/cycle")
		})
	}
}
