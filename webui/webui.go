// Package webui is the runtime's web user interface: a single page, served
// at "/" by rap serve, that lists threads as a tree, follows a thread's
// event stream and lets a person chat, answer user choices and follow
// child threads.
//
// The page is plain HTML, CSS and JavaScript modules embedded in the
// binary: it needs no build step and loads nothing from the network. It
// talks to the client API under /v1 (see docs/api.md) from the browser;
// when the runtime requires a client token, the page asks for it once and
// keeps it in the tab's sessionStorage, and sends it only in the
// Authorization header, never in a URL.
package webui

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed assets
var assets embed.FS

// ContentSecurityPolicy is the policy sent with every asset: scripts and
// styles only from the page's own origin (no inline script, no eval),
// images from the origin, data: URLs (tool results carry images as base64)
// and https URLs, connections only to the origin's API, no frames, no
// plugins, no forms posted elsewhere.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; " +
	"img-src 'self' data: https:; connect-src 'self'; base-uri 'none'; form-action 'self'; " +
	"frame-ancestors 'none'; object-src 'none'"

// Handler serves the web UI: the page at "/" and its assets under
// "/assets/". Every answer carries ContentSecurityPolicy and headers that
// keep the page out of frames and other sites' referrers. Paths it does
// not know are answered 404.
func Handler() http.Handler {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded directory is part of the binary
	}
	files := http.FileServerFS(sub)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		setHeaders(w)
		w.Header().Set("Cache-Control", "no-cache")
		http.ServeFileFS(w, r, sub, "index.html")
	})
	mux.Handle("GET /assets/", http.StripPrefix("/assets", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" || strings.HasSuffix(r.URL.Path, "/") || r.URL.Path == "/index.html" {
			http.NotFound(w, r) // no directory listings; the page lives at "/"
			return
		}
		setHeaders(w)
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})))
	return mux
}

// setHeaders sets the security headers of every web UI answer.
func setHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
}

// WithAPI returns a handler that sends the runtime's routes (the client
// API under /v1/ and the callback endpoint under /rap/) to api and
// everything else to the web UI. api keeps its own authentication: the
// page and its assets hold no secret and are served without a token.
// guard, when not nil, wraps the web UI's routes: the runtime's
// Runtime.WebGuard, so that the page is refused under a host name that is
// not the runtime's (a rebound DNS name).
func WithAPI(api http.Handler, guard func(http.Handler) http.Handler) http.Handler {
	ui := Handler()
	if guard != nil {
		ui = guard(ui)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1/") || r.URL.Path == "/v1" || strings.HasPrefix(r.URL.Path, "/rap/") {
			api.ServeHTTP(w, r)
			return
		}
		ui.ServeHTTP(w, r)
	})
}
