package translate

import (
	"regexp"
	"strings"
	"testing"
)

// FuzzKnownPatterns: each hand-written matcher decides as Go's regexp (which OPA's
// regex.match uses) does on any input.
func FuzzKnownPatterns(f *testing.F) {
	for _, s := range []string{"", `\`, `\\`, `\\\`, `cn=x\`, `cn=x\\`, "cn=\xff\\", `a\b\`, "\\\n\\"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for pat, match := range knownPatterns {
			if want := regexp.MustCompile(pat).MatchString(s); match(s) != want {
				t.Fatalf("pattern %q on %q: hand-written %v, regexp %v", pat, s, match(s), want)
			}
		}
	})
}

// FuzzEnvLower: the buffer-reusing lower-casing is strings.ToLower, and a result
// stays intact while another node lower-cases.
func FuzzEnvLower(f *testing.F) {
	for _, s := range []string{"", "CN=A,OU=B", "cn=a", "ÀB", "İ", "\xffA", "K\u212a"} {
		f.Add(s, "OTHER")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		e := (&Predicate{scratch: 2}).NewEnv()
		got := e.lower(0, a)
		want := strings.ToLower(a)
		_ = e.lower(1, b)
		if got != want {
			t.Fatalf("lower(%q) = %q, want %q", a, got, want)
		}
	})
}
