package rap

// This file owns the checks every RAP client applies to the URLs a tool
// server hands it in callback messages: an oauth auth_url is shown to
// people and a user_choice or user_input response_url is POSTed to, so
// neither may point anywhere a tool likes.

import (
	"net/url"
	"strings"
)

// CheckAuthURL returns what is wrong with an oauth auth_url, as a phrase
// that completes "auth_url ...", or "" when it is fine: it must be an
// absolute http:// or https:// URL with a host (RAP OA-1).
func CheckAuthURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "is not a valid URL"
	}
	if s := strings.ToLower(u.Scheme); s != "http" && s != "https" {
		return "must be an http:// or https:// URL"
	}
	if u.Host == "" {
		return "has no host"
	}
	return ""
}

// SameHostPort reports whether raw and endpoint name the same host and
// port (the scheme's default port when a URL names none). A client checks
// a response_url with it: the answer to a question goes to the tool
// server that asked it, not to a server of the tool's choosing. Either URL
// failing to parse reports false.
func SameHostPort(raw, endpoint string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	ep, err := url.Parse(endpoint)
	if err != nil || endpoint == "" {
		return false
	}
	h, p := HostPort(u)
	eh, epPort := HostPort(ep)
	return h == eh && p == epPort
}

// HostPort returns u's lower-case host name (without IPv6 brackets) and
// its port: the one u names, else 80 for http and 443 for https, else "".
func HostPort(u *url.URL) (host, port string) {
	host, port = strings.ToLower(u.Hostname()), u.Port()
	if port == "" {
		switch strings.ToLower(u.Scheme) {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return host, port
}
