package rap_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
)

// eventLog is a healthy runtime that records, per callback path, the
// texts of the events and results it receives in arrival order.
type eventLog struct {
	srv *httptest.Server
	mu  sync.Mutex
	got map[string][]string
}

func newEventLog(t *testing.T) *eventLog {
	l := &eventLog{got: map[string][]string{}}
	l.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m struct {
			Text string `json:"text"`
		}
		_ = json.Unmarshal(body, &m)
		l.mu.Lock()
		l.got[r.URL.Path] = append(l.got[r.URL.Path], m.Text)
		l.mu.Unlock()
	}))
	t.Cleanup(l.srv.Close)
	return l
}

func (l *eventLog) texts(path string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.got[path]...)
}

// newHangingRuntime is a runtime that accepts connections and never
// answers, until the test ends.
func newHangingRuntime(t *testing.T) *httptest.Server {
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Reading the body lets the server notice, and end this handler,
		// when the client gives up.
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stop) }) // runs first: lets Close return
	return srv
}

// invokeRetrying POSTs an invocation as a runtime does: a 503 is retried
// (RAP TR-3) until the deadline.
func invokeRetrying(t *testing.T, url string, body []byte, deadline time.Time) {
	t.Helper()
	for {
		status, msg, _ := sdkPost(t, url, body)
		if status == http.StatusOK {
			return
		}
		if status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("invocation answered %d %q", status, msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// One slow or dead callback destination must not stall
// the others. A tool server without a Store, with few workers, serves 20
// runtimes of which 5 accept connections and never answer. The calls of
// the dead ones finish and hold no worker while their results wait; the
// 15 healthy runtimes receive every result and every subscription event,
// in order per callback URL, promptly.
func TestDeadDestinationsDoNotStallOthers(t *testing.T) {
	const healthy, dead, events = 15, 5, 20
	var dests []*eventLog
	for range healthy {
		dests = append(dests, newEventLog(t))
	}
	var deadURLs []string
	for range dead {
		deadURLs = append(deadURLs, newHangingRuntime(t).URL)
	}
	s := rap.NewServer("sdk_test", &rap.ServerOptions{Workers: 2, Queue: 2, Logger: sdkQuiet(), Retry: sdkFastRetry})
	addEcho(s)
	rap.AddSubscription(s, &rap.Tool{Name: "count", Description: "Counts."},
		func(ctx context.Context, sub *rap.Subscription, in struct{}) error {
			for i := range events {
				if err := sub.Emit(ctx, fmt.Sprint(i)); err != nil {
					return err
				}
			}
			return sub.Final(ctx, "end", false)
		})
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_ = s.Shutdown(ctx) // the dead runtimes' callbacks never drain
	})

	start := time.Now()
	deadline := start.Add(sdkWait)
	// First the dead runtimes' calls: many more than workers and queue.
	for i := range 8 * dead {
		invokeRetrying(t, hs.URL, sdkInvocation("echo", fmt.Sprintf("dead-%d", i), "t", fmt.Sprintf("%s/cb/dead-%d", deadURLs[i%dead], i), map[string]any{"text": "lost?"}), deadline)
	}
	// Then every healthy runtime subscribes and calls.
	for d, l := range dests {
		invokeRetrying(t, hs.URL, sdkInvocation("count", fmt.Sprintf("sub-%d", d), "t", l.srv.URL+"/sub", nil), deadline)
		for i := range 3 {
			invokeRetrying(t, hs.URL, sdkInvocation("echo", fmt.Sprintf("call-%d-%d", d, i), "t", fmt.Sprintf("%s/call/%d", l.srv.URL, i), map[string]any{"text": fmt.Sprint(i)}), deadline)
		}
	}
	want := []string{"Subscribed"}
	for i := range events {
		want = append(want, fmt.Sprint(i))
	}
	want = append(want, "end")
	for d, l := range dests {
		sdkPoll(t, fmt.Sprintf("runtime %d to get its results and events", d), func() bool {
			// Each call has its own callback URL, and results to
			// different URLs have no order: wait for all three.
			return len(l.texts("/sub")) >= len(want) && len(l.texts("/call/0")) >= 1 &&
				len(l.texts("/call/1")) >= 1 && len(l.texts("/call/2")) >= 1
		})
		got := l.texts("/sub")
		if len(got) != len(want) || !strings.HasPrefix(got[0], want[0]) {
			t.Fatalf("runtime %d got %q, want the confirmation then events 0..%d and the final one, each once", d, got, events-1)
		}
		for i := 1; i < len(want); i++ {
			if got[i] != want[i] {
				t.Fatalf("runtime %d got %q: event %d out of order", d, got, i)
			}
		}
		for i := range 3 {
			if got := l.texts(fmt.Sprintf("/call/%d", i)); len(got) != 1 || got[0] != fmt.Sprint(i) {
				t.Errorf("runtime %d call %d: results %q", d, i, got)
			}
		}
	}
	t.Logf("15 healthy runtimes served in %v beside 5 dead ones", time.Since(start).Round(time.Millisecond))
}

// Without a Store, once rap.MaxMemoryQueue callbacks
// wait for a runtime that takes none, its new invocations get 503 (it
// retries them, RAP TR-3) instead of growing the queue or holding
// workers; results already accepted are kept, and other runtimes are
// served as usual.
func TestBackloggedDestinationGets503(t *testing.T) {
	deadURL := newHangingRuntime(t).URL
	alive := newEventLog(t)
	s := rap.NewServer("sdk_test", &rap.ServerOptions{Logger: sdkQuiet(), Retry: sdkFastRetry})
	addEcho(s)
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	refused := 0
	for i := 0; i < rap.MaxMemoryQueue+50 && refused == 0; i++ {
		status, body, hdr := sdkPost(t, hs.URL, sdkInvocation("echo", fmt.Sprintf("d%d", i), "t", fmt.Sprintf("%s/cb/%d", deadURL, i), map[string]any{"text": "x"}))
		switch status {
		case http.StatusOK:
		case http.StatusServiceUnavailable:
			refused++
			if i < rap.MaxMemoryQueue || hdr.Get("Retry-After") == "" || !strings.Contains(body, "wait for delivery") {
				t.Fatalf("invocation %d answered 503 %q (Retry-After %q); want 503 with Retry-After only past %d waiting callbacks", i, body, hdr.Get("Retry-After"), rap.MaxMemoryQueue)
			}
		default:
			t.Fatalf("invocation %d answered %d %q", i, status, body)
		}
	}
	if refused == 0 {
		t.Fatalf("no invocation refused after %d callbacks queued for a dead runtime", rap.MaxMemoryQueue+50)
	}
	if status, body, _ := sdkPost(t, hs.URL, sdkInvocation("echo", "a1", "t", alive.srv.URL+"/cb", map[string]any{"text": "fine"})); status != http.StatusOK {
		t.Fatalf("a healthy runtime's invocation answered %d %q", status, body)
	}
	sdkPoll(t, "the healthy runtime's result", func() bool { return len(alive.texts("/cb")) == 1 })
	if dl, _ := s.DeadLetters(context.Background(), 10); len(dl) != 0 {
		t.Errorf("accepted results were dead-lettered: %d", len(dl))
	}
}
