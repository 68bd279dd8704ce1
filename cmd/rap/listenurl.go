package main

import (
	"net"
	"net/netip"
	"strconv"
)

// listenURLs returns the URL of a server listening on addr that works on
// this machine, and, when addr is the unspecified address (0.0.0.0 or
// [::]: every interface), the URLs other machines can use: one per
// non-loopback address of this machine's interfaces. A URL naming the
// unspecified address itself works nowhere else, so none is printed.
func listenURLs(scheme string, addr net.Addr) (local string, others []string) {
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return scheme + "://" + addr.String(), nil
	}
	port := strconv.Itoa(int(ap.Port()))
	if !ap.Addr().IsUnspecified() {
		return scheme + "://" + addr.String(), nil
	}
	// 127.0.0.1 for [::] too: Go listens on both families there, and an
	// IPv4 loopback exists on machines whose IPv6 is off.
	local = scheme + "://" + net.JoinHostPort("127.0.0.1", port)
	ifaddrs, _ := net.InterfaceAddrs()
	for _, a := range ifaddrs {
		pfx, err := netip.ParsePrefix(a.String())
		if err != nil {
			continue
		}
		ip := pfx.Addr()
		if ip.IsLoopback() || ip.IsLinkLocalUnicast() || (ap.Addr().Is4() && !ip.Is4()) {
			continue
		}
		others = append(others, scheme+"://"+net.JoinHostPort(ip.String(), port))
	}
	return local, others
}
