package httpapi

// This file owns the HTTP server: NewHTTPServer (rap.HTTPLimits bound its
// connections) and the bound of an event stream's kernel send buffer.

import (
	"context"
	"log/slog"
	"net"
	"net/http"

	"github.com/gorap/gorap/rap"
)

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
// queue (the stream's buffer bound) is where a stream's backlog belongs.
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
