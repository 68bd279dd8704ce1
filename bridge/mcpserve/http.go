package mcpserve

// This file owns the Streamable HTTP transport: the MCP endpoint guarded
// against web pages (Host, Origin) and, when a token is set, against
// clients without it.

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/gorap/gorap/internal/bearer"
	"github.com/gorap/gorap/internal/webguard"
	"github.com/gorap/gorap/rap"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Defaults of HTTPOptions.
const (
	// DefaultSessionTimeout is HTTPOptions.SessionTimeout when zero: an
	// MCP session without a request for this long is closed.
	DefaultSessionTimeout = 30 * time.Minute
	// DefaultMaxRequestBytes is HTTPOptions.MaxRequestBytes when zero.
	DefaultMaxRequestBytes = 4 << 20
	// shutdownGrace bounds the graceful stop of Serve's HTTP server.
	shutdownGrace = 5 * time.Second
)

// HTTPOptions configure the Streamable HTTP endpoint.
type HTTPOptions struct {
	// Token, when set, is the bearer token every request must carry
	// ("Authorization: Bearer TOKEN"); others get 401.
	Token string
	// AllowedHosts are host names requests may name in their Host header
	// besides loopback names and IP addresses (webguard.Policy.Hosts).
	AllowedHosts []string
	// AllowedOrigins are origins whose pages may use the endpoint; a
	// request from any other page (its Origin header) gets 403.
	AllowedOrigins []string
	// SessionTimeout closes an MCP session idle this long; default
	// DefaultSessionTimeout.
	SessionTimeout time.Duration
	// MaxRequestBytes bounds a request body; default
	// DefaultMaxRequestBytes.
	MaxRequestBytes int64
}

// HTTPHandler returns the Streamable HTTP endpoint of the MCP server. It
// refuses, before MCP sees them, a Host header that is not a loopback
// name, an IP address or an allowed host (DNS rebinding), a request whose
// Origin is another site's (403, as MCP requires against DNS rebinding),
// and, when o.Token is set, a request without that bearer token (401).
func (s *Server) HTTPHandler(o HTTPOptions) http.Handler {
	if o.SessionTimeout <= 0 {
		o.SessionTimeout = DefaultSessionTimeout
	}
	if o.MaxRequestBytes <= 0 {
		o.MaxRequestBytes = DefaultMaxRequestBytes
	}
	mh := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp }, &mcp.StreamableHTTPOptions{
		SessionTimeout:      o.SessionTimeout,
		MaxRequestBodyBytes: o.MaxRequestBytes,
		Logger:              quieter(s.log, slog.LevelWarn),
	})
	policy := &webguard.Policy{
		Hosts:        o.AllowedHosts,
		Origins:      o.AllowedOrigins,
		HostAdvice:   "if this server is meant to answer to that name, start it with --allowed-hosts NAME",
		OriginAdvice: "if that page is meant to use this MCP server, start it with --allowed-origins ORIGIN",
	}
	token := []byte(o.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ref := policy.CheckHost(r); ref != nil {
			http.Error(w, ref.Message, ref.Status)
			return
		}
		if ref := policy.CheckCrossSite(r, false); ref != nil {
			http.Error(w, ref.Message, ref.Status)
			return
		}
		if len(token) > 0 {
			got, ok := bearer.FromRequest(r)
			if !ok || subtle.ConstantTimeCompare([]byte(got), token) != 1 {
				bearer.Challenge(w.Header(), "mcp")
				http.Error(w, "this MCP server needs a bearer token: send the header Authorization: Bearer TOKEN with the token it was started with (--token or RAP_TOKEN)", http.StatusUnauthorized)
				return
			}
		}
		if r.Method == http.MethodPost && !liftTasks(w, r, o.MaxRequestBytes) {
			return
		}
		mh.ServeHTTP(w, r)
	})
}

// liftTasks reads a POST body (at most limit bytes) and puts it back with
// the "task" params of its tools/call requests where the tasks
// middleware finds them (tasks.go). It answers 413 and reports false for
// a body over limit.
func liftTasks(w http.ResponseWriter, r *http.Request, limit int64) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			http.Error(w, fmt.Sprintf("the request body is over %d bytes, the most this MCP server takes", limit), http.StatusRequestEntityTooLarge)
		} else {
			http.Error(w, "reading the request body failed: "+err.Error(), http.StatusBadRequest)
		}
		return false
	}
	body = liftTaskParamsInBody(body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	return true
}

// Serve serves HTTPHandler(o) on ln until ctx ends, with the limits of
// every gorap server (rap.HTTPLimits: header and body timeouts, header
// size, connection cap) but no write timeout, since an MCP response
// stream lasts as long as its call or session. When ctx ends it closes the
// Server (calls in flight end, sessions close) and stops the HTTP server
// gracefully. The endpoint is served at path, such as "/mcp".
func (s *Server) Serve(ctx context.Context, ln net.Listener, path string, o HTTPOptions) error {
	defer s.Close()
	mux := http.NewServeMux()
	mux.Handle(path, s.HTTPHandler(o))
	srv := rap.NewHTTPServer(mux, rap.HTTPLimits{WriteTimeout: -1}, s.log)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(rap.LimitListener(ln, rap.DefaultMaxConns, s.log)) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.Close()
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		srv.Close()
	}
	return nil
}
