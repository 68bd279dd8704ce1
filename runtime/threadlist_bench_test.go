package runtime

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// benchThreads is the store size of the thread-listing benchmarks.
const benchThreads = 100000

// newBenchEnv returns a runtime over SQLite holding benchThreads threads:
// one root with 50 children, the rest roots.
func newBenchEnv(b *testing.B) (*env, string) {
	e := newEnv(b, envOptions{})
	root := e.newThread()
	e.addThreads(50, root, "kid")
	for i := 0; i < benchThreads-51; i += 10000 {
		e.addThreads(min(10000, benchThreads-51-i), "", fmt.Sprintf("b%03d-", i/10000))
	}
	return e, root
}

func benchGet(b *testing.B, h http.Handler, path string) {
	req := httptest.NewRequest("GET", path, nil)
	req.RemoteAddr = "127.0.0.1:40000"
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("%s: %d %s", path, w.Code, w.Body)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
}

// BenchmarkStatusRead100k is GET /v1/threads/{id} of a thread with 50
// children among 100,000 threads.
func BenchmarkStatusRead100k(b *testing.B) {
	e, root := newBenchEnv(b)
	benchGet(b, e.rt.Handler(), "/v1/threads/"+root)
}

// BenchmarkListPage100k is one page (the default 100 threads) of
// GET /v1/threads from the middle of 100,000 threads.
func BenchmarkListPage100k(b *testing.B) {
	e, _ := newBenchEnv(b)
	h := e.rt.Handler()
	// Find a cursor halfway through.
	cursor := ""
	for range 500 {
		w := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/v1/threads?limit=100&cursor="+cursor, nil)
		req.RemoteAddr = "127.0.0.1:40000"
		h.ServeHTTP(w, req)
		var a listAnswer
		if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil || a.NextCursor == "" {
			b.Fatalf("paging: %v %q", err, w.Body.String()[:min(200, w.Body.Len())])
		}
		cursor = a.NextCursor
	}
	benchGet(b, h, "/v1/threads?cursor="+cursor)
}

// BenchmarkListPageMax100k is one page of the maximum 1000 threads.
func BenchmarkListPageMax100k(b *testing.B) {
	e, _ := newBenchEnv(b)
	benchGet(b, e.rt.Handler(), "/v1/threads?limit=1000")
}

// BenchmarkListFirstPage100k is the first page (100 threads).
func BenchmarkListFirstPage100k(b *testing.B) {
	e, _ := newBenchEnv(b)
	benchGet(b, e.rt.Handler(), "/v1/threads")
}
