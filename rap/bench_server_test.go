package rap_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
)

// BenchmarkAcknowledge measures how many invocations per second a tool
// server acknowledges over real loopback HTTP with keep-alive
// connections: parse, reserve a worker slot, answer 200 (RAP TR-2). The
// handler returns at once and its result goes to a callback server that
// answers 200, so the measured path includes the background work it
// competes with. The benchmark waits for every result before it stops the
// clock, so acks/s is sustained throughput, not a burst into the queue.
func BenchmarkAcknowledge(b *testing.B) {
	var delivered atomic.Int64
	callbacks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		delivered.Add(1)
	}))
	defer callbacks.Close()
	transport := &http.Transport{MaxIdleConns: 512, MaxIdleConnsPerHost: 512}
	defer transport.CloseIdleConnections()

	s := rap.NewServer("bench", &rap.ServerOptions{
		Logger:     sdkQuiet(),
		HTTPClient: &http.Client{Transport: transport},
		Queue:      1 << 16, // measure acknowledgement, not 503s
	})
	rap.AddTool(s, &rap.Tool{Name: "noop", Description: "Returns at once."},
		func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) { return rap.Text("ok"), nil })
	ctx := context.Background()
	if err := s.Start(ctx); err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	client := &http.Client{Transport: transport, Timeout: time.Minute}
	cb := callbacks.URL + "/cb"

	var seq, refused atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := seq.Add(1)
			body := fmt.Appendf(nil, `{"operation":"noop","arguments":{},"id":"call_%d","group_id":"bench","callback_url":%q}`, id, cb)
			resp, err := client.Post(srv.URL, "application/json", bytes.NewReader(body))
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				refused.Add(1)
			}
		}
	})
	acked := seq.Load() - refused.Load()
	for delivered.Load() < acked {
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if n := refused.Load(); n > 0 {
		b.Errorf("%d invocations refused", n)
	}
	b.ReportMetric(float64(acked)/elapsed.Seconds(), "acks/s")
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := s.Shutdown(sctx); err != nil {
		b.Fatal(err)
	}
}
