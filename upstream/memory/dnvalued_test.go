package memory

import (
	"bytes"
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/adattr"
)

// TestNamedOnlyProperties: the attributes whose values name loaded entries, however
// spelt, are named-only, beyond the built-in list (which member, memberOf and
// managedBy are on) and but for the object's own DN; values that only look like DNs
// do not make an attribute named-only. A reload adds the new file's to them and
// keeps the previous file's.
func TestNamedOnlyProperties(t *testing.T) {
	data := entry("CN=G,"+base, 1, "objectClass: group", sid(1000), "member: CN=U1,"+base, "managedBy: CN=U1,"+base,
		"distinguishedName: CN=G,"+base, "msExchCoManagedObjectsBL: cn=u1,dc=T,dc=example") +
		entry("CN=U1,"+base, 2, "objectClass: user", sid(1001), "memberOf: CN=G,"+base,
			"description: CN=Nobody,"+base, "info: a=b", "msExchArchiveLink: CN=G,"+base, "mail: u1@t.example")
	d := load(t, data)
	want := []string{"msexcharchivelink", "msexchcomanagedobjectsbl"}
	if got := slices.Sorted(maps.Keys(d.NamedOnlyProperties())); !slices.Equal(got, want) {
		t.Fatalf("NamedOnlyProperties = %v, want %v", got, want)
	}
	for _, name := range want {
		if adattr.IsDNProperty(name) {
			t.Fatalf("%s is on the built-in list: the test needs one that is not", name)
		}
	}

	path := filepath.Join(t.TempDir(), "dir.ldif")
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	writeLater(t, path, []byte(entry("CN=G,"+base, 1, "objectClass: group", sid(1000), "seeAlsoLink: CN=G,"+base)))
	if err := d.reloadIfChanged(); err != nil {
		t.Fatal(err)
	}
	if got, want := slices.Sorted(maps.Keys(d.NamedOnlyProperties())), append(want, "seealsolink"); !slices.Equal(got, want) {
		t.Errorf("after a reload: %v, want %v", got, want)
	}
	if _, err := d.Lookup(context.Background(), dirgate.MustParseIdentifier("CN=U1,"+base), nil); err == nil {
		t.Error("not reloaded")
	}
}

// sidValue is an LDIF line giving attribute name the binary SID domain-rid, as an
// export writes a SID-syntax attribute.
func sidValue(name, domain string, rid int) string {
	return name + strings.TrimPrefix(sidOf(domain, rid), "objectSid")
}

// TestNamedOnlyPropertiesBySIDAndDNBinary: an attribute with a value naming a loaded
// entry by its objectSid, binary (a computer's creator, as mS-DS-CreatorSID holds
// it) or in string form in either letter case, or by the DN at the end of a
// DN-Binary or DN-String value (B:<n>:<hex>:<DN>, S:<n>:<text>:<DN>, the text's
// count in characters), is named-only. SIDs and DN-Binary values naming no loaded
// entry, malformed counts, SIDs naming their own entry (a foreign security
// principal's cn is its SID, also when another entry carries the same well-known
// SID), and the entry's own objectSid and sIDHistory (covered: they name the entry
// itself) do not make an attribute named-only.
func TestNamedOnlyPropertiesBySIDAndDNBinary(t *testing.T) {
	const other = "S-1-5-21-9-9-9"
	data := entry("CN=G,"+base, 1, "objectClass: group", sid(1000), "member: CN=U1,"+base,
		"extOwnerSid: S-1-5-21-1-2-3-1001", "extRefs: B:8:0000000A:CN=U1,"+base, "extNone: B:4:00FF:CN=Nobody,"+base) +
		entry("CN=U1,"+base, 2, "objectClass: user", sid(1001), sidValue("sIDHistory", "S-1-5-21-1-2-3", 1000),
			"extLowerSid: s-1-5-21-1-2-3-1000", "extText: S:6:grüße!:CN=G,"+base, "extForeignSid: "+other+"-1000",
			"extBadCount: B:9:0000000A:CN=G,"+base, "extShortCount: S:99:x:CN=G,"+base, "extNotDN: B:2:00:not a dn") +
		entry("CN=PC1,"+base, 3, "objectClass: computer", sid(1002), sidValue("extCreatorSid", "S-1-5-21-1-2-3", 1001),
			sidValue("extUnknownSid", other, 1001), "extRID: 1001", "extSelfSid: S-1-5-21-1-2-3-1002") +
		entry("CN=S-1-5-11,"+base, 4, "objectClass: foreignSecurityPrincipal", "objectSid:: AQEAAAAAAAULAAAA", "cn: S-1-5-11") +
		entry("CN=S-1-5-11 copy,"+base, 5, "objectClass: foreignSecurityPrincipal", "objectSid:: AQEAAAAAAAULAAAA", "name: S-1-5-11")
	d := load(t, data)
	want := []string{"extcreatorsid", "extlowersid", "extownersid", "extrefs", "exttext"}
	if got := slices.Sorted(maps.Keys(d.NamedOnlyProperties())); !slices.Equal(got, want) {
		t.Fatalf("NamedOnlyProperties = %v, want %v", got, want)
	}
}

// TestDNOfDNBinary: the DN of a DN-Binary or DN-String value, and no DN of a value
// of another form.
func TestDNOfDNBinary(t *testing.T) {
	for _, tc := range []struct{ in, dn string }{
		{"B:8:0000000A:CN=U1,DC=x", "CN=U1,DC=x"},
		{"b:0::CN=U1,DC=x", "CN=U1,DC=x"},
		{"S:5:héllo:CN=a:b,DC=x", "CN=a:b,DC=x"},
		{"B:8:0000000A:", ""},
		{"B:9:0000000A:CN=U1,DC=x", "-"},
		{"B:1234567890:0:CN=x", "-"},
		{"B::0:CN=x", "-"},
		{"B:8", "-"},
		{"X:1:0:CN=x", "-"},
		{"CN=U1,DC=x", "-"},
	} {
		dn, ok := dnOfDNBinary([]byte(tc.in))
		if got := string(dn); !ok {
			got = "-"
		} else if got != tc.dn {
			t.Errorf("dnOfDNBinary(%q) = %q, want %q", tc.in, got, tc.dn)
		}
		if ok != (tc.dn != "-") {
			t.Errorf("dnOfDNBinary(%q) ok = %v", tc.in, ok)
		}
	}
}

// FuzzDNOfDNBinary: the DN-Binary parser never panics, and what it returns is a
// suffix of its input.
func FuzzDNOfDNBinary(f *testing.F) {
	for _, s := range []string{"B:8:0000000A:CN=U1,DC=x", "S:5:héllo:CN=a", "B:999999999:", "S:2:\xff\xfe:x"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		if dn, ok := dnOfDNBinary(v); ok && !bytes.HasSuffix(v, dn) {
			t.Fatalf("dnOfDNBinary(%q) = %q, not a suffix", v, dn)
		}
	})
}
