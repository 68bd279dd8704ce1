package rap_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/rap/durable"
)

// BenchmarkSenderDeliver measures callbacks delivered per second over
// loopback to an endpoint that answers 200 at once.
//
//   - direct: one goroutine calling Send, each call a full round trip.
//   - direct-parallel: rap.MaxInFlight goroutines calling Send at once.
//   - outbox: Send stores each message durably (an fsynced SQLite
//     transaction), Run delivers; the clock stops when Flush reports the
//     outbox empty, so the figure covers store, delivery and removal.
//   - outbox-parallel: as outbox, with rap.MaxInFlight goroutines sending.
func BenchmarkSenderDeliver(b *testing.B) {
	var received atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		received.Add(1)
	}))
	defer srv.Close()
	url := srv.URL + "/callback?token=bench"
	logger := slog.New(slog.DiscardHandler)
	msg := &rap.ToolResult{GroupID: "thread-1", ID: "call-1", Text: `{"temperature_c":21.5,"summary":"clear"}`}

	report := func(b *testing.B) {
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	}
	sendAll := func(b *testing.B, s *rap.Sender, workers int) {
		b.Helper()
		ctx := context.Background()
		var next atomic.Int64
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for next.Add(1) <= int64(b.N) {
					if err := s.Send(ctx, url, msg); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
	}

	for _, workers := range []int{1, rap.MaxInFlight} {
		name := "direct"
		if workers > 1 {
			name = "direct-parallel"
		}
		b.Run(name, func(b *testing.B) {
			s := rap.NewSender(rap.SenderOptions{Logger: logger})
			received.Store(0)
			b.ResetTimer()
			sendAll(b, s, workers)
			b.StopTimer()
			if got := received.Load(); got != int64(b.N) {
				b.Fatalf("endpoint received %d, want %d", got, b.N)
			}
			report(b)
		})
	}

	for _, workers := range []int{1, rap.MaxInFlight} {
		name := "outbox"
		if workers > 1 {
			name = "outbox-parallel"
		}
		b.Run(name, func(b *testing.B) {
			st, err := durable.Open(filepath.Join(b.TempDir(), fmt.Sprintf("bench-%d.db", b.N)))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			s := rap.NewSender(rap.SenderOptions{Outbox: st, Logger: logger})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- s.Run(ctx) }()
			defer func() { cancel(); <-done }()
			received.Store(0)
			b.ResetTimer()
			sendAll(b, s, workers)
			if err := s.Flush(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if got := received.Load(); got != int64(b.N) {
				b.Fatalf("endpoint received %d, want %d", got, b.N)
			}
			report(b)
		})
	}
}
