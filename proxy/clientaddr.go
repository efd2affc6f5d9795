package proxy

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// remoteAddr is the default client address (Config.ClientAddr): the connection's
// peer, an IPv6 peer by its /64 since one host commonly holds a whole /64.
func remoteAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	return clientKey(a)
}

// clientKey names an address for the throttle: IPv4 as it is, IPv6 by its /64 (one
// host usually owns a whole /64).
func clientKey(a netip.Addr) string {
	if a = a.Unmap(); a.Is6() {
		p, _ := a.WithZone("").Prefix(64)
		return p.String()
	}
	return a.String()
}

// ForwardedClientAddr returns a Config.ClientAddr for a gateway behind proxies: when
// the connection comes from one of trusted, the client is the right-most address of
// X-Forwarded-For that is not itself trusted (the left-most entries are whatever the
// client chose to send). Connections from anywhere else are named by their own
// address, so an untrusted client cannot pick its throttle key.
func ForwardedClientAddr(trusted []netip.Prefix) func(*http.Request) string {
	isTrusted := func(a netip.Addr) bool {
		for _, p := range trusted {
			if p.Contains(a.Unmap()) {
				return true
			}
		}
		return false
	}
	return func(r *http.Request) string {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			host = r.RemoteAddr
		}
		peer, err := netip.ParseAddr(host)
		if err != nil || !isTrusted(peer) {
			return remoteAddr(r)
		}
		hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
		for i := len(hops) - 1; i >= 0; i-- {
			a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
			if err != nil {
				break // a malformed hop: stop at the last proxy we trust
			}
			if !isTrusted(a) {
				return clientKey(a)
			}
		}
		return clientKey(peer)
	}
}
