package memory

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/dirgate/dirgate"
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
		if dirgate.IsDNProperty(name) {
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
