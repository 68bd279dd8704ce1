package main

import (
	"net"
	"strings"
	"testing"
)

// A server listening on every interface prints URLs that work: loopback
// for this machine and this machine's own addresses for others, never the
// unspecified address.
func TestListenURLsAreUsable(t *testing.T) {
	for _, tc := range []struct {
		addr      string
		wantLocal string
	}{
		{"0.0.0.0:8080", "http://127.0.0.1:8080"},
		{"[::]:8080", "http://127.0.0.1:8080"},
		{"127.0.0.1:9000", "http://127.0.0.1:9000"},
		{"192.0.2.7:9000", "http://192.0.2.7:9000"},
	} {
		tcp, err := net.ResolveTCPAddr("tcp", tc.addr)
		if err != nil {
			t.Fatal(err)
		}
		local, others := listenURLs("http", tcp)
		if local != tc.wantLocal {
			t.Errorf("%s: local URL %q, want %q", tc.addr, local, tc.wantLocal)
		}
		for _, u := range append(others, local) {
			if strings.Contains(u, "0.0.0.0") || strings.Contains(u, "[::]") {
				t.Errorf("%s: printed %q, which works on no machine", tc.addr, u)
			}
		}
		if !strings.HasPrefix(tc.addr, "0.0.0.0") && !strings.HasPrefix(tc.addr, "[::]") && len(others) > 0 {
			t.Errorf("%s: other URLs %q for a server on one address", tc.addr, others)
		}
	}
}
