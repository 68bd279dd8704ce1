package runtime

// This file owns the HTTP server settings: ServerLimits and StreamLimits
// with their defaults, and NewHTTPServer.

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/gorap/gorap/rap"
)

// StreamLimits bounds the client API's event streams (GET
// /v1/threads/{id}/events). Zero fields take the defaults below.
type StreamLimits struct {
	// BufferBytes bounds the events queued for one subscriber (an event
	// stream or a Subscribe channel) that has not taken them yet; one that
	// falls further behind is dropped and its memory freed. Default 4 MiB.
	BufferBytes int
	// TotalBufferBytes bounds the events queued over every subscriber:
	// past it, a subscriber that is behind is dropped rather than queue
	// more. Default 256 MiB.
	TotalBufferBytes int
	// WriteTimeout bounds each write of an event to a stream's client; a
	// client that does not read for that long is disconnected. Default 30 s.
	WriteTimeout time.Duration
	// PerThread is the most concurrent event streams of one thread; one
	// more is answered 429 Too Many Requests. Default 64.
	PerThread int
	// Total is the most concurrent event streams of the runtime; one more
	// is answered 503 Service Unavailable. Default 4096.
	Total int
	// ResumeBytes bounds the recent events kept per thread so that a
	// client that reconnects with Last-Event-ID gets exactly the events it
	// missed; one whose id has left this buffer gets a full replay flagged
	// as a reset. Default 1 MiB.
	ResumeBytes int
	// ResumeTotalBytes bounds the resume buffers of all threads; past it
	// the least recently used buffers of threads nobody streams are
	// forgotten first. Default 64 MiB.
	ResumeTotalBytes int
}

// Defaults of StreamLimits.
const (
	DefaultStreamBufferBytes  = 4 << 20
	DefaultStreamTotalBytes   = 256 << 20
	DefaultStreamWriteTimeout = 30 * time.Second
	DefaultStreamsPerThread   = 64
	DefaultStreamsTotal       = 4096
	DefaultResumeBytes        = 1 << 20
	DefaultResumeTotalBytes   = 64 << 20
)

func (l StreamLimits) withDefaults() StreamLimits {
	if l.BufferBytes <= 0 {
		l.BufferBytes = DefaultStreamBufferBytes
	}
	if l.TotalBufferBytes <= 0 {
		l.TotalBufferBytes = DefaultStreamTotalBytes
	}
	if l.WriteTimeout <= 0 {
		l.WriteTimeout = DefaultStreamWriteTimeout
	}
	if l.PerThread <= 0 {
		l.PerThread = DefaultStreamsPerThread
	}
	if l.Total <= 0 {
		l.Total = DefaultStreamsTotal
	}
	if l.ResumeBytes <= 0 {
		l.ResumeBytes = DefaultResumeBytes
	}
	if l.ResumeTotalBytes <= 0 {
		l.ResumeTotalBytes = DefaultResumeTotalBytes
	}
	return l
}

// ServerLimits are the limits of the runtime's HTTP server (see
// NewHTTPServer and LimitListener). They are rap.HTTPLimits, the tool-server
// SDK's, with the runtime's own defaults where it needs other ones: a
// longer write timeout, and room for many more connections (event streams
// are long-lived). Zero fields take the defaults.
type ServerLimits struct {
	// ReadHeaderTimeout bounds reading a request's headers. Default 5 s
	// (rap.DefaultReadHeaderTimeout).
	ReadHeaderTimeout time.Duration
	// MinBodyRate is the slowest, in bytes a second, that a request body
	// may arrive on average once BodyRateGrace has passed; a slower body's
	// connection is closed. Default 4 KiB/s (rap.DefaultMinBodyRate): a
	// 4 MiB callback may take up to about 17 minutes.
	MinBodyRate int
	// BodyRateGrace is the time every body gets before MinBodyRate applies.
	// Default 5 s (rap.DefaultBodyRateGrace).
	BodyRateGrace time.Duration
	// ReadTimeout, when positive, is a ceiling on reading a whole request
	// on top of the rate. Default none.
	ReadTimeout time.Duration
	// WriteTimeout bounds writing a response. Event streams replace it with
	// a deadline per event (StreamLimits.WriteTimeout). Default 60 s.
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection idle for that long.
	// Default 120 s.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's headers. Default 64 KiB.
	MaxHeaderBytes int
	// MaxConns is the most connections open at once (LimitListener). When
	// they are all open, a new client takes the place of the connection
	// that has waited longest for a request, or whose body is furthest
	// behind; event streams and running requests are never closed for it,
	// and when every connection is one of them a new client gets 503. It
	// must leave room for StreamLimits.Total event streams. Default 10,000.
	MaxConns int
}

