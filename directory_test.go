package dirgate_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/dirgate/dirgate"
)

func TestNormalizeProperties(t *testing.T) {
	tests := []struct {
		name string
		in   []string
		want []string
	}{
		// docs/compatibility.md, "Directory objects": keys are the requested names in
		// lower case.
		{"lower-cased", []string{"accountExpires", "department"}, []string{"accountexpires", "department"}},
		// Each name once, in a stable order, so equal requests share a cache key.
		{"sorted and deduplicated", []string{"mail", "Department", "MAIL", "department"}, []string{"department", "mail"}},
		{"hyphen and digits", []string{"msDS-UserPasswordExpiryTimeComputed", "extensionAttribute1"}, []string{"extensionattribute1", "msds-userpasswordexpirytimecomputed"}},
		// Numeric OIDs are attribute names too.
		{"numeric OID", []string{"2.5.4.3"}, []string{"2.5.4.3"}},
		// A single 0 is a number, not zero padding.
		{"OID with zero arc", []string{"0.9.2342.19200300.100.1.1"}, []string{"0.9.2342.19200300.100.1.1"}},
		{"none", nil, []string{}},
		{"at the count limit", names(dirgate.MaxProperties), names(dirgate.MaxProperties)},
		{"at the length limit", []string{"a" + strings.Repeat("b", dirgate.MaxPropertyNameLength-1)}, []string{"a" + strings.Repeat("b", dirgate.MaxPropertyNameLength-1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := dirgate.NormalizeProperties(tt.in)
			if err != nil {
				t.Fatalf("NormalizeProperties(%q): %v", tt.in, err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// names returns n distinct valid names in sorted order.
func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("attr%03d", i)
	}
	return out
}

func TestNormalizePropertiesRejects(t *testing.T) {
	tests := []struct {
		name string
		in   []string
		want string // a fragment of the client-facing message
	}{
		{"empty name", []string{"mail", ""}, "empty property name"},
		// docs/api.md, "GET parameters": no whitespace.
		{"space", []string{"mail "}, "not an LDAP attribute name"},
		// Options would change how the upstream reads the directory.
		{"range option", []string{"member;range=0-10"}, "not an LDAP attribute name"},
		{"binary option", []string{"objectGUID;binary"}, "not an LDAP attribute name"},
		{"starts with digit then letter", []string{"1abc"}, "not an LDAP attribute name"},
		{"starts with hyphen", []string{"-x"}, "not an LDAP attribute name"},
		{"OID trailing dot", []string{"2.5.4."}, "not an LDAP attribute name"},
		{"OID double dot", []string{"2..5"}, "not an LDAP attribute name"},
		// RFC 4512 numbers have no leading zeros; "2.5.4.03" would alias "2.5.4.3".
		{"OID leading zero", []string{"2.5.4.03"}, "not an LDAP attribute name"},
		{"OID zero padded", []string{"00"}, "not an LDAP attribute name"},
		{"wildcard", []string{"*"}, "not an LDAP attribute name"},
		{"operational all", []string{"+"}, "not an LDAP attribute name"},
		{"non-ASCII", []string{"mäil"}, "not an LDAP attribute name"},
		{"too long", []string{strings.Repeat("a", dirgate.MaxPropertyNameLength+1)}, "longer than"},
		// The count is checked before deduplication: the bound is on work, not on result.
		{"too many", names(dirgate.MaxProperties + 1), "more than"},
		{"too many duplicates", slices.Repeat([]string{"mail"}, dirgate.MaxProperties+1), "more than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := dirgate.NormalizeProperties(tt.in)
			if err == nil {
				t.Fatalf("NormalizeProperties(%q) = %q, want an error", tt.in, got)
			}
			if dirgate.ErrorCode(err) != dirgate.EINVALID || !strings.Contains(dirgate.ErrorMessage(err), tt.want) {
				t.Errorf("error %v, want EINVALID containing %q", err, tt.want)
			}
		})
	}
}

// FuzzNormalizeProperties feeds a comma-separated list, as the query parameter
// carries it, and checks the result: lower-case, strictly increasing, bounded, and a
// fixed point of normalisation.
func FuzzNormalizeProperties(f *testing.F) {
	for _, s := range []string{"mail,Department", "accountExpires,accountexpires", "2.5.4.3,cn", "member;range=0-1", "a,,b", "a b", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		in := strings.Split(s, ",")
		got, err := dirgate.NormalizeProperties(in)
		if err != nil {
			if dirgate.ErrorCode(err) != dirgate.EINVALID {
				t.Fatalf("NormalizeProperties(%q): code %q", s, dirgate.ErrorCode(err))
			}
			return
		}
		if len(got) == 0 || len(got) > dirgate.MaxProperties || len(got) > len(in) {
			t.Fatalf("NormalizeProperties(%q) = %q", s, got)
		}
		for i, n := range got {
			if n == "" || n != strings.ToLower(n) || len(n) > dirgate.MaxPropertyNameLength {
				t.Fatalf("NormalizeProperties(%q): bad name %q", s, n)
			}
			if strings.ContainsAny(n, " ;,*+=()\\") {
				t.Fatalf("NormalizeProperties(%q): name %q could change an LDAP request", s, n)
			}
			if i > 0 && got[i-1] >= n {
				t.Fatalf("NormalizeProperties(%q) = %q: not strictly increasing", s, got)
			}
			if !slices.ContainsFunc(in, func(x string) bool { return strings.EqualFold(x, n) }) {
				t.Fatalf("NormalizeProperties(%q) invented %q", s, n)
			}
		}
		again, err := dirgate.NormalizeProperties(got)
		if err != nil || !slices.Equal(again, got) {
			t.Fatalf("NormalizeProperties is not idempotent on %q: %q, %v", got, again, err)
		}
	})
}
