package rap

// This file owns the connection cap: LimitListener, which keeps at most n
// connections open and, when they are all open, closes the one that has
// made the least progress (part of its headers and a stall, then the
// slowest body) to make room for a new client.

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// LimitListener returns a listener that keeps at most n of ln's
// connections open at once. n <= 0 returns ln.
//
// It accepts every connection at once, so that no client waits in the
// kernel's accept queue behind slow ones. When n are open, a new
// connection takes the place of, in this order:
//
//  1. the connection waiting longest for its first request's headers
//     after sending part of them and stalling;
//  2. failing that, the connection whose request body is furthest behind
//     the minimum body rate (HTTPLimits.MinBodyRate);
//  3. failing that, the kept-alive connection idle longest between
//     requests (a client that reuses an idle connection the server has
//     just closed retries on a new one, as Go's and most HTTP clients do);
//  4. failing that, the connection waiting longest for a first request
//     of which the server has read nothing yet.
//
// A new connection the server has not read from yet is never closed to
// make room: it may hold a whole request that a flood of new connections has
// kept the server from reading yet. Nor is a connection whose handler is
// running with its body read (an answer being written, an event stream).
// When no connection may be closed, the new client is answered 503
// Service Unavailable with Retry-After and closed.
//
// The listener learns each connection's state from the server that
// NewHTTPServer returns; with another server it never knows that a
// connection may be closed, so past n it answers every new client 503.
// When logger is not nil, reaching the limit is logged at level Warn, at
// most once a minute.
func LimitListener(ln net.Listener, n int, logger *slog.Logger) net.Listener {
	if n <= 0 {
		return ln
	}
	l := &limitListener{Listener: ln, max: n, log: logger, refusing: make(chan struct{}, maxLingeringRefusals)}
	l.waiting.init()
	l.body.init()
	return l
}

// maxLingeringRefusals bounds the refused connections whose 503 is being
// delivered at once; past it, a refused connection is closed without one.
const maxLingeringRefusals = 1024

// refusalLinger is how long a refused connection is kept open for its
// client to send its request's headers and read the 503.
const refusalLinger = 500 * time.Millisecond

// tlsHandshake is the first byte of a TLS connection (a handshake
// record).
const tlsHandshake = 0x16

// headerEnd ends a request's header block.
var headerEnd = []byte("\r\n\r\n")

// refusal is what a client gets when every connection is busy.
const refusal = "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: 71\r\n\r\nthe server is at its connection limit with every connection busy; retry"

type limitListener struct {
	net.Listener
	max int
	log *slog.Logger

	mu      sync.Mutex
	open    int      // connections accepted and not yet closed or shed
	waiting connList // connections waiting for request headers, oldest first
	body    connList // connections whose request body is being read

	refusing chan struct{} // one token per refused connection lingering
	lastWarn atomic.Int64  // Unix nanoseconds of the last "limit reached" log
	shed     atomic.Int64  // connections closed to make room
	refused  atomic.Int64  // connections answered 503
}

// connPhase is where a tracked connection is in its life, as far as the
// listener knows.
type connPhase uint8

const (
	// phaseUnknown (the zero value): accepted, and its server has not
	// reported on it yet. It is never closed to make room.
	_ connPhase = iota
	// phaseWaiting: waiting for a request's headers (http.StateNew or
	// http.StateIdle). It may be closed to make room.
	phaseWaiting
	// phaseBody: its handler is reading the request body. It may be
	// closed to make room when no connection is waiting.
	phaseBody
	// phaseBusy: a handler is running with its body read, or the
	// connection was hijacked. It is never closed to make room.
	phaseBusy
	// phaseGone: closed, or shed; it no longer counts.
	phaseGone
)

// trackedConn is a connection of a limitListener.
type trackedConn struct {
	net.Conn
	l *limitListener

	// Guarded by l.mu.
	phase      connPhase
	served     bool // it has carried a request whose headers were read whole
	prev, next *trackedConn

	bodyDue     atomic.Int64 // in phaseBody: Unix nanoseconds by which the body is late
	readWaiting atomic.Bool  // in phaseWaiting: the server has read from it
	// partial: the server has read bytes from it that were not yet a whole
	// request's headers (it is in phaseWaiting, never served): a client
	// that sends its headers a piece at a time.
	partial atomic.Bool
	// inWaiting mirrors phase == phaseWaiting for Read, which holds no
	// lock.
	inWaiting atomic.Bool
	// sawBytes: the server has read bytes from it; encrypted: the first
	// was a TLS handshake record, so its requests cannot be seen here.
	sawBytes, encrypted atomic.Bool
	closeOnce           sync.Once
}

