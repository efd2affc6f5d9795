package ldapentry

import (
	"testing"

	"github.com/dirgate/dirgate"
)

// dnSamples are DNs that plainDNNames reads (plain: true) and DNs that it must leave
// to ParseDN: escapes, quotes, multi-valued RDNs, spaces ParseDN trims, '#' values,
// invalid types, ';' separators, empty values and RDNs.
var dnSamples = []struct {
	dn    string
	plain bool
}{
	{"CN=Hugo Helpdesk,OU=IT,OU=Staff,DC=corp,DC=example,DC=com", true},
	{"CN=Groß,DC=beispiel,DC=de", true},
	{"cn=x,dc=Corp,Dc=COM", true},
	{"CN=Schema,CN=Configuration,O=x", true},
	{"DC=host,DC=corp.com,CN=MicrosoftDNS,DC=DomainDnsZones,DC=corp,DC=com", true},
	{"DC=com", true},
	{"2.5.4.3=a,DC=x", true},
	{"CN=a(b)&c's,DC=x", true},
	{`CN=Smith\, John,OU=Users,DC=corp,DC=com`, false},
	{`CN=J\C3\BCrgen,DC=x`, false},
	{"CN=a+UID=b,DC=x", false},
	{"CN=#0403616263,DC=x", false},
	{"CN= a,DC=x", false},
	{"CN=a ,DC=x", false},
	{"CN=a, DC=x", false},
	{"CN =a,DC=x", false},
	{"cn=x;dc=a", false},
	{"CN=a=b,DC=x", false},
	{"CN=,DC=x", false},
	{"CN=a,,DC=x", false},
	{"CN=a,", false},
	{"=a,DC=x", false},
	{"c_n=a,DC=x", false},
	{`CN=a"b,DC=x`, false},
	{"CN=a\x00b,DC=x", false},
	{"CN=\xff,DC=x", false},
	{"", false},
	{"CN", false},
}

func TestPlainDNNames(t *testing.T) {
	for _, tt := range dnSamples {
		display, domain, ok := plainDNNames(tt.dn)
		if ok != tt.plain {
			t.Errorf("plainDNNames(%q): ok %v, want %v", tt.dn, ok, tt.plain)
			continue
		}
		if ok {
			checkPlainDNNames(t, tt.dn, display, domain)
		}
	}
}

// FuzzPlainDNNames holds the shortcut to ParseDN: whatever it reads, ParseDN accepts
// and gives the same leaf value and domain name for; and dnNames, shortcut or not,
// answers as ParseDN does.
func FuzzPlainDNNames(f *testing.F) {
	for _, s := range dnSamples {
		f.Add(s.dn)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if display, domain, ok := plainDNNames(s); ok {
			checkPlainDNNames(t, s, display, domain)
		}
		display, domain, err := dnNames(s)
		d, perr := dirgate.ParseDN(s)
		if (err == nil) != (perr == nil) {
			t.Fatalf("dnNames(%q) error %v, ParseDN error %v", s, err, perr)
		}
		if perr == nil && (display != d.RDNValue() || domain != d.DomainName()) {
			t.Fatalf("dnNames(%q) = %q, %q; ParseDN gives %q, %q", s, display, domain, d.RDNValue(), d.DomainName())
		}
	})
}

func checkPlainDNNames(t *testing.T, s, display, domain string) {
	t.Helper()
	d, err := dirgate.ParseDN(s)
	if err != nil {
		t.Fatalf("plainDNNames read %q, which ParseDN rejects: %v", s, err)
	}
	if display != d.RDNValue() || domain != d.DomainName() {
		t.Fatalf("plainDNNames(%q) = %q, %q; ParseDN gives %q, %q", s, display, domain, d.RDNValue(), d.DomainName())
	}
}

// BenchmarkDNNames is what ToObject spends on a member's DN: the shortcut against
// the full parse it replaces.
func BenchmarkDNNames(b *testing.B) {
	const dn = "CN=Load User 12345,OU=Staff,DC=corp,DC=example,DC=com"
	b.Run("dnNames", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := dnNames(dn); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ParseDN", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			d, err := dirgate.ParseDN(dn)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = d.RDNValue(), d.DomainName()
		}
	})
}

// containsSamples: a base and DNs that ContainsPlain decides or leaves to ParseDN.
var containsSamples = []struct {
	base, dn     string
	contains, ok bool
}{
	{"DC=corp,DC=example,DC=com", "CN=u1,OU=large,DC=corp,DC=example,DC=com", true, true},
	{"DC=corp,DC=example,DC=com", "cn=u1,dc=CORP,dc=example,dc=com", true, true},
	{"DC=corp,DC=example,DC=com", "DC=corp,DC=example,DC=com", true, true},
	{"dc=corp, dc=example, dc=com", "CN=u1,DC=corp,DC=example,DC=com", true, true},
	{"DC=corp,DC=example,DC=com", "CN=u1,DC=xcorp,DC=example,DC=com", false, true},
	{"DC=corp,DC=example,DC=com", "CN=u1,DC=other,DC=com", false, true},
	{"DC=corp,DC=example,DC=com", "DC=example,DC=com", false, true},
	{"OU=a\\,b,DC=com", "CN=x,OU=a\\,b,DC=com", false, false},
	{"DC=example,DC=com", "CN=x,OU=a\\,DC=example,DC=com", false, false},
	{"DC=corp,DC=com", "CN=Groß,DC=corp,DC=com", false, false},
	{"DC=corp,DC=com", "CN=a+UID=b,DC=corp,DC=com", false, false},
	{"DC=corp,DC=com", "CN=a, DC=corp,DC=com", false, false},
}

func TestContainsPlain(t *testing.T) {
	for _, tt := range containsSamples {
		contains, ok := ContainsPlain(dirgate.MustParseDN(tt.base), tt.dn)
		if contains != tt.contains || ok != tt.ok {
			t.Errorf("ContainsPlain(%q, %q) = %v, %v; want %v, %v", tt.base, tt.dn, contains, ok, tt.contains, tt.ok)
		}
		checkContainsPlain(t, tt.base, tt.dn)
	}
}

// FuzzContainsPlain holds ContainsPlain to the parser: whatever it decides, ParseDN
// accepts and EqualFold or IsDescendantOf decides the same.
func FuzzContainsPlain(f *testing.F) {
	for _, tt := range containsSamples {
		f.Add(tt.base, tt.dn)
	}
	f.Fuzz(checkContainsPlain)
}

func checkContainsPlain(t *testing.T, base, s string) {
	b, err := dirgate.ParseDN(base)
	if err != nil {
		return
	}
	contains, ok := ContainsPlain(b, s)
	if !ok {
		return
	}
	d, err := dirgate.ParseDN(s)
	if err != nil {
		t.Fatalf("ContainsPlain decided %q, which ParseDN rejects: %v", s, err)
	}
	if want := d.EqualFold(b) || d.IsDescendantOf(b); contains != want {
		t.Fatalf("ContainsPlain(%q, %q) = %v, ParseDN says %v", base, s, contains, want)
	}
}
