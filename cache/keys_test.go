package cache

import (
	"strings"
	"testing"

	"github.com/dirgate/dirgate"
)

// TestKeysDoNotCollide: every input that must name a different entry gets a different
// key and check string; every spelling that names the same entry gets the same.
func TestKeysDoNotCollide(t *testing.T) {
	k := keys{prefix: "p:"}
	g1, g2 := "00000000-0000-0000-0000-0000000000a1", "00000000-0000-0000-0000-0000000000a2"
	type in struct {
		guid     string
		indirect bool
		props    []string
	}
	distinct := []in{
		{g1, false, nil},
		{g2, false, nil},
		// includeIndirect is part of the key.
		{g1, true, nil},
		// Properties are part of the key, and their boundaries are kept: "ab" is not
		// "a" then "b".
		{g1, false, []string{"ab"}},
		{g1, false, []string{"a", "b"}},
		{g1, false, []string{"a|b"}},
		{g1, false, []string{"1:a"}},
		{g1, false, []string{""}},
	}
	seen := map[string]in{}
	checks := map[string]in{}
	for _, x := range distinct {
		key, check := k.listing(x.guid, x.indirect, x.props)
		if prev, dup := seen[key]; dup {
			t.Errorf("%+v and %+v share key %s", x, prev, key)
		}
		if prev, dup := checks[check]; dup {
			t.Errorf("%+v and %+v share check %q", x, prev, check)
		}
		seen[key], checks[check] = x, x
		// The group's hash tag keeps the entry in its version's Cluster slot.
		if !strings.HasPrefix(key, "p:{"+x.guid+"}:") || !strings.HasPrefix(k.version(x.guid), "p:{"+x.guid+"}:") {
			t.Errorf("key %s or version %s lacks the group's hash tag", key, k.version(x.guid))
		}
	}
	if a, _ := k.listing(g1, false, nil); a == k.version(g1) {
		t.Error("a listing key equals the version key")
	}

	same := [][]string{
		// DNs the directory treats as equal: case and escaping.
		{"CN=Help Desk,OU=Groups,DC=corp,DC=example,DC=com", "cn=help desk,ou=groups,dc=corp,dc=example,dc=com", `CN=Help\20Desk,OU=Groups,DC=corp,DC=example,DC=com`},
		// GUID spellings.
		{"0a1b2c3d-0000-0000-0000-000000000001", "{0A1B2C3D-0000-0000-0000-000000000001}"},
	}
	for _, ids := range same {
		first, _ := k.lookup(dirgate.MustParseIdentifier(ids[0]))
		for _, id := range ids[1:] {
			if got, _ := k.lookup(dirgate.MustParseIdentifier(id)); got != first {
				t.Errorf("%s and %s have different lookup keys", ids[0], id)
			}
		}
	}
	// The same text as a GUID and as something else never shares a key.
	byGUID, _ := k.lookup(dirgate.MustParseIdentifier("0a1b2c3d-0000-0000-0000-000000000001"))
	bySID, _ := k.lookup(dirgate.MustParseIdentifier("S-1-5-21-1-2-3-500"))
	byDN, _ := k.lookup(dirgate.MustParseIdentifier("CN=0a1b2c3d-0000-0000-0000-000000000001"))
	if byGUID == bySID || byGUID == byDN {
		t.Error("identifier kinds share lookup keys")
	}
}

// TestCanonicalGUID: only the form GUIDFromBytes renders is put in keys; anything
// else (upper case, braces, hash-tag or key syntax) is not cached at all.
func TestCanonicalGUID(t *testing.T) {
	tests := []struct {
		name, guid string
		want       bool
	}{
		{"canonical", "0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9", true},
		{"upper case", "0A1B2C3D-4E5F-6071-8293-A4B5C6D7E8F9", false},
		{"braces", "{0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f}", false},
		{"hash tag inside", "0a1b2c3d-4e5f-6071-8293-a4b5c6d7e}{9", false},
		{"too short", "0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f", false},
		{"empty", "", false},
	}
	for _, tc := range tests {
		if got := canonicalGUID(tc.guid); got != tc.want {
			t.Errorf("%s: canonicalGUID(%q) = %v", tc.name, tc.guid, got)
		}
	}
}
