package httpapi

// This file owns who may use the client API: the configured
// authentication, or by default only clients on this machine.

import (
	"net"
	"net/http"
	"net/netip"
)

// errNoClientAuth is the answer to a client API request from another
// machine when the runtime has no client authentication configured.
const errNoClientAuth = "this runtime has no client token configured, so its client API answers only requests from this machine; " +
	"give it a client token (rap serve: RAP_TOKEN or a tokens file; a Go program: Config.ClientAuth) and send it as Authorization: Bearer TOKEN"

// clientAuth returns next (the whole handler, callbacks included) with the
// client API behind Options.ClientAuth, or, without one, refused to
// non-loopback addresses unless Options.InsecureClientAPI.
func (s *server) clientAuth(next http.Handler) http.Handler {
	var api http.Handler
	switch {
	case s.opts.ClientAuth != nil:
		api = s.opts.ClientAuth(next)
	case s.opts.InsecureClientAPI:
		return next
	default:
		api = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if !fromLoopback(req) {
				writeError(w, http.StatusForbidden, errNoClientAuth)
				return
			}
			next.ServeHTTP(w, req)
		})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if isPeerPath(req.URL.Path) {
			next.ServeHTTP(w, req)
			return
		}
		api.ServeHTTP(w, req)
	})
}

// fromLoopback reports whether req came from a loopback address. A
// request whose remote address cannot be read (a handler called without a
// network connection) is not.
func fromLoopback(req *http.Request) bool {
	host, _, err := net.SplitHostPort(req.RemoteAddr)
	if err != nil {
		host = req.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}
