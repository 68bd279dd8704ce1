package model

import (
	"context"
	"math/bits"
	"net/http"
	"net/http/httptrace"
	"sync"
)

// A BodyLease lends a provider a buffer for one request body and takes it
// back for a later request once nothing can read it any more (a completion's
// body holds the whole history, tens of kilobytes, and allocating it anew for
// every completion was a fifth of the bytes a cycle allocated).
//
// The provider hands the body to its SDK as a byte slice, which the SDK
// sends through net/http as an in-memory reader (so net/http writes it
// with the headers in one go). net/http reads a request body only while
// writing the request on a connection, which may go on after the response
// has come back; the lease therefore counts, through the request
// context's httptrace hooks, the connections obtained for the request
// (GotConn) against the writes finished (WroteRequest, called once the
// body has been written or given up). The buffer is reused only after Done
// and once every write started has finished. A connection obtained but
// never written on leaves the count open: that buffer is simply not
// reused.
type BodyLease struct {
	buf   []byte
	trace *httptrace.ClientTrace

	mu      sync.Mutex
	writing int  // connections obtained minus writes finished
	done    bool // Done was called
	spoiled bool // more writes finished than connections obtained
}

// CanLeaseBodies reports whether request bodies sent through c may be
// leased: only through net/http's own Transport, whose httptrace hooks
// report each write. A client without a Transport uses
// http.DefaultTransport, which a program (or a test's HTTP mock) may have
// replaced with a RoundTripper that reads bodies whenever it likes.
func CanLeaseBodies(c *http.Client) bool {
	t := c.Transport
	if t == nil {
		t = http.DefaultTransport
	}
	_, ok := t.(*http.Transport)
	return ok
}

// maxLeasedBody bounds the buffers kept for reuse: a body larger than this
// (a thread whose history outgrew the wire cache) is left to the garbage
// collector.
const maxLeasedBody = 4 << 20

var leases = sync.Pool{New: func() any { return new(BodyLease) }}

// LendBody returns a lease on an empty buffer.
func LendBody() *BodyLease {
	l := leases.Get().(*BodyLease)
	if l.trace == nil {
		l.trace = &httptrace.ClientTrace{
			GotConn:      func(httptrace.GotConnInfo) { l.add(1) },
			WroteRequest: func(httptrace.WroteRequestInfo) { l.add(-1) },
		}
	}
	l.buf, l.writing, l.done, l.spoiled = l.buf[:0], 0, false, false
	return l
}

// Buffer returns the leased buffer, empty, to append a body to (after
// GrowBody); Keep hands back what was appended. A nil lease (a request
// whose body is not leased) has no buffer.
func (l *BodyLease) Buffer() []byte {
	if l == nil {
		return nil
	}
	return l.buf[:0]
}

// Keep records b, the body built on Buffer (append may have moved it to a
// larger array), as the buffer to reuse. On a nil lease it does nothing.
func (l *BodyLease) Keep(b []byte) {
	if l != nil {
		l.buf = b
	}
}

// End ends the provider's use of the body, given how its request ended:
// after an error it is Forget (the SDKs' errors keep the request, whose
// GetBody reads the body), else Done. On a nil lease it does nothing.
func (l *BodyLease) End(err error) {
	switch {
	case l == nil:
	case err != nil:
		l.Forget()
	default:
		l.Done()
	}
}

// Context returns ctx with the hooks that see the request's writes: the
// request that sends the body must be made with it.
func (l *BodyLease) Context(ctx context.Context) context.Context {
	if httptrace.ContextClientTrace(ctx) != nil {
		// WithClientTrace composes the caller's hooks into the trace it
		// is given, in place: give it a copy, so that the lease's own,
		// reused with later requests, never calls this caller's hooks.
		t := *l.trace
		return httptrace.WithClientTrace(ctx, &t)
	}
	return httptrace.WithClientTrace(ctx, l.trace)
}

// Done ends the provider's use of the body; the buffer goes back for reuse
// as soon as no write of it is under way.
func (l *BodyLease) Done() {
	l.mu.Lock()
	l.done = true
	free := l.writing == 0 && !l.spoiled
	l.mu.Unlock()
	if free {
		l.release()
	}
}

func (l *BodyLease) add(n int) {
	l.mu.Lock()
	l.writing += n
	if l.writing < 0 {
		l.spoiled = true // a hook the count does not expect: never reuse
	}
	free := l.done && l.writing == 0 && !l.spoiled
	l.mu.Unlock()
	if free {
		l.release()
	}
}

// Forget ends the provider's use of the body without giving the buffer
// back: for a request whose outcome still refers to the body (an SDK error
// keeps the request, and its GetBody reads the body's bytes).
func (l *BodyLease) Forget() {
	l.mu.Lock()
	l.done, l.spoiled = true, true
	l.mu.Unlock()
}

func (l *BodyLease) release() {
	if cap(l.buf) > maxLeasedBody {
		l.buf = nil
	}
	leases.Put(l)
}

// GrowBody returns b with room for n more bytes. A buffer that must grow
// grows to a power of two, so that leased buffers fit the next bodies,
// which a conversation's growth makes a little larger each time.
func GrowBody(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	nb := make([]byte, len(b), 1<<bits.Len(uint(len(b)+n-1)))
	copy(nb, b)
	return nb
}
