package runtime

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// openRawStream opens GET /v1/threads/{id}/events on a raw TCP connection
// and never reads from it: a client that stopped reading. The connection's
// receive buffer is kept small so that the server's writes block soon.
func openRawStream(t *testing.T, base, thread string) net.Conn {
	t.Helper()
	addr := strings.TrimPrefix(base, "http://")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetReadBuffer(4096)
	}
	fmt.Fprintf(c, "GET /v1/threads/%s/events HTTP/1.1\r\nHost: %s\r\n\r\n", thread, addr)
	return c
}

// bigEvent is a 1 MiB event of the thread.
func bigEvent(thread string) Event {
	return Event{Type: EventTextDelta, ThreadID: thread, Data: []byte(`"` + strings.Repeat("x", 1<<20) + `"`)}
}

// A stream whose client stops reading is dropped once it
// falls the byte bound behind (4 MiB by default), instead of pinning 1,024
// events of up to 1 MiB each; its memory is freed.
func TestEventStreamStuckClientDropped(t *testing.T) {
	e := newEnv(t, envOptions{})
	th := e.newThread()
	openRawStream(t, e.srv.URL, th)
	poll(t, "the stream to subscribe", func() bool { return e.rt.hub.subscribed(th) })
	for i := 0; i < 64 && e.rt.hub.subscribed(th); i++ {
		e.rt.hub.publish(bigEvent(th)) // 64 MiB in all: far past any socket buffer
	}
	poll(t, "the stuck subscriber to be dropped", func() bool { return !e.rt.hub.subscribed(th) })
	// The drop is logged once, with the reason.
	poll(t, "the drop to be logged", func() bool { return len(e.logs.records("event stream dropped")) > 0 })
	recs := e.logs.records("event stream dropped")
	if len(recs) != 1 || recs[0]["thread"] != th || !strings.Contains(fmt.Sprint(recs[0]["reason"]), "bytes behind") {
		t.Fatalf("drop logged as %v; want one record naming the thread and that the client fell behind", recs)
	}
}

// The subscriber's queue never holds more than its bound
// (plus the one event that overflowed it is refused), and a dropped
// subscriber's queue is freed.
func TestSubscriberQueueBoundedInBytes(t *testing.T) {
	h, _ := newLocalHub(StreamLimits{BufferBytes: 1 << 20})
	s, cancel := h.subscribe("t")
	defer cancel()
	ev := Event{Type: EventTextDelta, ThreadID: "t", Data: make([]byte, 100<<10)}
	for range 100 {
		h.publish(ev)
	}
	now, peak := s.queued()
	if peak > 1<<20 {
		t.Fatalf("queue peaked at %d bytes, over its 1 MiB bound", peak)
	}
	if now != 0 || h.subscribed("t") {
		t.Fatalf("after overflow: %d bytes queued, watched=%v; want the subscriber dropped and freed", now, h.subscribed("t"))
	}
	if _, closed := s.take(); !closed {
		t.Fatal("the dropped subscriber is not closed")
	}
}

// Each event write has a deadline, so a client that stops
// reading is disconnected even while its queue stays under the bound.
func TestEventStreamWriteDeadline(t *testing.T) {
	e := newEnv(t, envOptions{tweak: func(c *Config) {
		c.Streams = StreamLimits{BufferBytes: 512 << 20, WriteTimeout: 200 * time.Millisecond}
	}})
	th := e.newThread()
	openRawStream(t, e.srv.URL, th)
	poll(t, "the stream to subscribe", func() bool { return e.rt.hub.subscribed(th) })
	deadline := time.Now().Add(waitFor)
	for e.rt.hub.subscribed(th) && time.Now().Before(deadline) {
		e.rt.hub.publish(bigEvent(th))
		time.Sleep(20 * time.Millisecond) // pace the publisher; not an assertion
	}
	if e.rt.hub.subscribed(th) {
		t.Fatal("a client that never reads is still subscribed: no write deadline")
	}
	e.rt.hub.mu.Lock()
	dropped := e.rt.hub.dropped
	e.rt.hub.mu.Unlock()
	if dropped != 0 {
		t.Fatalf("the subscriber was dropped by its byte bound (%d), not by the write deadline", dropped)
	}
	poll(t, "the drop to be logged", func() bool { return len(e.logs.records("event stream dropped")) > 0 })
	if recs := e.logs.records("event stream dropped"); len(recs) != 1 || !strings.Contains(fmt.Sprint(recs[0]["reason"]), "longer than 200ms") {
		t.Fatalf("drop logged as %v; want one record saying the write took too long", recs)
	}
}

