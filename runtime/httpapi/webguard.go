package httpapi

// This file keeps web pages from driving the runtime: the client API and
// the web UI refuse foreign Host headers, cross-site requests and
// state-changing requests that are not JSON (internal/webguard says why
// each check is enough).

import (
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/gorap/gorap/internal/webguard"
)

// webPolicy returns the browser policy of o: its allowed hosts and
// origins, with PublicURL's host allowed too.
func webPolicy(o *Options) *webguard.Policy {
	p := &webguard.Policy{
		Hosts:   append([]string(nil), o.AllowedHosts...),
		Origins: append([]string(nil), o.AllowedOrigins...),
		HostAdvice: "if this runtime is meant to answer to that name (behind a proxy, in a cluster), " +
			"start it with --allowed-hosts NAME (or RAP_ALLOWED_HOSTS)",
		OriginAdvice: "if that page is meant to use this runtime, start it with --allowed-origins ORIGIN (or RAP_ALLOWED_ORIGINS)",
	}
	if u, err := url.Parse(o.PublicURL); err == nil && u.Host != "" {
		p.Hosts = append(p.Hosts, u.Host)
	}
	return p
}

// IsCallbackPath reports whether p is the path of a callback URL: the
// callback prefix and one segment, in canonical form (no dot segments,
// no doubled slashes), so that no path that merely starts like one
// escapes the checks of the client API.
func IsCallbackPath(p string) bool {
	token, ok := strings.CutPrefix(p, CallbackPath)
	return ok && token != "" && !strings.Contains(token, "/") && path.Clean(p) == p
}

// MovePath is the prefix of the URLs of a session's move that the
// destination runtime serves to the source runtime: MovePath +
// "{session}/{move id}/commit", "/abort" and "/status". Like callback
// URLs they are outside the client API: each request carries the move's
// own secret.
const MovePath = "/rap/migrations/"

// isMovePath reports whether p is, in canonical form, the path of a
// move's step.
func isMovePath(p string) bool {
	rest, ok := strings.CutPrefix(p, MovePath)
	if !ok || path.Clean(p) != p {
		return false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
		return false
	}
	switch parts[2] {
	case "commit", "abort", "status":
		return true
	}
	return false
}

// isPeerPath reports whether p is reached by peers that authenticate
// each request themselves (tools' callbacks, another runtime's move
// steps) rather than with the client API's token.
func isPeerPath(p string) bool { return IsCallbackPath(p) || isMovePath(p) }

// WebGuard returns next guarded against web pages under the hosts and
// origins of opts (nil: loopback only): requests whose Host header is not
// an allowed one, requests made by another site's page (Origin or
// Sec-Fetch-Site; a navigation to a page is allowed), and state-changing
// requests without "Content-Type: application/json" get 403 or 415 with a
// JSON error. The callback endpoint is not guarded: tools reach it by any
// name, and each callback URL carries its own signed token. New applies
// WebGuard to the client API; a program that serves pages of its own
// beside it (as rap serve does with the web UI) wraps them in WebGuard
// too.
func WebGuard(opts *Options, next http.Handler) http.Handler {
	o := opts.withDefaults()
	return webGuard(&o, next)
}

// webGuard is WebGuard with the defaults filled in.
func webGuard(o *Options, next http.Handler) http.Handler {
	web := webPolicy(o)
	log := o.Log
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if isPeerPath(req.URL.Path) {
			next.ServeHTTP(w, req)
			return
		}
		api := req.URL.Path == "/v1" || strings.HasPrefix(req.URL.Path, "/v1/")
		ref := web.CheckHost(req)
		if ref == nil {
			ref = web.CheckCrossSite(req, !api)
		}
		if ref == nil {
			ref = webguard.CheckJSON(req)
		}
		if ref != nil {
			log.Debug("client API request refused", "method", req.Method, "path", req.URL.Path, "status", ref.Status, "reason", ref.Message)
			writeError(w, ref.Status, ref.Message)
			return
		}
		next.ServeHTTP(w, req)
	})
}
