package runtime

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
)

// serveLimited serves h with NewHTTPServer and rap.HTTPLimits.Listener on loopback
// and returns its base URL.
func serveLimited(t *testing.T, h http.Handler, l rap.HTTPLimits) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewHTTPServer(h, l, nil)
	go srv.Serve(l.Listener(ln, nil))
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// A client that sends its body slower than MinBodyRate, past the grace, is
// cut off instead of holding its connection and buffer for ever.
func TestHTTPServerCutsSlowBody(t *testing.T) {
	e := newEnv(t, envOptions{})
	base := serveLimited(t, e.rt.Handler(), rap.HTTPLimits{MinBodyRate: 1000, BodyRateGrace: 200 * time.Millisecond})
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

// The server-wide read and write timeouts do not end an event stream: the stream clears its read deadline and sets a write
// deadline per event.
func TestEventStreamOutlivesServerTimeouts(t *testing.T) {
	e := newEnv(t, envOptions{})
	th := e.newThread()
	base := serveLimited(t, e.rt.Handler(), rap.HTTPLimits{ReadTimeout: 100 * time.Millisecond, WriteTimeout: 100 * time.Millisecond})
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

// When MaxConns connections are open, a new client is served at once in
// the place of the connection idle the longest; an event stream is never
// closed to make room, and when only event streams are open a new client
// gets 503 with Retry-After.
func TestLimitListenerShedsIdleKeepsStreams(t *testing.T) {
	e := newEnv(t, envOptions{})
	th := e.newThread()
	base := serveLimited(t, e.rt.Handler(), rap.HTTPLimits{MaxConns: 2})
	addr := strings.TrimPrefix(base, "http://")
	// An event stream, opened first: the oldest connection.
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/threads/"+th+"/events", nil)
	stream, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	events := bufio.NewReader(stream.Body)
	if line, _ := events.ReadString('\n'); !strings.HasPrefix(line, ": connected") {
		t.Fatalf("greeting %q", line)
	}
	// An idle kept-alive connection.
	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	_ = idle.SetDeadline(time.Now().Add(waitFor))
	fmt.Fprintf(idle, "GET /v1/threads/%s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", th)
	resp, err := http.ReadResponse(bufio.NewReader(idle), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	// A third client is served (retrying a 503 while the server has not
	// yet read from the idle connection); the idle connection made room.
	hc := &http.Client{Timeout: waitFor, Transport: &http.Transport{DisableKeepAlives: true}}
	for deadline := time.Now().Add(waitFor); ; {
		resp, err = hc.Get(base + "/v1/threads/" + th)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("a third client was not served while a stream and an idle connection were open: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := io.Copy(io.Discard, idle); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("the idle connection was not closed to make room")
		}
	}
	// Fill the cap with a second stream (once the third client's
	// connection has closed): now a new client gets 503.
	var stream2 *http.Response
	for deadline := time.Now().Add(waitFor); ; {
		req2, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/threads/"+th+"/events", nil)
		stream2, err = (&http.Client{Transport: &http.Transport{}}).Do(req2)
		if err == nil && stream2.StatusCode == http.StatusOK {
			break
		}
		if err == nil {
			stream2.Body.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("a second stream was not served: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	defer stream2.Body.Close()
	resp, err = hc.Get(base + "/v1/threads/" + th)
	if err != nil {
		t.Fatalf("a client refused while only streams were open got no answer: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("answered %d, want 503 with Retry-After", resp.StatusCode)
	}
	// The first stream still streams.
	e.rt.hub.publish(Event{Type: EventStatus, ThreadID: th, Data: []byte(`{"state":"idle"}`)})
	for {
		line, err := events.ReadString('\n')
		if err != nil {
			t.Fatalf("the first stream ended: %v", err)
		}
		if strings.HasPrefix(line, "event: status") {
			return
		}
	}
}
