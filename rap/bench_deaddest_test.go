package rap_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
)

// procStatusMB reads a "VmRSS"/"VmHWM" line of /proc/self/status in MiB
// (0 where there is none).
func procStatusMB(field string) float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// peakHeap samples the heap in use until stop is closed.
func peakHeap(stop <-chan struct{}) <-chan uint64 {
	out := make(chan uint64, 1)
	go func() {
		var peak uint64
		var ms runtime.MemStats
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
			select {
			case <-stop:
				out <- peak
				return
			case <-t.C:
			}
		}
	}()
	return out
}

// BenchmarkDeadDestinations measures callback delivery when 5 of 20
// runtimes accept connections and never answer: b.N
// tool results of 1 KiB go round robin to the 20, and the benchmark ends
// when the 15 healthy runtimes have all of theirs. It reports the peak
// heap in use, the process's peak RSS, the heap in use and goroutines
// left after a GC at the end (the dead runtimes' queues and hanging
// attempts), the callbacks dead-lettered, and the invocations for dead
// runtimes refused with 503 once their in-memory backlog was full.
//
//	go test ./rap -run '^$' -bench DeadDestinations -benchtime 20000x
func BenchmarkDeadDestinations(b *testing.B) {
	for _, mode := range []string{"memory", "durable"} {
		b.Run(mode, func(b *testing.B) { benchDeadDestinations(b, mode) })
	}
}

func benchDeadDestinations(b *testing.B, mode string) {
	const healthy, dead = 15, 5
	var delivered atomic.Int64
	var urls []string
	for range healthy {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { delivered.Add(1) }))
		b.Cleanup(srv.Close)
		urls = append(urls, srv.URL)
	}
	stop := make(chan struct{})
	for range dead {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// Reading the body lets the server notice, and end this
			// handler, when the client gives up.
			_, _ = io.Copy(io.Discard, r.Body)
			select {
			case <-r.Context().Done():
			case <-stop:
			}
		}))
		b.Cleanup(srv.Close)
		urls = append(urls, srv.URL)
	}
	b.Cleanup(func() { close(stop) })
	text := strings.Repeat("r", 1<<10)

	var refused int // invocations answered 503 (a runtime retries them)
	var send func(i int) error
	var deadLetters func() int
	var shutdown func()
	switch mode {
	case "memory":
		// A tool server without a Store, invoked over HTTP.
		s := rap.NewServer("bench", &rap.ServerOptions{Logger: sdkQuiet()})
		addEcho(s)
		if err := s.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		hs := httptest.NewServer(s)
		client := &http.Client{}
		send = func(i int) error {
			body := sdkInvocation("echo", fmt.Sprintf("c%d", i), "t", fmt.Sprintf("%s/cb/%d", urls[i%len(urls)], i), map[string]any{"text": text})
			resp, err := client.Post(hs.URL, "application/json", strings.NewReader(string(body)))
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusServiceUnavailable && i%len(urls) >= healthy {
				refused++ // a dead runtime's backlog is full
				return nil
			}
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("invocation answered %d", resp.StatusCode)
			}
			return nil
		}
		deadLetters = func() int { dl, _ := s.DeadLetters(context.Background(), rap.MaxMemoryDeadLetters); return len(dl) }
		shutdown = func() {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			_ = s.Shutdown(ctx)
			hs.Close()
		}
	case "durable":
		// A Sender on a rap/durable outbox.
		st := openStore(b, filepath.Join(b.TempDir(), "tool.db"))
		snd := rap.NewSender(rap.SenderOptions{Outbox: st, Logger: sdkQuiet()})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = snd.Run(ctx) }()
		send = func(i int) error {
			return snd.Send(context.Background(), fmt.Sprintf("%s/cb/%d", urls[i%len(urls)], i),
				&rap.ToolResult{GroupID: "t", ID: fmt.Sprintf("c%d", i), Text: text})
		}
		deadLetters = func() int { return 0 }
		shutdown = func() { cancel(); <-done; st.Close() }
	}

	runtime.GC()
	stopSampling := make(chan struct{})
	peak := peakHeap(stopSampling)
	want := int64(0)
	b.ResetTimer()
	for i := range b.N {
		if err := send(i); err != nil {
			b.Fatal(err)
		}
		if i%len(urls) < healthy {
			want++
		}
	}
	deadline := time.Now().Add(5 * time.Minute)
	for delivered.Load() < want {
		if time.Now().After(deadline) {
			b.Fatalf("healthy runtimes got %d of %d results", delivered.Load(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
	b.StopTimer()
	close(stopSampling)
	b.ReportMetric(float64(<-peak)/(1<<20), "peak-heap-MiB")
	b.ReportMetric(procStatusMB("VmHWM"), "peak-RSS-MiB")
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "live-heap-MiB")
	b.ReportMetric(float64(runtime.NumGoroutine()), "goroutines")
	b.ReportMetric(float64(deadLetters()), "dead-letters")
	b.ReportMetric(float64(refused), "refused-503")
	shutdown()
}
