package policy

import (
	"regexp"
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
