package dirgate_test

import (
	"strings"
	"testing"

	"github.com/go-ldap/ldap/v3"

	"github.com/dirgate/dirgate"
)

func TestDNEqualFold(t *testing.T) {
	tests := []struct {
		name string
		a, b string
		want bool
	}{
		// Directories compare DNs without regard to case.
		{"case", "CN=Sales,OU=Groups,DC=corp,DC=com", "cn=sales,ou=groups,dc=CORP,dc=com", true},
		// Spaces around separators are insignificant (RFC 4514 parsers drop them).
		{"spaces after commas", "CN=Sales, OU=Groups, DC=corp", "CN=Sales,OU=Groups,DC=corp", true},
		// \2C and \, are two spellings of one comma.
		{"escape spellings", `CN=Smith\2C John,DC=corp`, `cn=smith\, john,dc=corp`, true},
		// Non-ASCII given literally or hex-escaped, and folded.
		{"non-ASCII escape and fold", `CN=J\C3\9CRGEN,DC=corp`, "cn=jürgen,dc=corp", true},
		// A multi-valued RDN is a set: its order does not matter.
		{"multi-valued RDN order", "CN=a+UID=b,DC=corp", "UID=b+CN=a,DC=corp", true},
		// BER hex form of a value equals its string form.
		{"hex value form", "CN=#0403616263,DC=x", "CN=abc,DC=x", true},
		// Different depth.
		{"parent differs", "CN=Sales,OU=Groups,DC=corp", "CN=Sales,DC=corp", false},
		// The escaped comma is part of the value, not an RDN boundary.
		{"escaped comma is not a separator", `CN=a\,OU=b,DC=corp`, "CN=a,OU=b,DC=corp", false},
		// An escaped "=" in a value must not read like a type boundary.
		{"escaped equals", `CN=x\=y,DC=a`, `CN=x,DC=a`, false},
		// Significant (escaped) leading and trailing spaces are kept.
		{"escaped spaces", `CN=\ a\ ,DC=x`, "CN=a,DC=x", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := dirgate.MustParseDN(tt.a), dirgate.MustParseDN(tt.b)
			if got := a.EqualFold(b); got != tt.want {
				t.Errorf("%q EqualFold %q = %v, want %v (keys %q, %q)", tt.a, tt.b, got, tt.want, a.Key(), b.Key())
			}
			if got := b.EqualFold(a); got != tt.want {
				t.Errorf("EqualFold is not symmetric for %q, %q", tt.a, tt.b)
			}
			if got := a.Key() == b.Key(); got != tt.want {
				t.Errorf("keys %q and %q: equal %v, want %v", a.Key(), b.Key(), got, tt.want)
			}
			if a.String() != tt.a {
				t.Errorf("String() = %q, want the input %q", a.String(), tt.a)
			}
		})
	}
}

func TestDNIsDescendantOf(t *testing.T) {
	tests := []struct {
		name    string
		d, base string
		want    bool
	}{
		{"child", "CN=u,OU=Users,DC=corp,DC=com", "OU=Users,DC=corp,DC=com", true},
		{"grandchild, other case", "CN=u,OU=x,OU=Users,DC=corp,DC=com", "ou=users,dc=CORP,dc=com", true},
		{"domain root", "CN=u,DC=corp,DC=com", "DC=corp,DC=com", true},
		// Strictly below: a DN is not its own descendant.
		{"self", "OU=Users,DC=corp,DC=com", "OU=Users,DC=corp,DC=com", false},
		{"ancestor is not descendant", "DC=corp,DC=com", "OU=Users,DC=corp,DC=com", false},
		// A sibling whose name ends like the base's leaf RDN value.
		{"sibling with suffix name", "CN=u,OU=MoreUsers,DC=corp,DC=com", "OU=Users,DC=corp,DC=com", false},
		// Regression: the escaped comma in "x\,OU=y" once read as an RDN boundary, making
		// a direct child of DC=com look like a descendant of OU=y,DC=com.
		{"escaped comma in leaf", `CN=x\,OU=y,DC=com`, "OU=y,DC=com", false},
		{"escaped comma in base", `CN=u,OU=a\,b,DC=com`, `OU=a\2Cb,DC=com`, true},
		{"non-ASCII", "CN=u,OU=Bénévoles,DC=corp", `OU=B\C3\A9N\C3\A9VOLES,DC=corp`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, base := dirgate.MustParseDN(tt.d), dirgate.MustParseDN(tt.base)
			if got := d.IsDescendantOf(base); got != tt.want {
				t.Errorf("%q IsDescendantOf %q = %v, want %v", tt.d, tt.base, got, tt.want)
			}
		})
	}
}

