package model

import (
	"net/http"
	"sync"
)

// MaxIdleConnsPerHost is how many idle connections to one model API the
// providers' default HTTP client keeps for reuse. net/http's default keeps
// two, so a runtime with more completions in flight than that opened a new
// connection (a TCP and, for a real API, a TLS handshake) for most of them
// (issue 11 item 4).
const MaxIdleConnsPerHost = 256

var (
	defaultClientOnce sync.Once
	defaultClient     *http.Client
)

// DefaultHTTPClient is the client a provider uses when it is given none:
// http.DefaultTransport's settings (proxy from the environment, timeouts,
// HTTP/2) with MaxIdleConnsPerHost idle connections kept per host. All
// providers share it, so their connections are pooled once per process.
func DefaultHTTPClient() *http.Client {
	defaultClientOnce.Do(func() {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = MaxIdleConnsPerHost
		if t.MaxIdleConns != 0 && t.MaxIdleConns < 4*MaxIdleConnsPerHost {
			t.MaxIdleConns = 4 * MaxIdleConnsPerHost
		}
		defaultClient = &http.Client{Transport: t}
	})
	return defaultClient
}
