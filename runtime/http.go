package runtime

// This file hands the runtime to its HTTP surface, runtime/httpapi:
// Handler with the options of Config, and the forwarders WebGuard,
// NewHTTPServer and IsCallbackPath. The handlers drive the runtime only
// through its exported methods (httpapi.Engine).

import (
	"log/slog"
	"net/http"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/httpapi"
)

// The runtime is what its HTTP surface serves.
var (
	_ httpapi.Engine    = (*Runtime)(nil)
	_ httpapi.Readiness = (*Runtime)(nil)
)

// Handler returns the runtime's HTTP handler: the client API under /v1 and
// the callback endpoint under CallbackPath (see docs/api.md); it is
// httpapi.New with the runtime's Config. The client API refuses what web
// pages could send it (see WebGuard), and is guarded by Config.ClientAuth,
// or without it answers loopback addresses only (see
// Config.InsecureClientAPI).
func (r *Runtime) Handler() http.Handler {
	return httpapi.New(r, r.httpOptions())
}

// httpOptions returns the options of the runtime's HTTP surface, from its
// Config.
func (r *Runtime) httpOptions() *httpapi.Options {
	return &httpapi.Options{
		Log:                r.log,
		PublicURL:          r.cfg.PublicURL,
		AllowedHosts:       r.cfg.AllowedHosts,
		AllowedOrigins:     r.cfg.AllowedOrigins,
		ClientAuth:         r.cfg.ClientAuth,
		InsecureClientAPI:  r.cfg.InsecureClientAPI,
		StreamWriteTimeout: r.hub.limits.WriteTimeout,
		Metrics:            r.cfg.MetricsHandler,
	}
}

// WebGuard returns next guarded against web pages: requests whose Host
// header is not an allowed one (see Config.AllowedHosts), requests made by
// another site's page (Origin or Sec-Fetch-Site; a navigation to a page is
// allowed), and state-changing requests without
// "Content-Type: application/json" get 403 or 415 with a JSON error (see
// httpapi.WebGuard). The callback endpoint is not guarded. Handler applies
// WebGuard to the client API; a program that serves pages of its own
// beside it (as rap serve does with the web UI) wraps them in WebGuard too.
func (r *Runtime) WebGuard(next http.Handler) http.Handler {
	return httpapi.WebGuard(r.httpOptions(), next)
}

// NewHTTPServer returns the server for h with the limits of l; it is
// httpapi.NewHTTPServer (see there).
func NewHTTPServer(h http.Handler, l rap.HTTPLimits, log *slog.Logger) *http.Server {
	return httpapi.NewHTTPServer(h, l, log)
}

// IsCallbackPath reports whether p is the path of a callback URL; it is
// httpapi.IsCallbackPath (see there).
func IsCallbackPath(p string) bool { return httpapi.IsCallbackPath(p) }
