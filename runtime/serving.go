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

// ServerLimits are the timeouts and limits of the runtime's HTTP server
// (see NewHTTPServer and LimitListener). Zero fields take the defaults.
type ServerLimits struct {
	// ReadHeaderTimeout bounds reading a request's headers. Default 10 s.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included: a client
	// that sends its body slower is cut off. Default 60 s, time enough for
	// a 4 MiB callback at 70 KB/s.
	ReadTimeout time.Duration
	// WriteTimeout bounds writing a response. Event streams replace it with
	// a deadline per event (StreamLimits.WriteTimeout). Default 60 s.
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection idle for that long.
	// Default 120 s.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's headers. Default 64 KiB.
	MaxHeaderBytes int
	// MaxConns is the most connections served at once (LimitListener); the
	// listener accepts no more until one closes. It must leave room for
	// StreamLimits.Total event streams. Default 10,000.
	MaxConns int
}

// Defaults of ServerLimits.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 60 * time.Second
	DefaultWriteTimeout      = 60 * time.Second
	DefaultIdleTimeout       = 120 * time.Second
	DefaultMaxHeaderBytes    = 64 << 10
	DefaultMaxConns          = 10000
)

func (l ServerLimits) withDefaults() ServerLimits {
	set := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	set(&l.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	set(&l.ReadTimeout, DefaultReadTimeout)
	set(&l.WriteTimeout, DefaultWriteTimeout)
	set(&l.IdleTimeout, DefaultIdleTimeout)
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if l.MaxConns <= 0 {
		l.MaxConns = DefaultMaxConns
	}
	return l
}

// NewHTTPServer returns an http.Server for h with every timeout and the
// header limit of l set (issue 9 item 15). Serve it on
// LimitListener(ln, l) to cap its connections. log receives the server's
// own errors at warning level; nil means slog.Default(). It is the rap
// package's server with the runtime's defaults.
func NewHTTPServer(h http.Handler, l ServerLimits, log *slog.Logger) *http.Server {
	l = l.withDefaults()
	srv := rap.NewHTTPServer(h, rap.HTTPLimits{
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
		MaxConns:          l.MaxConns,
	}, log)
	// Event streams shrink their connection's kernel send buffer (see
	// streamSendBuffer); they find the connection in the request context.
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, c)
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

// LimitListener returns a listener that keeps at most l.MaxConns accepted
// connections open at once: past that, Accept waits until one closes, and
// the kernel's backlog holds the newcomers.
func LimitListener(ln net.Listener, l ServerLimits) net.Listener {
	return rap.LimitListener(ln, l.withDefaults().MaxConns, nil)
}
