package model

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"testing"
)

// leaseFree reports whether l's buffer may be reused: Done was called and
// no write of it is under way.
func leaseFree(l *BodyLease) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done && l.writing == 0 && !l.spoiled
}

func TestBodyLeaseWaitsForWrites(t *testing.T) {
	l := LendBody()
	l.Keep(append(l.Buffer(), "hello"...))
	tr := httptrace.ContextClientTrace(l.Context(context.Background()))
	tr.GotConn(httptrace.GotConnInfo{}) // two attempts, the first still writing
	tr.GotConn(httptrace.GotConnInfo{})
	tr.WroteRequest(httptrace.WroteRequestInfo{})
	l.Done()
	if leaseFree(l) {
		t.Fatal("the buffer is free for reuse while a write of it is under way")
	}
	tr.WroteRequest(httptrace.WroteRequestInfo{})
	if !leaseFree(l) {
		t.Fatal("the buffer was not freed once Done and every write finished")
	}
}

func TestBodyLeaseFreedByDoneAfterWrite(t *testing.T) {
	l := LendBody()
	tr := httptrace.ContextClientTrace(l.Context(context.Background()))
	tr.GotConn(httptrace.GotConnInfo{})
	tr.WroteRequest(httptrace.WroteRequestInfo{})
	if leaseFree(l) {
		t.Fatal("the buffer is free before the provider said it was done with it")
	}
	l.Done()
	if !leaseFree(l) {
		t.Fatal("Done after the last write did not free the buffer")
	}
}

func TestBodyLeaseUnexpectedHooksNeverFree(t *testing.T) {
	l := LendBody()
	tr := httptrace.ContextClientTrace(l.Context(context.Background()))
	tr.WroteRequest(httptrace.WroteRequestInfo{}) // a write no connection was counted for
	tr.GotConn(httptrace.GotConnInfo{})
	l.Done()
	if leaseFree(l) {
		t.Fatal("a lease whose count went below zero was freed")
	}
}

// TestLeasedBodiesOverHTTP sends many leased bodies at once through a real
// net/http client and server, half of the server's answers coming before it
// read the body (so the transport may still be writing it when the response
// arrives): every body the server reads must be the bytes its request was
// made with, though buffers are reused as soon as they are free.
func TestLeasedBodiesOverHTTP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		want := r.Header.Get("X-Want")
		if strings.HasSuffix(want, "early") {
			w.WriteHeader(http.StatusAccepted) // answer first, then read
			w.(http.Flusher).Flush()
		}
		got, err := io.ReadAll(r.Body)
		if err == nil && string(got) != want {
			t.Errorf("server read %d bytes %.40q…, want %d bytes %.40q…", len(got), got, len(want), want)
		}
	}))
	defer srv.Close()
	client := srv.Client()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				body := strings.Repeat(string(rune('a'+(g+i)%26)), 1000+i*300)
				if i%2 == 1 {
					body += "early"
				}
				l := LendBody()
				buf := append(GrowBody(l.Buffer(), len(body)), body...)
				l.Keep(buf)
				req, _ := http.NewRequestWithContext(l.Context(context.Background()), http.MethodPost, srv.URL, bytes.NewReader(buf))
				req.Header.Set("X-Want", body)
				resp, err := client.Do(req)
				l.Done()
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
}

func TestGrowBodyToPowerOfTwo(t *testing.T) {
	b := GrowBody([]byte("ab"), 3000)
	if string(b) != "ab" || cap(b) != 4096 {
		t.Fatalf("GrowBody kept %q with capacity %d; want \"ab\" and 4096", b, cap(b))
	}
	if c := GrowBody(b, 10); cap(c) != 4096 || &c[0] != &b[0] {
		t.Fatal("GrowBody moved a buffer that had room")
	}
}

// smallBuffers accepts connections with a small receive buffer.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetReadBuffer(32 << 10)
	}
	return c, err
}

// TestLeasedBodyStillBeingWritten: the server answers a 1 MiB request
// before reading its body, through socket buffers far smaller than it, so
// the client has its response while its transport is still writing the
// body; the provider is done, and the next request fills a leased buffer
// at once. Only then does the server read the first body: it must be the
// bytes it was sent with, which it is only if that buffer was not lent
// again while being written. (Shown to fail with Done freeing the buffer
// at once.)
func TestLeasedBodyStillBeingWritten(t *testing.T) {
	readNow := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		w.(http.Flusher).Flush()
		<-readNow
		got, err := io.ReadAll(r.Body)
		want := bytes.Repeat([]byte(r.Header.Get("X-Byte")), 1<<20)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("server read %d bytes (%v), %d of them not %q: the buffer was reused while the body was being written",
				len(got), err, len(got)-bytes.Count(got, []byte(r.Header.Get("X-Byte"))), r.Header.Get("X-Byte"))
		}
	}))
	srv.Listener = smallBuffers{srv.Listener}
	srv.Start()
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetWriteBuffer(32 << 10)
		}
		return c, err
	}}}
	defer client.CloseIdleConnections()

	fill := func(b byte) *BodyLease {
		l := LendBody()
		buf := GrowBody(l.Buffer(), 1<<20)
		l.Keep(append(buf, bytes.Repeat([]byte{b}, 1<<20)...))
		return l
	}
	for round := range 3 {
		l := fill('a' + byte(round))
		req, _ := http.NewRequestWithContext(l.Context(context.Background()), http.MethodPost, srv.URL, bytes.NewReader(l.buf))
		req.Header.Set("X-Byte", string(rune('a'+round)))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		l.Done()
		next := fill('z') // what a concurrent completion would do
		readNow <- struct{}{}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		next.Done()
	}
}

// TestBodyLeaseKeepsCallersTrace: a request context that already has
// httptrace hooks gets both the caller's and the lease's, and the lease's
// hooks, reused with later requests, never call this caller's.
func TestBodyLeaseKeepsCallersTrace(t *testing.T) {
	var callerConns int
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { callerConns++ },
	})
	l := LendBody()
	tr := httptrace.ContextClientTrace(l.Context(ctx))
	tr.GotConn(httptrace.GotConnInfo{})
	if callerConns != 1 || l.writing != 1 {
		t.Fatalf("one connection seen by the caller %d times and by the lease %d times; want 1 and 1", callerConns, l.writing)
	}
	l.trace.GotConn(httptrace.GotConnInfo{}) // the hooks a later request of this lease gets
	if callerConns != 1 {
		t.Fatal("the lease's own hooks call the hooks of an earlier request's caller")
	}
}

func TestCanLeaseBodies(t *testing.T) {
	saved := http.DefaultTransport
	t.Cleanup(func() { http.DefaultTransport = saved })
	if !CanLeaseBodies(&http.Client{}) || !CanLeaseBodies(DefaultHTTPClient()) {
		t.Error("net/http's own transport is not leased")
	}
	custom := roundTripperFunc(func(*http.Request) (*http.Response, error) { return nil, nil })
	if CanLeaseBodies(&http.Client{Transport: custom}) {
		t.Error("a custom RoundTripper is leased")
	}
	http.DefaultTransport = custom
	if CanLeaseBodies(&http.Client{}) {
		t.Error("a client over a replaced http.DefaultTransport is leased")
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A nil lease (bodies not leased: a custom transport) is usable as one.
func TestNilBodyLease(t *testing.T) {
	var l *BodyLease
	if l.Buffer() != nil {
		t.Error("a nil lease has a buffer")
	}
	l.Keep([]byte("x"))
	l.End(nil)
	l.End(errors.New("failed"))
}
