package rap_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
)

// serveHandler serves h with rap.NewHTTPServer on rap.LimitListener and
// returns the address.
func serveHandler(t *testing.T, h http.Handler, l rap.HTTPLimits) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := rap.NewHTTPServer(h, l, sdkQuiet())
	go srv.Serve(rap.LimitListener(ln, l.MaxConns, sdkQuiet()))
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// dialed dials addr and closes the connection when the test ends.
func dialed(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(sdkWait))
	return c
}

// getServed sends discovery requests on new connections until one is
// answered 200, as a client honouring 503's Retry-After does, and fails
// the test if none is within sdkWait.
func getServed(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(sdkWait)
	for {
		c := dialed(t, addr)
		err := getOn(c, bufio.NewReader(c), addr)
		c.Close()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a new client was not served: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// isClosed reports whether the server closed c (it reads EOF or a reset
// before sdkWait), reading and dropping whatever the server sent first.
func isClosed(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(sdkWait))
	_, err := io.Copy(io.Discard, c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false
	}
	return true
}

// When the listener is full of connections that stalled in their
// headers, a new client is served, and one of them makes room (the one
// waiting longest; see TestShedPrefersLeastProgress).
func TestFullListenerShedsNotYetSending(t *testing.T) {
	// A long header deadline: the connection left open must not be cut by
	// it however long the machine takes.
	addr := serveHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), rap.HTTPLimits{MaxConns: 2, ReadHeaderTimeout: time.Minute})
	var stalled []net.Conn
	for range 2 {
		c := dialed(t, addr)
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHo") // part of a header, then nothing
		stalled = append(stalled, c)
	}
	getServed(t, addr)
	open := 0
	for _, c := range stalled {
		fmt.Fprintf(c, "st: x\r\n\r\n")
		if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil && resp.StatusCode == http.StatusOK {
			open++
		}
	}
	if open != 1 {
		t.Fatalf("%d of the 2 stalled connections were still served, want 1: exactly one makes room", open)
	}
}

// When no connection waits for headers, the one whose body is furthest
// behind the minimum rate makes room; a body ahead of it is read whole.
func TestFullListenerShedsSlowestBody(t *testing.T) {
	// Each handler reports how many bytes of its body it has read so far,
	// so that the test knows the server has seen both bodies' progress
	// before a new client arrives, however slowly the machine runs.
	progress := make(chan int, 1024)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == http.NoBody {
			return
		}
		buf := make([]byte, 1000)
		n := 0
		for n < len(buf) {
			m, err := r.Body.Read(buf[n:])
			n += m
			if m > 0 {
				progress <- n
			}
			if err != nil {
				if err != io.EOF {
					http.Error(w, err.Error(), http.StatusBadRequest)
				}
				return
			}
		}
	})
	// A rate so low and a grace so long that no body here is late.
	addr := serveHandler(t, h, rap.HTTPLimits{MaxConns: 2, MinBodyRate: 1, BodyRateGrace: time.Minute})
	post := "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n"
	waitRead := func(atLeast int) {
		t.Helper()
		deadline := time.After(sdkWait)
		for {
			select {
			case n := <-progress:
				if n >= atLeast {
					return
				}
			case <-deadline:
				t.Fatalf("the server did not read %d bytes of a body in time", atLeast)
			}
		}
	}
	slow := dialed(t, addr)
	fmt.Fprint(slow, post+"x") // 1 byte of 1,000
	waitRead(1)
	ahead := dialed(t, addr)
	fmt.Fprint(ahead, post+strings.Repeat("x", 900)) // 900 bytes of 1,000
	waitRead(900)
	getServed(t, addr) // while the listener is full of slow bodies
	if !isClosed(slow) {
		t.Fatal("the body furthest behind was not closed to make room")
	}
	fmt.Fprint(ahead, strings.Repeat("x", 100))
	resp, err := http.ReadResponse(bufio.NewReader(ahead), nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the body ahead was cut too: %v", err)
	}
}

