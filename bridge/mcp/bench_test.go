package mcp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/gorap/gorap/raptest"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// reportLatency reports the p50 and p99 of ds.
func reportLatency(b *testing.B, ds []time.Duration) {
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(ds[len(ds)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkDirectCall calls echo on the in-process MCP server (Streamable
// HTTP on loopback) with the Go SDK client: the baseline.
func BenchmarkDirectCall(b *testing.B) {
	s := newTestServer(&serverHooks{release: make(chan struct{})})
	hs := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	defer hs.Close()
	ctx := context.Background()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, &sdk.StreamableClientTransport{Endpoint: hs.URL}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}}); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(start))
	}
	reportLatency(b, ds)
}

// BenchmarkBridgedCall calls the same tool through the bridge: a RAP
// invocation (acknowledged at once), tools/call, and the tool_result
// POSTed back to the fake runtime.
func BenchmarkBridgedCall(b *testing.B) {
	hooks := &serverHooks{release: make(chan struct{})}
	s := newTestServer(hooks)
	hs := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	defer hs.Close()
	ctx := context.Background()
	br, err := New(&Options{Name: "bench", URL: hs.URL, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	if err := br.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer br.Shutdown(ctx)
	rs := httptest.NewServer(br)
	defer rs.Close()
	f := &fixture{bridge: br, url: rs.URL}
	rt, err := raptest.Start()
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	f.rt = rt
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		c, err := f.rt.Invoke(ctx, f.url, "echo", map[string]any{"text": "hi"})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.Result(ctx); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(start))
		c.Close()
	}
	b.StopTimer()
	reportLatency(b, ds)
	b.ReportMetric(float64(len(ds))/b.Elapsed().Seconds(), "calls/s")
}
