package rap

// This file owns the minimum body rate (HTTPLimits.MinBodyRate).
//
// Design: net/http has one read deadline per connection. The handler that
// NewHTTPServer installs sets it when a request with a body reaches it
// (the end of the headers plus the grace), and every read of the body
// pushes it forward by what the bytes read are worth at the minimum rate:
// after n bytes the deadline is start + grace + n/rate, so a body must
// keep an average of at least rate bytes a second, less the grace. The
// deadline is set through http.ResponseController.SetReadDeadline, so it
// works with any net/http server and also bounds what net/http discards of
// a body the handler did not read. Once the body is read whole, net/http
// clears the deadline itself to wait for the client's next request (a
// deadline passing then would cancel the request's context). The handler
// also tells LimitListener where the body stands, so that a full listener
// closes the connection furthest behind first.

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// bodyRateHandler enforces the minimum body rate around h.
type bodyRateHandler struct {
	h       http.Handler
	rate    int           // bytes a second; 0: no minimum
	grace   time.Duration // before the rate applies
	ceiling time.Duration // ReadTimeout; 0: none
}

func (b *bodyRateHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		b.h.ServeHTTP(w, r)
		return
	}
	rb := &rateBody{
		ReadCloser: r.Body,
		rc:         http.NewResponseController(w),
		h:          b,
		start:      time.Now(),
		want:       r.ContentLength,
	}
	if r.ProtoMajor == 1 { // HTTP/2 serves many requests on a connection
		rb.tc, _ = r.Context().Value(trackedConnKey{}).(*trackedConn)
	}
	if rb.tc != nil {
		rb.tc.bodyDue.Store(rb.due().UnixNano())
		rb.tc.l.setPhase(rb.tc, phaseBody)
	}
	rb.extend()
	r.Body = rb
	b.h.ServeHTTP(w, r)
	if rb.tc != nil && !rb.done {
		// net/http discards what is left of the body under the deadline
		// last set; the connection's next state comes from its ConnState.
		rb.tc.bodyDue.Store(rb.due().UnixNano())
	}
}

// rateBody is a request body read under the minimum rate.
type rateBody struct {
	io.ReadCloser
	rc    *http.ResponseController
	h     *bodyRateHandler
	tc    *trackedConn // nil when the listener is not a LimitListener
	start time.Time
	want  int64 // Content-Length, or -1
	n     int64 // bytes read so far
	done  bool  // read whole
}

// due is when the body is late: when it will have arrived slower than the
// minimum rate on average, less the grace, or the ceiling passed. The zero
// time means never.
func (b *rateBody) due() time.Time {
	var d time.Time
	if b.h.rate > 0 {
		d = b.start.Add(b.h.grace + time.Duration(float64(b.n)/float64(b.h.rate)*float64(time.Second)))
	}
	if b.h.ceiling > 0 {
		if c := b.start.Add(b.h.ceiling); d.IsZero() || c.Before(d) {
			d = c
		}
	}
	return d
}

// extend sets the connection's read deadline to when the body is late.
func (b *rateBody) extend() {
	d := b.due()
	if d.IsZero() {
		return
	}
	_ = b.rc.SetReadDeadline(d)
	if b.tc != nil {
		b.tc.bodyDue.Store(d.UnixNano())
	}
}

// Read reads the body and moves the deadline by what it read.
func (b *rateBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.done {
		return n, err
	}
	b.n += int64(n)
	switch {
	case err == io.EOF || (b.want >= 0 && b.n >= b.want):
		b.finish()
	case err != nil:
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return n, b.tooSlow(err)
		}
	case n > 0:
		b.extend()
	}
	return n, err
}

// finish marks the body read whole. It leaves the read deadline alone:
// net/http clears it when it sees the end of the body, to wait for the
// client's next request or disconnection, and a deadline passing there
// would cancel the request's context.
func (b *rateBody) finish() {
	b.done = true
	if b.tc != nil {
		b.tc.l.setPhase(b.tc, phaseBusy)
	}
}

// BodyTooSlowError is the error of reading a request body that arrived
// slower than HTTPLimits.MinBodyRate (or past a ReadTimeout ceiling); the
// connection is closed after it.
type BodyTooSlowError struct {
	// MinRate is the minimum rate in bytes a second (0 when only the
	// ceiling applies); Grace the time the body had before it applied.
	MinRate int
	Grace   time.Duration
	// Read is how many bytes arrived, in Elapsed.
	Read    int64
	Elapsed time.Duration
	err     error
}

func (e *BodyTooSlowError) Error() string {
	if e.MinRate <= 0 {
		return fmt.Sprintf("the request body was not received within the server's read timeout (%d bytes in %v); send it faster", e.Read, e.Elapsed.Round(time.Millisecond))
	}
	return fmt.Sprintf("the request body arrived slower than this server's minimum of %d bytes a second after %v (%d bytes in %v); send it faster, or send less",
		e.MinRate, e.Grace, e.Read, e.Elapsed.Round(time.Millisecond))
}

// Unwrap returns the read error (a timeout).
func (e *BodyTooSlowError) Unwrap() error { return e.err }

func (b *rateBody) tooSlow(err error) error {
	return &BodyTooSlowError{MinRate: b.h.rate, Grace: b.h.grace, Read: b.n, Elapsed: time.Since(b.start), err: err}
}
