package rap

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of HTTPLimits (issue 9 item 15). They bound what one client
// connection can hold and for how long, so that thousands of slow or idle
// clients cost a bounded amount of memory: a connection costs the server
// roughly 20 to 40 KiB (a goroutine, its buffers, and the part of a body
// read so far), and at most DefaultMaxConns are open at once.
const (
	// DefaultReadHeaderTimeout is HTTPLimits.ReadHeaderTimeout when zero:
	// how long a client may take to send a request's headers.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultReadTimeout is HTTPLimits.ReadTimeout when zero: how long a
	// client may take to send a whole request, headers and body. At the
	// default body limit (DefaultMaxBodyBytes) it asks for about 35 KB/s.
	DefaultReadTimeout = 30 * time.Second
	// DefaultWriteTimeout is HTTPLimits.WriteTimeout when zero: how long
	// the server may take to answer, from the end of the headers. Every
	// answer but /migrate's is immediate; /migrate is exempt.
	DefaultWriteTimeout = 30 * time.Second
	// DefaultIdleTimeout is HTTPLimits.IdleTimeout when zero: how long a
	// kept-alive connection may wait for its next request. It is longer
	// than Go clients' 90-second idle timeout, so that a runtime's client,
	// not the server, closes an idle connection.
	DefaultIdleTimeout = 120 * time.Second
	// DefaultMaxHeaderBytes is HTTPLimits.MaxHeaderBytes when zero.
	DefaultMaxHeaderBytes = 64 << 10
	// DefaultMaxConns is HTTPLimits.MaxConns when zero: connections open
	// at once. Further clients wait in the kernel's accept queue until one
	// closes, which costs the process nothing.
	DefaultMaxConns = 1024
)

// HTTPLimits bounds the connections of the http.Server that Serve and
// ListenAndServe run (ServerOptions.HTTP) or that NewHTTPServer returns.
// A zero field takes its default (DefaultReadTimeout, ...); a negative one
// disables that limit.
type HTTPLimits struct {
	// ReadHeaderTimeout bounds the time to read a request's headers.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds the time to read a whole request, body included:
	// a client sending its body slowly is cut off when it passes.
	ReadTimeout time.Duration
	// WriteTimeout bounds the time from the end of a request's headers to
	// the end of its answer.
	WriteTimeout time.Duration
	// IdleTimeout bounds the wait for the next request on a kept-alive
	// connection.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds the size of a request's headers; larger ones
	// get 431.
	MaxHeaderBytes int
	// MaxConns bounds the connections open at once (see LimitListener).
	MaxConns int
}

// withDefaults returns l with zero fields set to their defaults and
// negative ones to zero, which means "no limit" to net/http.
func (l HTTPLimits) withDefaults() HTTPLimits {
	dur := func(v, def time.Duration) time.Duration {
		switch {
		case v == 0:
			return def
		case v < 0:
			return 0
		}
		return v
	}
	num := func(v, def int) int {
		switch {
		case v == 0:
			return def
		case v < 0:
			return 0
		}
		return v
	}
	return HTTPLimits{
		ReadHeaderTimeout: dur(l.ReadHeaderTimeout, DefaultReadHeaderTimeout),
		ReadTimeout:       dur(l.ReadTimeout, DefaultReadTimeout),
		WriteTimeout:      dur(l.WriteTimeout, DefaultWriteTimeout),
		IdleTimeout:       dur(l.IdleTimeout, DefaultIdleTimeout),
		MaxHeaderBytes:    num(l.MaxHeaderBytes, DefaultMaxHeaderBytes),
		MaxConns:          num(l.MaxConns, DefaultMaxConns),
	}
}

// NewHTTPServer returns an http.Server for h with the timeouts and header
// limit of l (zero fields take the defaults), logging its errors to
// logger (nil means slog.Default()) at level Warn. Serve it on a listener
// wrapped by LimitListener to bound the connections too; Serve and
// ListenAndServe do both.
func NewHTTPServer(h http.Handler, l HTTPLimits, logger *slog.Logger) *http.Server {
	l = l.withDefaults()
	if logger == nil {
		logger = slog.Default()
	}
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}

// LimitListener returns a listener that keeps at most n of ln's
// connections open at once: Accept waits while n are open, leaving
// further clients in the kernel's accept queue. n <= 0 returns ln.
// When logger is not nil, reaching the limit is logged at level Warn, at
// most once a minute.
func LimitListener(ln net.Listener, n int, logger *slog.Logger) net.Listener {
	if n <= 0 {
		return ln
	}
	return &limitListener{Listener: ln, slots: make(chan struct{}, n), done: make(chan struct{}), log: logger}
}

type limitListener struct {
	net.Listener
	slots     chan struct{} // one token per open connection
	done      chan struct{} // closed by Close
	closeOnce sync.Once
	log       *slog.Logger
	lastWarn  atomic.Int64 // Unix nanoseconds of the last "limit reached" log
}

// Accept waits for a free slot, then for a connection.
func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	default:
		l.warnFull()
		select {
		case l.slots <- struct{}{}:
		case <-l.done:
			return nil, net.ErrClosed
		}
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitedConn{Conn: c, release: func() { <-l.slots }}, nil
}

func (l *limitListener) warnFull() {
	if l.log == nil {
		return
	}
	now := time.Now().UnixNano()
	last := l.lastWarn.Load()
	if now-last < int64(time.Minute) || !l.lastWarn.CompareAndSwap(last, now) {
		return
	}
	l.log.Warn("rap: connection limit reached; new clients wait until a connection closes",
		"max_conns", cap(l.slots), "listener", l.Addr().String())
}

// Close closes the listener and wakes a waiting Accept.
func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitedConn gives its slot back once, when closed.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

// NetConn returns the connection it wraps, so that a handler can reach
// the TCP connection's settings (such as its send buffer).
func (c *limitedConn) NetConn() net.Conn { return c.Conn }

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// DefaultMaxBodyBytesInFlight is ServerOptions.MaxBodyBytesInFlight when
// zero: the request body bytes all connections together may hold while
// their bodies are being read.
const DefaultMaxBodyBytesInFlight = 64 << 20

// errBodyBudget is the error of a body read that would take the server
// over MaxBodyBytesInFlight.
var errBodyBudget = errors.New("the tool server is receiving too many request bodies at once")

// budgetReader counts the bytes it reads against the server's in-flight
// body budget until release.
type budgetReader struct {
	r     io.Reader
	total *atomic.Int64
	limit int64 // 0: no limit
	held  int64
}

func (s *Server) budgeted(r io.Reader) *budgetReader {
	return &budgetReader{r: r, total: &s.bodyBytes, limit: s.opts.MaxBodyBytesInFlight}
}

func (b *budgetReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if n > 0 {
		b.held += int64(n)
		if t := b.total.Add(int64(n)); b.limit > 0 && t > b.limit {
			return n, errBodyBudget
		}
	}
	return n, err
}

// release gives back what the reader counted.
func (b *budgetReader) release() {
	b.total.Add(-b.held)
	b.held = 0
}

// overBudget answers a request whose body would take the server over its
// in-flight body budget: 503, to be retried (RAP TR-3).
func (s *Server) overBudget(w http.ResponseWriter) {
	s.log.Warn("rap: request refused: request bodies being received are at their limit", "toolset", s.name,
		"max_body_bytes_in_flight", s.opts.MaxBodyBytesInFlight)
	w.Header().Set("Retry-After", "1")
	w.Header().Set("Connection", "close")
	http.Error(w, errBodyBudget.Error()+"; retry later", http.StatusServiceUnavailable)
}
