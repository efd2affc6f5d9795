package proxy

import (
	"strings"
	"testing"
)

// FuzzNegotiate: any Accept-Encoding value gives one of the codings dirgate offers or
// identity, never panics, and picks a coding only when the header names it or "*".
func FuzzNegotiate(f *testing.F) {
	for _, s := range []string{"", "gzip", "zstd;q=0.5, gzip;q=0.5", "*;q=0", "identity;q=0, *", "gzip;q=1.0001",
		"x-gzip;q=0.", " , ;q=,", strings.Repeat("gzip,", 300)} {
		f.Add(s, "")
		f.Add(s, "zstd;q=0")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		fields := []string{a}
		if b != "" {
			fields = append(fields, b)
		}
		got := negotiate(fields)
		all := strings.ToLower(a + "," + b)
		switch got {
		case "":
		case encZstd, encGzip:
			if !strings.Contains(all, got) && !strings.Contains(all, "*") {
				t.Fatalf("negotiate(%q) = %q, which the header does not name", fields, got)
			}
		default:
			t.Fatalf("negotiate(%q) = %q", fields, got)
		}
		if again := negotiate(fields); again != got {
			t.Fatalf("negotiate(%q) gave %q then %q", fields, got, again)
		}
	})
}