// Defaults of ServerLimits. Those shared with the tool-server SDK are its
// values (see rap.HTTPLimits).
const (
	DefaultReadHeaderTimeout = rap.DefaultReadHeaderTimeout
	DefaultMinBodyRate       = rap.DefaultMinBodyRate
	DefaultBodyRateGrace     = rap.DefaultBodyRateGrace
	DefaultWriteTimeout      = 60 * time.Second
	DefaultIdleTimeout       = rap.DefaultIdleTimeout
	DefaultMaxHeaderBytes    = rap.DefaultMaxHeaderBytes
	DefaultMaxConns          = 10000
)

// httpLimits returns l as the rap package's limits, with the runtime's
// defaults.
func (l ServerLimits) httpLimits() rap.HTTPLimits {
	dur := func(v, def time.Duration) time.Duration {
		if v <= 0 {
			return def
		}
		return v
	}
	num := func(v, def int) int {
		if v <= 0 {
			return def
		}
		return v
	}
	return rap.HTTPLimits{
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

// NewHTTPServer returns the rap package's server (rap.NewHTTPServer) for h
// with the limits of l: timeouts, the minimum body rate and the header
// limit. Serve it on LimitListener(ln, l) to cap its connections. log
// receives the server's own errors at warning level; nil means
// slog.Default().
func NewHTTPServer(h http.Handler, l ServerLimits, log *slog.Logger) *http.Server {
	srv := rap.NewHTTPServer(h, l.httpLimits(), log)
	// Event streams shrink their connection's kernel send buffer (see
	// streamSendBuffer); they find the connection in the request context.
	trackConn := srv.ConnContext
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(trackConn(ctx, c), connKey{}, c)
	}
	return srv
}

// connKey is the request context key of the connection, set by the
// servers NewHTTPServer makes.
type connKey struct{}

// streamSendBuffer is the kernel send buffer of an event stream's TCP
// connection. Without a bound, the kernel accepts megabytes for a client
// that does not read (on loopback, as much as it has to spare), which
// counts against the machine's TCP memory and, with a thousand stuck
// clients, slows every other connection of the process; the runtime's own
// queue (StreamLimits.BufferBytes) is where a stream's backlog belongs.
const streamSendBuffer = 64 << 10

// limitSendBuffer bounds the kernel send buffer of the connection that
// serves req, when the server made the connection reachable (NewHTTPServer
// does).
func limitSendBuffer(req *http.Request) {
	c, _ := req.Context().Value(connKey{}).(net.Conn)
	for c != nil {
		if tc, ok := c.(interface{ SetWriteBuffer(int) error }); ok {
			_ = tc.SetWriteBuffer(streamSendBuffer)
			return
		}
		w, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return
		}
		c = w.NetConn()
	}
}

// LimitListener returns rap.LimitListener(ln, l.MaxConns): at most
// l.MaxConns connections open, and a full listener makes room for a new
// client by closing the connection that has waited longest for a request
// (see rap.LimitListener).
func LimitListener(ln net.Listener, l ServerLimits) net.Listener {
	return rap.LimitListener(ln, l.httpLimits().MaxConns, nil)
}
