package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"

	"github.com/gorap/gorap/runtime"
)

// inProcessHosts are the tool servers "rap serve" runs inside its own
// process for bridged config entries (mcp_server, http_mcp_server,
// otc_server, tools_json), by host name. The runtime reaches each at
// http://HOST, a name under the reserved .invalid domain that never
// resolves, through a transport that calls the server's handler directly:
// no port is opened, so no other process can invoke a bridged tool.
type inProcessHosts map[string]http.Handler

// hostLabel matches names usable as they are in an in-process host name.
var hostLabel = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`)

// add serves h at a host made of name (or, when name is not a usable host
// label or is taken, of kind and a number) and kind, such as
// "github.otc.rap.invalid", and returns its base URL.
func (m inProcessHosts) add(kind, name string, h http.Handler) string {
	host := name + "." + kind + ".rap.invalid"
	for i := 2; !hostLabel.MatchString(name) || m[host] != nil; i++ {
		name = kind + "-" + strconv.Itoa(i)
		host = name + "." + kind + ".rap.invalid"
	}
	m[host] = h
	return "http://" + host
}

// client returns hc (or a default client) with a transport that serves the
// in-process hosts and sends everything else on.
func (m inProcessHosts) client(hc *http.Client) *http.Client {
	if len(m) == 0 {
		return hc
	}
	var c http.Client
	if hc != nil {
		c = *hc
	}
	next := c.Transport
	if next == nil {
		next = runtime.NewTransport()
	}
	c.Transport = inProcessTransport{hosts: m, next: next}
	return &c
}

// inProcessTransport serves requests for the in-process hosts by calling
// their handlers directly.
type inProcessTransport struct {
	hosts inProcessHosts
	next  http.RoundTripper
}

func (t inProcessTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	h, ok := t.hosts[req.URL.Host]
	if !ok {
		return t.next.RoundTrip(req)
	}
	// Served without a listener: the request has no local address, even
	// when the caller's context carries one of the runtime's own server
	// (a tool server judges requests by it; see rap.Server.ServeHTTP).
	r := req.Clone(context.WithValue(req.Context(), http.LocalAddrContextKey, nil))
	r.Host = req.URL.Host
	if r.URL.Path == "" {
		r.URL.Path = "/"
	}
	r.RemoteAddr = "127.0.0.1:0"
	r.RequestURI = req.URL.RequestURI()
	if r.Body == nil {
		r.Body = http.NoBody
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	resp := rec.Result()
	resp.Request = req
	return resp, nil
}
