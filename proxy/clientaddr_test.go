package proxy

import (
	"net/http/httptest"
	"net/netip"
	"testing"
)

func TestRemoteAddr(t *testing.T) {
	tests := []struct {
		name   string
		remote string
		xff    string
		want   string
	}{
		{"IPv4", "192.0.2.7:5123", "", "192.0.2.7"},
		// X-Forwarded-For is client-controlled unless a trusted proxy sets it.
		{"forwarded header ignored", "192.0.2.7:5123", "203.0.113.9", "192.0.2.7"},
		// One host commonly holds a /64: counting per address would let it rotate.
		{"IPv6 by /64", "[2001:db8:1:2:aaaa::1]:443", "", "2001:db8:1:2::/64"},
		{"IPv6 same /64", "[2001:db8:1:2:bbbb::9]:443", "", "2001:db8:1:2::/64"},
		{"IPv6 zone dropped", "[fe80::1%eth0]:443", "", "fe80::/64"},
		{"IPv4-mapped IPv6 is IPv4", "[::ffff:192.0.2.7]:443", "", "192.0.2.7"},
		{"no port", "192.0.2.7", "", "192.0.2.7"},
		{"not an IP", "pipe", "", "pipe"},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tt.remote
		if tt.xff != "" {
			r.Header.Set("X-Forwarded-For", tt.xff)
		}
		if got := remoteAddr(r); got != tt.want {
			t.Errorf("%s: remoteAddr(%q) = %q, want %q", tt.name, tt.remote, got, tt.want)
		}
	}
}

func TestForwardedClientAddr(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("127.0.0.1/32")}
	addr := ForwardedClientAddr(trusted)
	tests := []struct {
		name   string
		remote string
		xff    []string
		want   string
	}{
		// Behind the ingress, each client is throttled on its own address.
		{name: "through a trusted proxy", remote: "10.1.2.3:5555", xff: []string{"203.0.113.7"}, want: "203.0.113.7"},
		// A client cannot choose its key by prepending addresses: the right-most
		// untrusted hop is taken.
		{name: "spoofed left-most entry", remote: "10.1.2.3:5555", xff: []string{"198.51.100.1, 203.0.113.7"}, want: "203.0.113.7"},
		{name: "chain of trusted proxies", remote: "127.0.0.1:1", xff: []string{"203.0.113.7", "10.9.9.9"}, want: "203.0.113.7"},
		// A caller inside the trusted range is itself skipped as a proxy: the entry
		// to its left names it (docs/auth.md, "Throttling", says so).
		{name: "trusted caller through a proxy", remote: "10.1.2.3:5555", xff: []string{"198.51.100.1, 10.5.5.5"}, want: "198.51.100.1"},
		// From an untrusted peer the header is ignored.
		{name: "untrusted peer", remote: "192.0.2.1:1", xff: []string{"203.0.113.7"}, want: "192.0.2.1"},
		{name: "no header", remote: "10.1.2.3:5555", want: "10.1.2.3"},
		{name: "malformed hop", remote: "10.1.2.3:5555", xff: []string{"203.0.113.7, nonsense"}, want: "10.1.2.3"},
		{name: "IPv6 client by /64", remote: "10.1.2.3:5555", xff: []string{"2001:db8::1"}, want: "2001:db8::/64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tt.remote
			for _, v := range tt.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := addr(r); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}
