package dirgate_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/ldapentry"
)

func TestParseIdentifier(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		wantKind  dirgate.IdentifierKind
		wantCanon string
	}{
		// The DN shape clients send (docs/api.md, "Identifiers").
		{"plain DN", "CN=Sales,OU=Groups,DC=corp,DC=example,DC=com", dirgate.KindDN, "CN=Sales,OU=Groups,DC=corp,DC=example,DC=com"},
		// "Smith, John" is the commonest RDN with an escaped comma; the DN stays as given.
		{"DN with escaped comma", `CN=Smith\, John,OU=Users,DC=corp,DC=com`, dirgate.KindDN, `CN=Smith\, John,OU=Users,DC=corp,DC=com`},
		// Hex-escaped UTF-8 as some clients send non-ASCII names.
		{"DN with hex escapes", `CN=J\C3\BCrgen,DC=corp,DC=com`, dirgate.KindDN, `CN=J\C3\BCrgen,DC=corp,DC=com`},
		// Non-ASCII given literally.
		{"DN with literal non-ASCII", "CN=Jürgen Groß,DC=corp,DC=com", dirgate.KindDN, "CN=Jürgen Groß,DC=corp,DC=com"},
		// docs/compatibility.md, "Objects as the product renders them": GUIDs are
		// lower-case without braces; clients paste them from AD tools in braces and
		// upper case.
		{"GUID lower", "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", dirgate.KindGUID, "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"},
		{"GUID upper in braces", "{0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0}", dirgate.KindGUID, "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"},
		{"GUID mixed case", "0F1e2D3c-4b5A-6978-8796-a5B4c3D2e1F0", dirgate.KindGUID, "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"},
		// A domain account's SID (docs/api.md, "Identifiers").
		{"domain SID", "S-1-5-21-3623811015-3361044348-30300820-1013", dirgate.KindSID, "S-1-5-21-3623811015-3361044348-30300820-1013"},
		// Well-known SIDs are shorter than domain SIDs: Authenticated Users, Administrators.
		{"well-known Authenticated Users", "S-1-5-11", dirgate.KindSID, "S-1-5-11"},
		{"well-known Administrators", "S-1-5-32-544", dirgate.KindSID, "S-1-5-32-544"},
		// The Null SID has a zero sub-authority: a single 0 is not zero padding.
		{"null SID", "S-1-0-0", dirgate.KindSID, "S-1-0-0"},
		// A lower-case "s" is canonicalised to "S".
		{"lower-case s", "s-1-5-18", dirgate.KindSID, "S-1-5-18"},
		// The largest 48-bit authority and 32-bit sub-authority.
		{"SID at the bounds", "S-1-281474976710655-4294967295", dirgate.KindSID, "S-1-281474976710655-4294967295"},
		// Exactly 15 sub-authorities is the MS-DTYP maximum.
		{"15 sub-authorities", "S-1-5" + strings.Repeat("-1", 15), dirgate.KindSID, "S-1-5" + strings.Repeat("-1", 15)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := dirgate.ParseIdentifier(tt.in)
			if err != nil {
				t.Fatalf("ParseIdentifier(%q): %v", tt.in, err)
			}
			if id.Kind() != tt.wantKind || id.Canonical() != tt.wantCanon || id.String() != tt.in {
				t.Errorf("got kind %v canon %q raw %q, want %v %q %q", id.Kind(), id.Canonical(), id.String(), tt.wantKind, tt.wantCanon, tt.in)
			}
			if tt.wantKind == dirgate.KindDN && id.DN().IsZero() {
				t.Errorf("DN identifier has no parsed DN")
			}
		})
	}
}

