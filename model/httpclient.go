package model

import (
	"net/http"
	"sync"
)

// MaxIdleConnsPerHost is how many idle connections to one model API the
// providers' default HTTP client keeps for reuse. net/http's default keeps
// two, so a runtime with more completions in flight than that opened a new
// connection (a TCP and, for a real API, a TLS handshake) for most of them.
const MaxIdleConnsPerHost = 256

// WriteBufferSize is the write buffer of each connection of the
// providers' default HTTP client (net/http's default is 4 KiB). A request
// body is the whole conversation, often tens of KiB; with a buffer that
// holds it, an HTTP/1.1 request goes out in one write, and net/http does
// not allocate a 32 KiB copy buffer for each body larger than its buffer
// (it copies a body of known length through an io.LimitReader, which
// hides the body's WriteTo). The cost is this much memory per open
// connection, at most MaxIdleConnsPerHost idle ones per host: 8 MiB for
// 256. HTTP/2 connections do not use it.
const WriteBufferSize = 32 << 10

var (
	defaultClientOnce sync.Once
	defaultClient     *http.Client
)

// DefaultHTTPClient is the client a provider uses when it is given none:
// http.DefaultTransport's settings (proxy from the environment, timeouts,
// HTTP/2) with MaxIdleConnsPerHost idle connections kept per host and a
// WriteBufferSize write buffer per connection. All
// providers share it, so their connections are pooled once per process.
func DefaultHTTPClient() *http.Client {
	defaultClientOnce.Do(func() {
		base, ok := http.DefaultTransport.(*http.Transport)
		if !ok {
			// Replaced by the program (an HTTP mock, say): use it as is.
			defaultClient = &http.Client{}
			return
		}
		t := base.Clone()
		t.MaxIdleConnsPerHost = MaxIdleConnsPerHost
		t.WriteBufferSize = WriteBufferSize
		if t.MaxIdleConns != 0 && t.MaxIdleConns < 4*MaxIdleConnsPerHost {
			t.MaxIdleConns = 4 * MaxIdleConnsPerHost
		}
		defaultClient = &http.Client{Transport: t}
	})
	return defaultClient
}