// Read reads from the connection, noting that the server has read from
// it since it started waiting for a request.
func (c *trackedConn) Read(p []byte) (int, error) {
	c.readWaiting.Store(true)
	n, err := c.Conn.Read(p)
	if n > 0 && !c.sawBytes.Load() {
		c.sawBytes.Store(true) // only the connection's server goroutine reads
		if p[0] == tlsHandshake {
			// TLS: the listener sees only ciphertext and cannot tell a
			// piece of a request from a whole one.
			c.encrypted.Store(true)
		}
	}
	// Bytes that end a header block are a whole request on its way to
	// its handler, not a piece of one.
	if n > 0 && c.inWaiting.Load() && !c.encrypted.Load() && !bytes.Contains(p[:n], headerEnd) {
		c.partial.Store(true)
	}
	return n, err
}

// NetConn returns the connection it wraps, so that a handler can reach
// the TCP connection's settings (such as its send buffer).
func (c *trackedConn) NetConn() net.Conn { return c.Conn }

// Close closes the connection and gives its slot back.
func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.closeOnce.Do(func() { c.l.release(c) })
	return err
}

// Accept accepts the next connection, making room for it if the listener
// is full. It never waits for room.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		tc := &trackedConn{Conn: c, l: l}
		victim, ok := l.admit(tc)
		if victim != nil {
			l.shed.Add(1)
			l.warnFull("rap: connection limit reached; closing the slow connection that made the least progress to make room for a new one")
			_ = victim.Conn.Close()
		}
		if ok {
			return tc, nil
		}
		l.refused.Add(1)
		l.warnFull("rap: connection limit reached with every connection busy; new clients are answered 503 until one closes")
		l.refuse(c)
	}
}

// admit counts tc in. When the listener is full it takes the slot of a
// victim, which the caller closes; it reports false when there is none.
func (l *limitListener) admit(tc *trackedConn) (victim *trackedConn, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open < l.max {
		l.open++
		return nil, true
	}
	victim = l.victim()
	if victim == nil {
		return nil, false
	}
	l.unlink(victim)
	victim.phase = phaseGone // its slot is tc's now
	return victim, true
}

// victim returns the connection to close to make room, or nil, by the
// progress each has made, least first:
//
//  1. the connection waiting longest for a first request's headers after
//     sending part of them (a client sends its headers whole, at once,
//     unless it means to hold the connection);
//  2. the body furthest behind the minimum rate;
//  3. the connection idle longest between requests (its client opens
//     another when it needs one);
//  4. the connection waiting longest for a first request of which the
//     server has read nothing yet.
//
// The last comes last because under a flood of connections every slot
// turns over within a fraction of a second: a genuine client whose
// request is on its way (its process slow to write it, a packet lost)
// would be closed before its headers arrive. A new connection the server
// has not read from at all is never chosen: it may hold a whole request
// that the flood has kept the server from reading yet. l.mu is held.
func (l *limitListener) victim() *trackedConn {
	var idle, silent *trackedConn
	for c := l.waiting.first(); c != nil; c = l.waiting.after(c) {
		switch {
		case c.served:
			if idle == nil {
				idle = c
			}
		case c.partial.Load():
			return c
		case c.readWaiting.Load():
			if silent == nil {
				silent = c
			}
		}
	}
	if c := l.slowestBody(); c != nil {
		return c
	}
	if idle != nil {
		return idle
	}
	return silent
}

// slowestBody returns the connection whose body is furthest behind the
// minimum rate, or nil. l.mu is held.
func (l *limitListener) slowestBody() *trackedConn {
	var slowest *trackedConn
	var due int64
	for c := l.body.first(); c != nil; c = l.body.after(c) {
		if d := c.bodyDue.Load(); slowest == nil || d < due {
			slowest, due = c, d
		}
	}
	return slowest
}