func TestDNRDNValueAndDomainName(t *testing.T) {
	tests := []struct {
		name       string
		dn         string
		wantRDN    string
		wantDomain string
	}{
		// docs/compatibility.md, "Objects as the product renders them": displayName
		// is the RDN value, unescaped.
		{"escaped comma", `CN=Smith\, John,OU=Users,DC=corp,DC=example,DC=com`, "Smith, John", "corp.example.com"},
		{"hex escapes", `CN=J\C3\BCrgen,DC=corp,DC=com`, "Jürgen", "corp.com"},
		{"literal non-ASCII", "CN=Groß,DC=beispiel,DC=de", "Groß", "beispiel.de"},
		{"escaped plus and quote", `CN=a\+b \"c\",DC=x`, `a+b "c"`, "x"},
		{"escaped leading hash", `CN=\#1,DC=x`, "#1", "x"},
		// The domain keeps the letter case the DN has.
		{"domain case kept", "OU=x,DC=Corp,DC=COM", "x", "Corp.COM"},
		{"no DC", "CN=Schema,CN=Configuration,O=x", "Schema", ""},
		// Only the DC run at the root is the domain: a DNS record's own DC= RDNs are not.
		{"DC below a non-DC RDN", "DC=host,DC=corp.com,CN=MicrosoftDNS,DC=DomainDnsZones,DC=corp,DC=com", "host", "DomainDnsZones.corp.com"},
		{"only DCs", "DC=corp,DC=com", "corp", "corp.com"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := dirgate.MustParseDN(tt.dn)
			if got := d.RDNValue(); got != tt.wantRDN {
				t.Errorf("RDNValue = %q, want %q", got, tt.wantRDN)
			}
			if got := d.DomainName(); got != tt.wantDomain {
				t.Errorf("DomainName = %q, want %q", got, tt.wantDomain)
			}
		})
	}
}

func TestParseDNRejects(t *testing.T) {
	tests := []struct {
		name string
		in   string
	}{
		{"empty", ""},
		{"spaces only", "   "},
		{"no type", "=a,DC=x"},
		{"no value pair", "CN"},
		{"bad escape", `CN=a\zz`},
		{"trailing backslash", `CN=a\`},
		{"unescaped quote", `CN=a"b`},
		// AD's <GUID=...> base DN is not an RFC 4514 DN.
		{"AD GUID form", "<GUID=0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0>"},
		// Regression: an escaped "=" or "," in a type made cn\=x=y and CN=x\=y share a key.
		{"escaped equals in type", `cn\=x=y,DC=a`},
		{"escaped comma in type", `c\,n=a,DC=x`},
		// Regression: \ff and \fe both lowered to U+FFFD and shared a key.
		{"value not UTF-8", `CN=\ff,DC=a`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if d, err := dirgate.ParseDN(tt.in); err == nil {
				t.Errorf("ParseDN(%q) = key %q, want an error", tt.in, d.Key())
			}
		})
	}
}

// FuzzParseDN checks the invariants the cache and policies rely on: the key is a DN
// that parses to the same key, EqualFold is reflexive, a DN is never its own
// descendant, and it descends from its parent.
func FuzzParseDN(f *testing.F) {
	for _, s := range []string{
		"CN=Smith\\, John,OU=Users,DC=corp,DC=com", "CN=a+UID=b,DC=x", "CN=#0403616263,DC=x",
		"CN=\\ a\\ ,DC=x", "CN=J\\C3\\BCrgen,DC=x", "cn=x\\=y;dc=a", "CN=x\\,OU=y,DC=com", "2.5.4.3=a",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := dirgate.ParseDN(s)
		if err != nil {
			return
		}
		if d.String() != s || d.Key() == "" || !d.EqualFold(d) || d.IsDescendantOf(d) {
			t.Fatalf("ParseDN(%q): raw %q key %q", s, d.String(), d.Key())
		}
		k, err := dirgate.ParseDN(d.Key())
		if err != nil {
			t.Fatalf("key %q of %q does not parse: %v", d.Key(), s, err)
		}
		if k.Key() != d.Key() || !k.EqualFold(d) {
			t.Fatalf("key %q of %q reparses to key %q", d.Key(), s, k.Key())
		}
		if p, ok := parentOf(s); ok {
			if !d.IsDescendantOf(p) || p.IsDescendantOf(d) {
				t.Fatalf("%q (key %q) and its parent %q (key %q) are not ordered", s, d.Key(), p.String(), p.Key())
			}
		}
		_ = d.RDNValue()
		_ = d.DomainName()
	})
}

// parentOf parses s without its leaf RDN, rebuilt as text from go-ldap's parse; false
// when s has a single RDN or the rebuilt text does not parse.
func parentOf(s string) (dirgate.DN, bool) {
	d, err := ldap.ParseDN(s)
	if err != nil || len(d.RDNs) < 2 {
		return dirgate.DN{}, false
	}
	var b strings.Builder
	for i, r := range d.RDNs[1:] {
		if i > 0 {
			b.WriteByte(',')
		}
		for j, a := range r.Attributes {
			if j > 0 {
				b.WriteByte('+')
			}
			b.WriteString(a.Type + "=" + ldap.EscapeDN(a.Value))
		}
	}
	p, err := dirgate.ParseDN(b.String())
	return p, err == nil
}
