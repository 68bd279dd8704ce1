package rap

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// Defaults of HTTPLimits. They bound what one client connection can hold
// and for how long, so that thousands of slow or idle clients cost a
// bounded amount of memory and cannot keep other clients out: a connection
// costs the server roughly 20 to 40 KiB (a goroutine, its buffers, and the
// part of a body read so far), and at most DefaultMaxConns are open at
// once. When they are all open, a new client takes the place of the
// connection that made the least progress (see LimitListener).
const (
	// DefaultReadHeaderTimeout is HTTPLimits.ReadHeaderTimeout when zero:
	// how long a client may take to send a request's headers, from the
	// moment the server starts reading them. Headers are a few hundred
	// bytes to a few KiB: on a 64 kbit/s link with two lost packets
	// (TCP waits 1 s, then 2 s, to resend) they still arrive in time.
	DefaultReadHeaderTimeout = 5 * time.Second
	// DefaultMinBodyRate is HTTPLimits.MinBodyRate when zero: the slowest
	// a request body may arrive, in bytes a second averaged from the end
	// of its headers, once DefaultBodyRateGrace has passed. 4 KiB/s is
	// half of a 64 kbit/s link.
	DefaultMinBodyRate = 4 << 10
	// DefaultBodyRateGrace is HTTPLimits.BodyRateGrace when zero: the time
	// every body gets before the minimum rate applies, so that a small
	// body on a slow or lossy link is never cut.
	DefaultBodyRateGrace = 5 * time.Second
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
	// at once (see LimitListener for what happens past it). It is one
	// default for tool servers and the runtime alike: room for the
	// runtime's long-lived event streams (1,536 by default) and 512 other
	// connections, and at most about 50 MiB of connection state when
	// every one of them is a slow client.
	DefaultMaxConns = 2048
)

// HTTPLimits bounds the connections of the http.Server that Serve and
// ListenAndServe run (ServerOptions.HTTP) or that NewHTTPServer returns.
// A zero field takes its default (DefaultReadHeaderTimeout, ...); a
// negative one disables that limit.
type HTTPLimits struct {
	// ReadHeaderTimeout bounds the time to read a request's headers.
	ReadHeaderTimeout time.Duration
	// MinBodyRate is the slowest, in bytes a second, that a request body
	// may arrive once BodyRateGrace has passed: a body must have arrived
	// at MinBodyRate on average since the end of its headers, less the
	// grace, or its connection is closed. It replaces a flat timeout for
	// the whole body, which either cuts large bodies on slow links or lets
	// a stalled body hold its connection for long.
	MinBodyRate int
	// BodyRateGrace is the time every body gets before MinBodyRate
	// applies.
	BodyRateGrace time.Duration
	// ReadTimeout, when positive, is a ceiling on reading a whole request
	// on top of the rate: net/http's read timeout (headers and body from
	// the first byte), and no body is read longer than that after its
	// headers. Zero or negative: no ceiling; MinBodyRate bounds a body.
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

// Listener returns ln wrapped by LimitListener with l's MaxConns
// (DefaultMaxConns when zero; ln itself when negative), logging reaching
// the limit to logger.
func (l HTTPLimits) Listener(ln net.Listener, logger *slog.Logger) net.Listener {
	return LimitListener(ln, l.withDefaults().MaxConns, logger)
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
		MinBodyRate:       num(l.MinBodyRate, DefaultMinBodyRate),
		BodyRateGrace:     dur(l.BodyRateGrace, DefaultBodyRateGrace),
		ReadTimeout:       max(l.ReadTimeout, 0),
		WriteTimeout:      dur(l.WriteTimeout, DefaultWriteTimeout),
		IdleTimeout:       dur(l.IdleTimeout, DefaultIdleTimeout),
		MaxHeaderBytes:    num(l.MaxHeaderBytes, DefaultMaxHeaderBytes),
		MaxConns:          num(l.MaxConns, DefaultMaxConns),
	}
}

// NewHTTPServer returns an http.Server for h with the limits of l (zero
// fields take the defaults), logging its errors to logger (nil means
// slog.Default()) at level Warn. Its handler enforces the minimum body
// rate (see HTTPLimits.MinBodyRate) around h. Serve it on a listener
// wrapped by LimitListener to bound the connections too: the server
// reports each connection's state to that listener (through its ConnState
// and ConnContext hooks, which a caller that replaces them must call in
// turn), so that a full listener knows which connections it may close.
// Serve and ListenAndServe do both.
func NewHTTPServer(h http.Handler, l HTTPLimits, logger *slog.Logger) *http.Server {
	l = l.withDefaults()
	if logger == nil {
		logger = slog.Default()
	}
	return &http.Server{
		Handler:           &bodyRateHandler{h: h, rate: l.MinBodyRate, grace: l.BodyRateGrace, ceiling: l.ReadTimeout},
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
		ConnState:         trackConnState,
		ConnContext:       withTrackedConn,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
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
