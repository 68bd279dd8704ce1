package rap

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// maxWarnedDestinations bounds the destinations a Sender remembers having
// warned about, so that callers naming many URLs cannot grow it.
const maxWarnedDestinations = 1024

// parseOrigins normalises SenderOptions.HeaderOrigins. haveHeader says
// whether headers are configured: then at least one origin is required.
func parseOrigins(list []string, haveHeader bool) (map[string]bool, error) {
	origins := make(map[string]bool, len(list))
	for i, raw := range list {
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") ||
			u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return nil, fmt.Errorf("rap: HeaderOrigins[%d] (ServerOptions.CallbackOrigins) %q is not an origin; write it as scheme://host:port, such as \"https://runtime.example.com:443\"", i, RedactURL(raw))
		}
		origins[origin(u)] = true
	}
	if haveHeader && len(origins) == 0 {
		return nil, fmt.Errorf("rap: callback headers are configured (SenderOptions.Header, ServerOptions.CallbackHeader) but no origin may receive them; " +
			"list the runtime's origins in SenderOptions.HeaderOrigins (ServerOptions.CallbackOrigins), such as \"https://runtime.example.com\", " +
			"so that credentials never reach a callback_url a caller chose")
	}
	return origins, nil
}

// origin returns u's origin as "scheme://host:port", lower case, with the
// scheme's default port filled in.
func origin(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// headerAllowed reports whether the configured headers may go to u.
func (s *Sender) headerAllowed(u *url.URL) bool { return s.origins[origin(u)] }

// warnWithheld logs, once per origin, that a callback went out without the
// configured headers.
func (s *Sender) warnWithheld(u *url.URL) {
	o := origin(u)
	s.warnMu.Lock()
	if s.warnedDest == nil {
		s.warnedDest = make(map[string]bool)
	}
	first := !s.warnedDest[o] && len(s.warnedDest) < maxWarnedDestinations
	if first {
		s.warnedDest[o] = true
	}
	s.warnMu.Unlock()
	if first {
		s.log.Warn("rap: callback to an origin not in HeaderOrigins (ServerOptions.CallbackOrigins); sent without the configured headers", "origin", o)
	}
}

// keptOnRedirect are the headers a redirect to another origin keeps; the
// rest may be credentials configured for the first origin.
var keptOnRedirect = map[string]bool{
	"Content-Type":       true,
	"Content-Length":     true,
	IdempotencyKeyHeader: true,
	"User-Agent":         true,
	"Accept-Encoding":    true,
}

// stripConfiguredHeaders deletes every header but keptOnRedirect.
func stripConfiguredHeaders(h http.Header) {
	for k := range h {
		if !keptOnRedirect[http.CanonicalHeaderKey(k)] {
			delete(h, k)
		}
	}
}

// Destination returns the part of a callback URL that names the server
// receiving it: the URL up to the end of its host and port, as written
// ("https://runtime.example.com:8443"). Sender.Run queues and delivers the
// callbacks of each destination separately, so that one slow or dead
// runtime delays only its own callbacks. A URL without "://" is its own
// destination.
func Destination(callbackURL string) string {
	i := strings.Index(callbackURL, "://")
	if i < 0 {
		return callbackURL
	}
	rest := callbackURL[i+3:]
	j := strings.IndexAny(rest, "/?#")
	if j < 0 {
		return callbackURL
	}
	return callbackURL[:i+3+j]
}