// refuse answers c 503 and closes it. It reads the request's headers
// first (a client that gets an answer before it has sent its request
// takes it for a broken connection), and lingers a moment after answering
// so that the client reads the answer rather than a reset.
func (l *limitListener) refuse(c net.Conn) {
	select {
	case l.refusing <- struct{}{}:
	default:
		_ = c.Close()
		return
	}
	go func() {
		defer func() { <-l.refusing }()
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(refusalLinger))
		buf := make([]byte, 4<<10)
		for n := 0; !bytes.Contains(buf[:n], []byte("\r\n\r\n")); {
			if n == len(buf) {
				break // headers larger than this: answer anyway
			}
			m, err := c.Read(buf[n:])
			n += m
			if err != nil {
				return
			}
		}
		if _, err := io.WriteString(c, refusal); err != nil {
			return
		}
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(c, 64<<10))
	}()
}

func (l *limitListener) warnFull(msg string) {
	if l.log == nil {
		return
	}
	now := time.Now().UnixNano()
	last := l.lastWarn.Load()
	if now-last < int64(time.Minute) || !l.lastWarn.CompareAndSwap(last, now) {
		return
	}
	l.log.Warn(msg, "max_conns", l.max, "listener", l.Addr().String(),
		"shed_so_far", l.shed.Load(), "refused_so_far", l.refused.Load())
}

// release gives c's slot back, unless it was shed (its slot went to the
// connection that replaced it).
func (l *limitListener) release(c *trackedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.phase == phaseGone {
		return
	}
	l.unlink(c)
	c.phase = phaseGone
	l.open--
}

// setPhase moves c to phase p. It does nothing to a closed or shed
// connection.
func (l *limitListener) setPhase(c *trackedConn, p connPhase) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.phase == phaseGone || c.phase == p {
		return
	}
	l.unlink(c)
	c.phase = p
	c.inWaiting.Store(p == phaseWaiting)
	if p == phaseBusy || p == phaseBody {
		c.served = true
	}
	switch p {
	case phaseWaiting:
		c.readWaiting.Store(false)
		c.partial.Store(false)
		l.waiting.push(c)
	case phaseBody:
		l.body.push(c)
	}
}

// unlink takes c out of the list its phase puts it in. l.mu is held.
func (l *limitListener) unlink(c *trackedConn) {
	switch c.phase {
	case phaseWaiting:
		l.waiting.remove(c)
	case phaseBody:
		l.body.remove(c)
	}
}

// connList is a doubly linked list of connections with a sentinel, in the
// order they were pushed.
type connList struct{ root trackedConn }

func (q *connList) init() { q.root.next, q.root.prev = &q.root, &q.root }

func (q *connList) push(c *trackedConn) {
	c.prev, c.next = q.root.prev, &q.root
	q.root.prev.next = c
	q.root.prev = c
}

func (q *connList) remove(c *trackedConn) {
	c.prev.next, c.next.prev = c.next, c.prev
	c.prev, c.next = nil, nil
}

func (q *connList) first() *trackedConn { return q.after(&q.root) }

func (q *connList) after(c *trackedConn) *trackedConn {
	if c.next == &q.root {
		return nil
	}
	return c.next
}

// trackedOf returns the trackedConn that c is or wraps (through NetConn,
// as a *tls.Conn does), or nil.
func trackedOf(c net.Conn) *trackedConn {
	for c != nil {
		if tc, ok := c.(*trackedConn); ok {
			return tc
		}
		w, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		c = w.NetConn()
	}
	return nil
}

// trackConnState is the ConnState hook of NewHTTPServer's servers: it
// tells a LimitListener which of its connections wait for a request.
func trackConnState(c net.Conn, st http.ConnState) {
	tc := trackedOf(c)
	if tc == nil {
		return
	}
	switch st {
	case http.StateNew, http.StateIdle:
		tc.l.setPhase(tc, phaseWaiting)
	case http.StateActive, http.StateHijacked:
		tc.l.setPhase(tc, phaseBusy)
	}
}

// trackedConnKey is the request context key of the trackedConn that
// carries the request, set by NewHTTPServer's servers.
type trackedConnKey struct{}

// withTrackedConn is the ConnContext hook of NewHTTPServer's servers.
func withTrackedConn(ctx context.Context, c net.Conn) context.Context {
	if tc := trackedOf(c); tc != nil {
		return context.WithValue(ctx, trackedConnKey{}, tc)
	}
	return ctx
}