// A connection whose handler is running is never closed to make room:
// when every connection is busy, a new client gets 503 with Retry-After,
// and is served again once one is free.
func TestFullListenerRefusesWhenAllBusy(t *testing.T) {
	release := make(chan struct{})
	busy := make(chan struct{}, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/busy" {
			busy <- struct{}{}
			<-release
		}
	})
	addr := serveHandler(t, h, rap.HTTPLimits{MaxConns: 1})
	held := dialed(t, addr)
	fmt.Fprintf(held, "GET /busy HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	<-busy
	resp, err := (&http.Client{Timeout: sdkWait}).Get("http://" + addr + "/")
	if err != nil {
		t.Fatalf("a client refused while every connection was busy got no answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("answered %d %q, want 503 with Retry-After", resp.StatusCode, body)
	}
	close(release)
	resp, err = http.ReadResponse(bufio.NewReader(held), nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the busy connection was cut: %v", err)
	}
	held.Close()
	deadline := time.Now().Add(sdkWait)
	for {
		resp, err := (&http.Client{Timeout: sdkWait}).Get("http://" + addr + "/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no client served after the busy connection closed: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A body trickled below the minimum rate is cut once the grace has passed.
func TestBodyBelowMinRateCut(t *testing.T) {
	addr := serveWith(t, &rap.ServerOptions{HTTP: rap.HTTPLimits{MinBodyRate: 1000, BodyRateGrace: 200 * time.Millisecond}})
	c := dialed(t, addr)
	fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{")
	cut := make(chan struct{})
	var answer []byte
	go func() { answer, _ = io.ReadAll(c); close(cut) }()
	tick := time.NewTicker(20 * time.Millisecond) // 50 bytes a second
	defer tick.Stop()
	deadline := time.After(sdkWait)
	for sent := 1; sent < 100000; sent++ {
		select {
		case <-cut:
			// The answer says what was wrong and what to do.
			if !strings.Contains(string(answer), "slower than this server's minimum of 1000 bytes a second") || !strings.Contains(string(answer), "send it faster") {
				t.Errorf("the cut body's answer does not say why: %q", answer)
			}
			return
		case <-tick.C:
			_, _ = c.Write([]byte(" "))
		case <-deadline:
			t.Fatal("a body trickled at 50 bytes a second, under a 1,000 byte minimum, was not cut")
		}
	}
	t.Fatal("the whole body was sent before the server cut it")
}

// A body sent slowly but above the minimum rate, for longer than the
// grace, is read whole and answered.
func TestBodyAboveMinRateSurvives(t *testing.T) {
	sink := newSDKSink(t)
	addr := serveWith(t, &rap.ServerOptions{HTTP: rap.HTTPLimits{MinBodyRate: 200, BodyRateGrace: 100 * time.Millisecond}})
	body := string(sdkInvocation("echo", "call_1", "thread_1", sink.URL(), map[string]any{"text": "hi"}))
	body += strings.Repeat(" ", 4000-len(body)) // 4,000 bytes
	c := dialed(t, addr)
	fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
	// 500 bytes every 100 ms: 5,000 bytes a second, 25 times the
	// minimum (so a pause of seconds on a loaded machine still keeps
	// ahead of it), for 800 ms, eight times the grace.
	for i := 0; i < len(body); i += 500 {
		if _, err := io.WriteString(c, body[i:min(i+500, len(body))]); err != nil {
			t.Fatalf("the server cut a body sent above the minimum rate: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a body sent above the minimum rate: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a body sent above the minimum rate answered %d", resp.StatusCode)
	}
}

// Once a body is read whole, the rate's deadline no longer applies: a
// handler that outlives it keeps its request's context.
func TestBodyReadWholeKeepsContext(t *testing.T) {
	result := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			result <- err
			return
		}
		select {
		case <-r.Context().Done(): // the bug: the rate's deadline cancels it
			result <- fmt.Errorf("the request's context ended while its handler ran: %w", context.Cause(r.Context()))
		case <-time.After(600 * time.Millisecond): // three times the grace
			result <- nil
		}
	})
	addr := serveHandler(t, h, rap.HTTPLimits{MaxConns: 4, MinBodyRate: 1000, BodyRateGrace: 200 * time.Millisecond})
	resp, err := (&http.Client{Timeout: sdkWait}).Post("http://"+addr+"/", "text/plain", strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := <-result; err != nil {
		t.Fatal(err)
	}
}

// A tool server whose connections are all held by slow clients (stalled
// headers, bodies trickled below the minimum rate) still answers a new
// client.
func TestSlowClientsDoNotLockOut(t *testing.T) {
	addr := serveWith(t, &rap.ServerOptions{HTTP: rap.HTTPLimits{MaxConns: 50}})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	defer func() { close(stop); wg.Wait() }()
	for i := range 200 {
		c := dialed(t, addr)
		if i%2 == 0 {
			fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Ag", rap.WellKnownPath)
			continue
		}
		fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{")
		wg.Add(1)
		go func() { // a byte a second, until cut
			defer wg.Done()
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					if _, err := c.Write([]byte(" ")); err != nil {
						return
					}
				}
			}
		}()
	}
	// A client that honours 503's Retry-After, as a runtime does, is
	// served within 10 s.
	client := &http.Client{Timeout: 10 * time.Second}
	for deadline := time.Now().Add(10 * time.Second); ; {
		resp, err := client.Get("http://" + addr + rap.WellKnownPath)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			err = fmt.Errorf("answered %d", resp.StatusCode)
		}
		if time.Now().After(deadline) {
			t.Fatalf("a new client was locked out by 200 slow connections on a cap of 50: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