func TestParseIdentifierRejects(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string // a fragment of the client-facing message
	}{
		{"empty", "", "is empty"},
		// The bound protects LDAP and logs from unbounded client values.
		{"too long", "CN=" + strings.Repeat("a", dirgate.MaxIdentifierLength), "longer than"},
		{"invalid UTF-8", "CN=\xff,DC=x", "UTF-8"},
		// Control characters would reach logs and LDAP filters.
		{"control character", "CN=a\nb,DC=x", "control character"},
		{"NUL", "CN=a\x00,DC=x", "control character"},
		// MS-DTYP: only revision 1 exists.
		{"SID revision 2", "S-2-5-21-1-2-3", "revision 2"},
		// The identifier authority is 48 bits wide.
		{"SID authority too big", "S-1-281474976710656-1", "out of range"},
		// Sub-authorities are 32 bits wide.
		{"SID sub-authority too big", "S-1-5-4294967296", "out of range"},
		{"SID with 16 sub-authorities", "S-1-5" + strings.Repeat("-1", 16), "more than 15"},
		// Zero padding would let two strings name one SID and defeat caching by text.
		{"SID leading zero", "S-1-5-021", "zero-padded"},
		{"SID revision leading zero", "S-01-5-21", "zero-padded"},
		{"SID without authority", "S-1", "revision and an authority"},
		{"SID trailing dash", "S-1-5-", "empty"},
		{"SID double dash", "S-1--5", "empty"},
		// Not a DN (no "="), not a GUID, not a SID.
		{"bare name", "Domain Admins", "not a DN, GUID or SID"},
		{"GUID too short", "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f", "not a DN, GUID or SID"},
		{"GUID half braced", "{0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", "not a DN, GUID or SID"},
		{"GUID non-hex", "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1fg", "not a DN, GUID or SID"},
		// AD's <GUID=...> base form is not a DN; clients give the GUID itself.
		{"AD GUID base form", "<GUID=0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0>", "not a valid distinguished name"},
		{"malformed DN", "CN=a,=b", "not a valid distinguished name"},
		{"DN with bad escape", `CN=a\zz,DC=x`, "not a valid distinguished name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := dirgate.ParseIdentifier(tt.in)
			if err == nil {
				t.Fatalf("ParseIdentifier(%q) = %v %q, want an error", tt.in, id.Kind(), id.Canonical())
			}
			if code := dirgate.ErrorCode(err); code != dirgate.EINVALID {
				t.Errorf("code %q, want %q", code, dirgate.EINVALID)
			}
			if msg := dirgate.ErrorMessage(err); !strings.Contains(msg, tt.want) {
				t.Errorf("message %q does not contain %q", msg, tt.want)
			}
		})
	}
}

// FuzzParseIdentifier checks that any string either fails with a client-safe EINVALID
// error or yields an identifier whose canonical form parses back to itself.
func FuzzParseIdentifier(f *testing.F) {
	for _, s := range []string{
		"CN=Smith\\, John,OU=Users,DC=corp,DC=com", "{0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0}",
		"S-1-5-21-1-2-3-500", "S-1-5-32-544", "s-1-0-0", "S-2-5", "S-1-5-", "<SID=S-1-5-11>",
		"CN=J\\C3\\BCrgen,DC=x", "CN=#0403616263,DC=x", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := dirgate.ParseIdentifier(s)
		if err != nil {
			if dirgate.ErrorCode(err) != dirgate.EINVALID {
				t.Fatalf("ParseIdentifier(%q): code %q, want %q", s, dirgate.ErrorCode(err), dirgate.EINVALID)
			}
			// The message is shown to clients: it must stay short and printable.
			if msg := dirgate.ErrorMessage(err); len(msg) > 200 || !utf8.ValidString(msg) {
				t.Fatalf("ParseIdentifier(%q): unsuitable message %q", s, msg)
			}
			return
		}
		if id.IsZero() || id.String() != s || len(s) > dirgate.MaxIdentifierLength {
			t.Fatalf("ParseIdentifier(%q) = %+v", s, id)
		}
		again, err := dirgate.ParseIdentifier(id.Canonical())
		if err != nil {
			t.Fatalf("canonical %q of %q does not parse: %v", id.Canonical(), s, err)
		}
		if again.Kind() != id.Kind() || again.Canonical() != id.Canonical() {
			t.Fatalf("canonical %q of %q reparses as %v %q", id.Canonical(), s, again.Kind(), again.Canonical())
		}
		if id.Kind() == dirgate.KindSID {
			b, err := ldapentry.SIDToBytes(id.Canonical())
			if err != nil {
				t.Fatalf("SIDToBytes(%q): %v", id.Canonical(), err)
			}
			if back, err := ldapentry.SIDFromBytes(b); err != nil || back != id.Canonical() {
				t.Fatalf("SID %q round-trips to %q, %v", id.Canonical(), back, err)
			}
		}
		if id.Kind() == dirgate.KindGUID {
			b, err := ldapentry.GUIDToBytes(id.Canonical())
			if err != nil || ldapentry.GUIDFromBytes(b) != id.Canonical() {
				t.Fatalf("GUID %q does not round-trip: %v", id.Canonical(), err)
			}
		}
	})
}

// An escaped control character would let a client name an object by an alias that
// the directory cuts or folds (Samba ends a value at NUL).
func TestParseIdentifierRejectsEscapedControls(t *testing.T) {
	for _, s := range []string{`CN=Help Desk\00evil,DC=corp,DC=com`, `CN=a\0ab,DC=corp,DC=com`, `CN=a\7f,DC=x`} {
		if _, err := dirgate.ParseIdentifier(s); dirgate.ErrorCode(err) != dirgate.EINVALID {
			t.Errorf("%q: err = %v, want invalid", s, err)
		}
	}
	if _, err := dirgate.ParseIdentifier(`CN=Smith\2C John\20,DC=corp,DC=com`); err != nil {
		t.Errorf("escaped comma and space refused: %v", err)
	}
}
