// Package webguard keeps web pages from driving a local HTTP server that a
// browser can reach: it refuses requests whose Host header names a server
// other than this one (DNS rebinding), requests a browser sends on behalf
// of another site (cross-site request forgery), and state-changing
// requests whose body a browser could send from a plain HTML form.
//
// The three checks, and why each is enough for what it guards against:
//
//   - Host. A page on evil.example whose DNS name is rebound to 127.0.0.1
//     makes requests that the browser treats as same-origin, so neither
//     CORS nor the checks below stop them; but the browser still sends
//     "Host: evil.example". Only names the operator allows pass. An IP
//     literal always passes: a rebinding attack needs a name the attacker
//     controls, and a page served from an IP address is a different origin
//     from the server's, which the second check catches. So does a name
//     under .invalid, which no resolver answers for.
//   - Cross-site. Browsers label every request with the site that made it
//     (Sec-Fetch-Site, and Origin on all but simple GETs). A request made
//     by another origin, or by an opaque one ("Origin: null"), is refused
//     unless that origin is explicitly allowed. Programs that are not
//     browsers send neither header and are not affected.
//   - Content type. A cross-site "simple" request can only carry
//     text/plain, form-encoded or multipart bodies; requiring
//     application/json on every state-changing request, bodyless ones
//     included, forces a CORS preflight that this server never approves.
package webguard

import (
	"cmp"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// Policy says which host names and origins a server accepts. The zero
// Policy accepts loopback names and IP literals only, and no cross-origin
// request.
type Policy struct {
	// Hosts are further host names (or host:port) that requests may name in
	// their Host header, compared without case and without a trailing dot.
	// "*.example.com" matches every subdomain of example.com; "*" alone
	// turns the host check off (for a reverse proxy that checks it).
	Hosts []string
	// Origins are further origins (scheme://host[:port]) allowed to make
	// cross-origin requests, such as a separate front end.
	Origins []string
	// HostAdvice and OriginAdvice end the messages of a refused host and a
	// refused origin: how this server's operator allows one (a flag, an
	// environment variable). Empty means generic advice.
	HostAdvice, OriginAdvice string
}

// Refusal is why a request was refused: the HTTP status to answer with
// and a message that says what to do.
type Refusal struct {
	Status  int
	Message string
}

func (r *Refusal) Error() string { return r.Message }

// CheckHost refuses a Host header that is neither a loopback name, an IP
// literal, nor one of p.Hosts.
func (p *Policy) CheckHost(r *http.Request) *Refusal {
	if p.HostAllowed(r.Host) {
		return nil
	}
	return &Refusal{Status: http.StatusForbidden, Message: fmt.Sprintf(
		"this server does not answer to the host name %q (a web page that rebinds its name to this address could otherwise use it); "+
			"open it by its address (such as http://127.0.0.1:PORT/) or %s", r.Host, cmp.Or(p.HostAdvice, "add the name to the server's allowed hosts"))}
}

// HostAllowed reports whether a Host header value is acceptable.
func (p *Policy) HostAllowed(hostport string) bool {
	if hostport == "" {
		return true // HTTP/1.0 without Host: not a browser
	}
	host := hostOnly(hostport)
	if host == "" {
		return false
	}
	// Names under .invalid never resolve (RFC 6761, section 6.4), so no
	// page can be served from one: programs use them to name servers they
	// reach by other means (rap serve's in-process tool servers).
	if ip, err := netip.ParseAddr(host); (err == nil && ip.Zone() == "") || host == "localhost" || strings.HasSuffix(host, ".invalid") {
		return true
	}
	full := strings.ToLower(strings.TrimSuffix(hostport, "."))
	for _, h := range p.Hosts {
		h = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(h), "."))
		switch {
		case h == "*":
			return true
		case strings.HasPrefix(h, "*."):
			if strings.HasSuffix(host, h[1:]) {
				return true
			}
		case h == host || h == full:
			return true
		}
	}
	return false
}

// hostOnly returns the lower-cased host of a Host header value, without
// port, brackets or trailing dot; "" when it is malformed.
func hostOnly(hostport string) string {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	} else if strings.HasPrefix(hostport, "[") && strings.HasSuffix(hostport, "]") {
		host = hostport[1 : len(hostport)-1]
	} else if _, err := netip.ParseAddr(hostport); strings.Contains(hostport, ":") && err != nil {
		return ""
	}
	return strings.ToLower(strings.TrimSuffix(host, "."))
}

// CheckCrossSite refuses a request a browser made for another origin:
// one whose Origin header is neither this server's (the request's Host)
// nor one of p.Origins, or that says Sec-Fetch-Site: cross-site or
// same-site without such an Origin. Navigations to a page (GET with
// Sec-Fetch-Mode: navigate) pass when allowNavigate is true: following a
// link to the web UI from elsewhere is harmless.
func (p *Policy) CheckCrossSite(r *http.Request, allowNavigate bool) *Refusal {
	origin := r.Header.Get("Origin")
	if origin != "" {
		if p.originAllowed(origin, r.Host) {
			return nil
		}
		return &Refusal{Status: http.StatusForbidden, Message: fmt.Sprintf(
			"cross-origin request refused: a page at %q may not use this server; "+
				"use the web UI this server serves, or %s", origin, cmp.Or(p.OriginAdvice, "add that origin to the server's allowed origins"))}
	}
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "", "same-origin", "none":
		return nil
	default:
		if allowNavigate && r.Method == http.MethodGet && r.Header.Get("Sec-Fetch-Mode") == "navigate" {
			return nil
		}
		return &Refusal{Status: http.StatusForbidden, Message: fmt.Sprintf(
			"cross-site request refused (Sec-Fetch-Site: %s): only this server's own pages and programs that are not browsers may use it", site)}
	}
}

// originAllowed reports whether origin is the request's own (its host and
// port equal the Host header; the scheme is not compared, since a TLS
// proxy in front makes them differ) or one of p.Origins.
func (p *Policy) originAllowed(origin, host string) bool {
	for _, o := range p.Origins {
		if strings.EqualFold(strings.TrimSuffix(strings.TrimSpace(o), "/"), origin) {
			return true
		}
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false // "null", file:, malformed
	}
	if strings.EqualFold(u.Host, host) {
		return true
	}
	// A default port may be written on one side only.
	def := map[string]string{"http": "80", "https": "443"}[u.Scheme]
	oh, op := splitPort(u.Host, def)
	hh, hp := splitPort(host, def)
	return strings.EqualFold(oh, hh) && op == hp
}

func splitPort(hostport, def string) (string, string) {
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		return strings.TrimSuffix(h, "."), p
	}
	return strings.TrimSuffix(strings.Trim(hostport, "[]"), "."), def
}

// CheckJSON refuses a state-changing request (any method but GET, HEAD
// and OPTIONS) whose Content-Type is not application/json, or
// application/jsonl (a session archive), bodyless ones included. Neither
// is a type an HTML form can send.
func CheckJSON(r *http.Request) *Refusal {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return nil
	}
	ct := r.Header.Get("Content-Type")
	if ct == "application/json" {
		return nil // what every client of ours sends: no parsing
	}
	if mt, _, err := mime.ParseMediaType(ct); err == nil && (mt == "application/json" || mt == "application/jsonl") {
		return nil
	}
	if ct == "" {
		ct = "none"
	}
	return &Refusal{Status: http.StatusUnsupportedMediaType, Message: fmt.Sprintf(
		"%s requests must say Content-Type: application/json (this one has %s), even without a body: "+
			"it keeps web pages from sending them", r.Method, ct)}
}
