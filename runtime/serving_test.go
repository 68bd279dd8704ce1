package runtime

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// serveLimited serves h with NewHTTPServer and LimitListener on loopback
// and returns its base URL.
func serveLimited(t *testing.T, h http.Handler, l ServerLimits) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewHTTPServer(h, l, nil)
	go srv.Serve(LimitListener(ln, l))
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// issue 9 item 15: a client that sends its body slower than ReadTimeout
// allows is cut off instead of holding its connection and buffer for ever.
func TestHTTPServerCutsSlowBody(t *testing.T) {
	e := newEnv(t, envOptions{})
	base := serveLimited(t, e.rt.Handler(), ServerLimits{ReadTimeout: 300 * time.Millisecond})
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /v1/threads HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{")
	cut := make(chan error, 1)
	go func() {
		// The server answers (an error) and closes, or just closes.
		_, err := io.Copy(io.Discard, c)
		cut <- err
	}()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(waitFor)
	for sent := 1; ; sent++ {
		select {
		case <-cut:
			if sent >= 100000 {
				t.Fatal("the whole body was sent before the server cut the connection")
			}
			return
		case <-tick.C:
			c.Write([]byte(" ")) // one byte per tick: a slow body
		case <-deadline:
			t.Fatal("a body trickling one byte per 50ms was not cut off")
		}
	}
}

// issue 9 item 15: the server-wide read and write timeouts do not end an
// event stream: the stream clears its read deadline and sets a write
// deadline per event.
func TestEventStreamOutlivesServerTimeouts(t *testing.T) {
	e := newEnv(t, envOptions{})
	th := e.newThread()
	base := serveLimited(t, e.rt.Handler(), ServerLimits{ReadTimeout: 100 * time.Millisecond, WriteTimeout: 100 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/threads/"+th+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, _ := br.ReadString('\n'); !strings.HasPrefix(line, ": connected") {
		t.Fatalf("greeting %q", line)
	}
	// Outlive both server timeouts several times over, then publish.
	time.Sleep(500 * time.Millisecond)
	if !e.rt.hub.subscribed(th) {
		t.Fatal("the stream ended after the server's read/write timeout")
	}
	e.rt.hub.publish(Event{Type: EventStatus, ThreadID: th, Data: []byte(`{"state":"idle"}`)})
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended before the event: %v", err)
		}
		if strings.HasPrefix(line, "event: status") {
			return
		}
	}
}

// issue 9 item 15: LimitListener serves at most MaxConns connections at
// once; the next waits until one closes.
func TestLimitListenerCapsConnections(t *testing.T) {
	base := serveLimited(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), ServerLimits{MaxConns: 2})
	addr := strings.TrimPrefix(base, "http://")
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	// Both held connections are accepted once a request on each is served.
	for _, c := range held {
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
		if _, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil {
			t.Fatal(err)
		}
	}
	hc := &http.Client{Timeout: 300 * time.Millisecond}
	if resp, err := hc.Get(base); err == nil {
		resp.Body.Close()
		t.Fatal("a third connection was served while two were held")
	}
	held[0].Close()
	hc.Timeout = waitFor
	resp, err := hc.Get(base)
	if err != nil {
		t.Fatalf("after one closed: %v", err)
	}
	resp.Body.Close()
}
