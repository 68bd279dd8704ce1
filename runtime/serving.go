package runtime

// This file owns the HTTP server settings: StreamLimits with their
// defaults, and NewHTTPServer (rap.HTTPLimits bound its connections).

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
	// is answered 503 Service Unavailable. Default 1536, which leaves 512
	// of rap.DefaultMaxConns connections for other requests.
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
	DefaultStreamsTotal       = 1536
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

// NewHTTPServer returns the rap package's server (rap.NewHTTPServer) for h
// with the limits of l (zero fields take rap's defaults, the same for tool
// servers and the runtime): timeouts, the minimum body rate and the header
// limit. Serve it on l.Listener(ln, log) to cap its connections. log
// receives the server's own errors at warning level; nil means
// slog.Default().
func NewHTTPServer(h http.Handler, l rap.HTTPLimits, log *slog.Logger) *http.Server {
	srv := rap.NewHTTPServer(h, l, log)
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