// openStream opens an event stream and returns the response (its status
// and headers); the body is closed at the end of the test.
func openStream(t *testing.T, base, thread string) *http.Response {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/threads/"+thread+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode == http.StatusOK {
		// Read the greeting so that the stream is known to be open.
		line, _ := bufio.NewReader(resp.Body).ReadString('\n')
		if !strings.HasPrefix(line, ": connected") {
			t.Fatalf("stream greeting %q", line)
		}
	}
	return resp
}

// Concurrent streams are capped per thread (429) and in
// total (503), both with Retry-After; a closed stream frees its slot.
func TestEventStreamCaps(t *testing.T) {
	e := newEnv(t, envOptions{tweak: func(c *Config) {
		c.Streams = StreamLimits{PerThread: 2, Total: 3}
	}})
	a, b, c := e.newThread(), e.newThread(), e.newThread()
	first := openStream(t, e.srv.URL, a)
	openStream(t, e.srv.URL, a)
	if r := openStream(t, e.srv.URL, a); r.StatusCode != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" {
		t.Fatalf("third stream of one thread: %d, Retry-After %q; want 429 with Retry-After", r.StatusCode, r.Header.Get("Retry-After"))
	}
	if r := openStream(t, e.srv.URL, b); r.StatusCode != http.StatusOK {
		t.Fatalf("stream of another thread: %d", r.StatusCode)
	}
	if r := openStream(t, e.srv.URL, c); r.StatusCode != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" {
		t.Fatalf("fourth stream in all: %d, Retry-After %q; want 503 with Retry-After", r.StatusCode, r.Header.Get("Retry-After"))
	}
	first.Body.Close()
	poll(t, "the closed stream's slot to be freed", func() bool {
		e.rt.hub.mu.Lock()
		defer e.rt.hub.mu.Unlock()
		return e.rt.hub.total == 2
	})
	if r := openStream(t, e.srv.URL, c); r.StatusCode != http.StatusOK {
		t.Fatalf("stream after one closed: %d", r.StatusCode)
	}
}

// The bytes queued over all subscribers stay under
// TotalBufferBytes: many stalled streams cannot add up past it.
func TestSubscribersBoundedInTotal(t *testing.T) {
	const total = 2 << 20
	h, _ := newLocalHub(StreamLimits{BufferBytes: 1 << 20, TotalBufferBytes: total})
	var subs []*subscriber
	for i := range 8 {
		s, cancel := h.subscribe(fmt.Sprint(i))
		defer cancel()
		subs = append(subs, s)
	}
	ev := Event{Type: EventTextDelta, Data: make([]byte, 100<<10)}
	for range 20 {
		for i := range subs {
			ev.ThreadID = fmt.Sprint(i)
			h.publish(ev)
			// One event past the bound at most: the first event of a
			// subscriber with an empty queue is always taken.
			if q := h.queued.Load(); q > total+int64(len(subs)*eventCost(ev)) {
				t.Fatalf("%d bytes queued in all, over the %d bound", q, total)
			}
		}
	}
	var sum int
	for _, s := range subs {
		now, _ := s.queued()
		sum += now
	}
	if int64(sum) != h.queued.Load() {
		t.Fatalf("queued count %d, subscribers hold %d", h.queued.Load(), sum)
	}
	if h.dropped == 0 {
		t.Fatal("no stalled subscriber was dropped")
	}
}

// Dropping a stalled stream ends its handler at once (a
// write blocked on the client is cut, not left to the 30 s write
// deadline), which frees the stream's slot, goroutine and write buffer.
func TestEventStreamDropFreesSlot(t *testing.T) {
	e := newEnv(t, envOptions{tweak: func(c *Config) {
		c.Streams = StreamLimits{BufferBytes: 2 << 20, WriteTimeout: time.Hour}
	}})
	th := e.newThread()
	openRawStream(t, e.srv.URL, th)
	poll(t, "the stream to subscribe", func() bool { return e.rt.hub.subscribed(th) })
	for i := 0; i < 64 && e.rt.hub.subscribed(th); i++ {
		e.rt.hub.publish(bigEvent(th))
	}
	poll(t, "the dropped stream's handler to end and free its slot", func() bool {
		e.rt.hub.mu.Lock()
		defer e.rt.hub.mu.Unlock()
		return e.rt.hub.total == 0
	})
}
