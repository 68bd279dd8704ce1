package runtime

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
)

// A stream served by NewHTTPServer keeps its
// backlog in the runtime's bounded queue, not in the kernel: its TCP send
// buffer is small, so a client that stops reading cannot park megabytes
// in kernel memory (on loopback, a thousand of them slowed every other
// connection of the process to seconds in the soak).
func TestStreamSendBufferBounded(t *testing.T) {
	e := newEnv(t, envOptions{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewHTTPServer(e.rt.Handler(), rap.HTTPLimits{}, nil)
	go srv.Serve(rap.HTTPLimits{}.Listener(ln, nil))
	defer srv.Close()
	th := e.newThread()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(c, "GET /v1/threads/%s/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", th)
	var sub *subscriber
	poll(t, "the stream to subscribe", func() bool {
		e.rt.hub.mu.Lock()
		defer e.rt.hub.mu.Unlock()
		for s := range e.rt.hub.subs[th] {
			sub = s
		}
		return sub != nil
	})
	// Feed the stream one 64 KiB event at a time while its writer keeps
	// up: everything it drains goes into the kernel's buffers, since the
	// client reads nothing. Stop at the first event that stays queued.
	ev := Event{ThreadID: th, Type: EventTextDelta, Data: []byte(`"` + strings.Repeat("x", 64<<10) + `"`)}
	absorbed := 0
	for range 128 {
		e.rt.hub.publish(ev)
		if !drains(sub, 500*time.Millisecond) {
			break
		}
		absorbed += len(ev.Data)
	}
	if absorbed >= 1<<20 {
		t.Fatalf("the kernel took %d KiB of a stream whose client reads nothing; want a small send buffer", absorbed>>10)
	}
}

// drains reports whether sub's queue empties within d.
func drains(sub *subscriber, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if now, _ := sub.queued(); now == 0 {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return false
}
