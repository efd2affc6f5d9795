package translate

import (
	"encoding/json"
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

// FuzzAsJSON: the translator reads strings as encoding/json renders them.
func FuzzAsJSON(f *testing.F) {
	for _, s := range []string{"", "CN=a", "\xff", "a\xe2\x82", "Zoë", "\xed\xa0\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var want string
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		if got := asJSON(s); got != want {
			t.Fatalf("asJSON(%q) = %q, encoding/json gives %q", s, got, want)
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
