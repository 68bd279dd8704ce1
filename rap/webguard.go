package rap

// This file keeps web pages from using a tool server through a browser:
// a tool server on 127.0.0.1 without a token runs its tools for whoever
// reaches it, and a browser reaches it for any page (internal/webguard
// says why each check is enough).

import (
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"

	"github.com/gorap/gorap/internal/webguard"
)

// newHostPolicy returns the host names a server answers to besides
// loopback names and IP addresses.
func newHostPolicy(o ServerOptions) *webguard.Policy {
	p := &webguard.Policy{
		Hosts:      append([]string(nil), o.AllowedHosts...),
		HostAdvice: "give the tool server a bearer token, or add the name to its allowed hosts (ServerOptions.AllowedHosts)",
	}
	if u, err := url.Parse(o.PublicURL); err == nil && u.Host != "" {
		p.Hosts = append(p.Hosts, u.Host)
	}
	return p
}

// refuseBrowser refuses what a web page could make a browser send:
//
//   - a request a browser marks as made for another site's page (an
//     Origin other than the request's own host, Origin: null,
//     Sec-Fetch-Site: cross-site or same-site);
//   - a POST whose Content-Type is other than application/json (a page may
//     send text/plain and form bodies to any site without asking it). A
//     POST without Content-Type is accepted, to be liberal with runtimes
//     that omit it: a browser always sends Origin with a POST, which the
//     first check judges;
//   - on a loopback address and without a BearerToken, a Host that is not
//     a loopback name, an IP address, PublicURL's host or one of
//     AllowedHosts: a page whose DNS name is rebound to 127.0.0.1 is
//     same-origin to the browser, but still names its own host. Servers
//     on other addresses trust their network (RAP TR-8), or use a token,
//     which no page has.
func (s *Server) refuseBrowser(r *http.Request) *webguard.Refusal {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if ref := (&webguard.Policy{}).CheckCrossSite(r, false); ref != nil {
			return ref
		}
		if ct := r.Header.Get("Content-Type"); ct != "" && ct != "application/json" {
			if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
				return &webguard.Refusal{Status: http.StatusUnsupportedMediaType, Message: fmt.Sprintf(
					"request refused: its Content-Type is %q; RAP messages are JSON: send Content-Type: application/json", ct)}
			}
		}
	}
	if s.opts.BearerToken == "" && onLoopback(r) {
		return s.hosts.CheckHost(r)
	}
	return nil
}

// onLoopback reports whether r arrived on a loopback address of this
// machine (false when served without a listener, as in process).
func onLoopback(r *http.Request) bool {
	addr, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return false
	}
	if ta, ok := addr.(*net.TCPAddr); ok {
		return ta.IP.IsLoopback()
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
