package memory

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/ldapentry"
)

// entry writes one AD-export record; n makes its objectGUID unique.
func entry(dn string, n byte, lines ...string) string {
	guid := make([]byte, 16)
	guid[0], guid[15] = n, 0x40
	return "dn: " + dn + "\nobjectGUID:: " + base64.StdEncoding.EncodeToString(guid) + "\n" + strings.Join(lines, "\n") + "\n\n"
}

func sid(rid int) string { return sidOf("S-1-5-21-1-2-3", rid) }

func sidOf(domain string, rid int) string {
	b, err := ldapentry.SIDToBytes(fmt.Sprintf("%s-%d", domain, rid))
	if err != nil {
		panic(err)
	}
	return "objectSid:: " + base64.StdEncoding.EncodeToString(b)
}

const base = "DC=t,DC=example"

// small is a directory with the cases the fixture does not isolate: a phantom member,
// a duplicated member value, a primary-group member also in member, a member from
// another domain whose primaryGroupID matches the group's RID, and a well-known SID
// carried twice.
var small = entry("CN=G,"+base, 1, "objectClass: group", sid(1000),
	"member: CN=U1,"+base, "member: cn=u1,"+base, "member: CN=Phantom,DC=other,DC=example", "member: CN=U2,"+base,
	"description: the group") +
	entry("CN=U1,"+base, 2, "objectClass: user", sid(1001), "primaryGroupID: 513") +
	entry("CN=U2,"+base, 3, "objectClass: user", sid(1002), "primaryGroupID: 1000") +
	entry("CN=U3,"+base, 4, "objectClass: user", sid(1003), "primaryGroupID: 1000") +
	entry("CN=Foreign,"+base, 5, "objectClass: user", sidOf("S-1-5-21-9-9-9", 1004), "primaryGroupID: 1000") +
	entry("CN=FSP1,"+base, 6, "objectClass: foreignSecurityPrincipal", "objectSid:: AQEAAAAAAAULAAAA") +
	entry("CN=FSP2,"+base, 7, "objectClass: foreignSecurityPrincipal", "objectSid:: AQEAAAAAAAULAAAA") +
	entry("CN=Other,"+base, 8, "objectClass: group", sid(1005), "member: CN=G,"+base)

func load(t *testing.T, data string, opts ...Option) *Directory {
	t.Helper()
	d, err := Load("test.ldif", []byte(data), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func lookup(t *testing.T, d *Directory, ident string, props ...string) dirgate.Object {
	t.Helper()
	o, err := d.Lookup(context.Background(), dirgate.MustParseIdentifier(ident), props)
	if err != nil {
		t.Fatalf("lookup %s: %v", ident, err)
	}
	return o
}

func dns(objs []dirgate.Object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.DN)
	}
	slices.Sort(out)
	return out
}

func TestMembers(t *testing.T) {
	d := load(t, small)
	ms, err := d.Members(context.Background(), lookup(t, d, "CN=G,"+base), nil)
	if err != nil {
		t.Fatal(err)
	}
	// U1 once despite two spellings; U2 once although member and primary; U3 by
	// primaryGroupID; no phantom; not Foreign, whose RID 1000 is in another domain.
	want := []string{"CN=U1," + base, "CN=U2," + base, "CN=U3," + base}
	if got := dns(ms); !slices.Equal(got, want) {
		t.Errorf("members = %q, want %q", got, want)
	}
}

func TestMemberOf(t *testing.T) {
	d := load(t, small)
	tests := []struct {
		name string
		obj  string
		want []string
	}{
		// Groups listing the object plus its primary group, once each.
		{"member and primary", "CN=U2," + base, []string{"CN=G," + base}},
		{"primary only", "CN=U3," + base, []string{"CN=G," + base}},
		// A primary group that is not loaded (Domain Users here) is left out.
		{"primary group not loaded", "CN=U1," + base, []string{"CN=G," + base}},
		// A primaryGroupID is relative to the object's own domain.
		{"other domain", "CN=Foreign," + base, nil},
		{"nested group", "CN=G," + base, []string{"CN=Other," + base}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gs, err := d.MemberOf(context.Background(), lookup(t, d, tt.obj))
			if err != nil {
				t.Fatal(err)
			}
			if got := dns(gs); !slices.Equal(got, tt.want) {
				t.Errorf("memberOf = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestLookup(t *testing.T) {
	d := load(t, small)
	tests := []struct {
		name  string
		ident string
		want  string // DN, or an error code
	}{
		// DNs compare as names: case and escaping do not matter.
		{"DN other case", "cn=u1,dc=T,dc=EXAMPLE", "CN=U1," + base},
		{"GUID braces upper case", "{" + strings.ToUpper(lookup(t, d, "CN=U2,"+base).GUID) + "}", "CN=U2," + base},
		{"SID", "S-1-5-21-1-2-3-1003", "CN=U3," + base},
		// Two objects carry S-1-5-11: the SID does not say which one is meant.
		{"ambiguous SID", "S-1-5-11", dirgate.EINVALID},
		{"unknown SID", "S-1-5-21-1-2-3-9", dirgate.ENOTFOUND},
		{"unknown DN", "CN=U9," + base, dirgate.ENOTFOUND},
		{"unknown GUID", "00000000-0000-0000-0000-000000000000", dirgate.ENOTFOUND},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := d.Lookup(context.Background(), dirgate.MustParseIdentifier(tt.ident), nil)
			got := o.DN
			if err != nil {
				got = dirgate.ErrorCode(err)
			}
			if got != tt.want {
				t.Errorf("got %q (%v), want %q", got, err, tt.want)
			}
		})
	}
	if _, err := d.Lookup(context.Background(), dirgate.Identifier{}, nil); dirgate.ErrorCode(err) != dirgate.EINVALID {
		t.Errorf("zero identifier: %v, want %s", err, dirgate.EINVALID)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := d.Lookup(ctx, dirgate.MustParseIdentifier("CN=U1,"+base), nil); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled context: %v", err)
	}
}

// Any attribute of the file is a property; memberOf is rebuilt from member values, and
// an absent attribute renders as [].
func TestProperties(t *testing.T) {
	d := load(t, small)
	g := lookup(t, d, "CN=G,"+base, "description", "memberOf", "member", "mail")
	want := map[string][]string{
		"description": {"the group"},
		"memberof":    {"CN=Other," + base},
		"member":      {"CN=U1," + base, "cn=u1," + base, "CN=Phantom,DC=other,DC=example", "CN=U2," + base},
		"mail":        {},
	}
	for k, v := range want {
		if !slices.Equal(g.Properties[k], v) || g.Properties[k] == nil {
			t.Errorf("%s = %q, want %q", k, g.Properties[k], v)
		}
	}
}

func TestRemoveMember(t *testing.T) {
	d := load(t, small)
	ctx := context.Background()
	g := lookup(t, d, "CN=G,"+base)
	u1, u2, u3 := lookup(t, d, "CN=U1,"+base), lookup(t, d, "CN=U2,"+base), lookup(t, d, "CN=Foreign,"+base)
	tests := []struct {
		name   string
		member dirgate.Object
		want   error
	}{
		// U1 is listed twice in member (two spellings): one removal takes both values.
		{"member", u1, nil},
		{"again", u1, dirgate.ErrNotMember},
		// U2 is a member and has the group as primary group: the member value goes.
		{"member with primary", u2, nil},
		// Now U2 belongs only through primaryGroupID.
		{"primary only", u2, dirgate.ErrPrimaryGroup},
		// Foreign's primaryGroupID matches the RID in another domain: not a member.
		{"other domain", u3, dirgate.ErrNotMember},
	}
	for _, tt := range tests {
		err := d.RemoveMember(ctx, g, tt.member)
		if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
	g = lookup(t, d, "CN=G,"+base, "member")
	if want := []string{"CN=Phantom,DC=other,DC=example"}; !slices.Equal(g.Properties["member"], want) {
		t.Errorf("member after removals = %q, want %q", g.Properties["member"], want)
	}
	if got := lookup(t, d, "CN=U1,"+base, "memberOf").Properties["memberof"]; len(got) != 0 {
		t.Errorf("U1 memberOf after removal = %q", got)
	}
	ms, _ := d.Members(ctx, g, nil)
	if got := dns(ms); !slices.Equal(got, []string{"CN=U2," + base, "CN=U3," + base}) {
		t.Errorf("members after removals = %q", got)
	}
	if err := d.RemoveMember(ctx, dirgate.Object{GUID: "00000000-0000-0000-0000-000000000000"}, u1); dirgate.ErrorCode(err) != dirgate.ENOTFOUND {
		t.Errorf("unknown group: %v", err)
	}
}

// Password expiry is decided at call time, by the directory's clock.
func TestWithClock(t *testing.T) {
	rec := entry("CN=U,"+base, 1, "objectClass: user", sid(1001),
		"pwdLastSet: 157156749000000000", "msDS-UserPasswordExpiryTimeComputed: 157193037000000000")
	tests := []struct {
		name string
		now  time.Time
		want int
	}{
		{"before expiry", time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), dirgate.PasswordNotExpired},
		{"after expiry", time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC), dirgate.PasswordExpired},
	}
	for _, tt := range tests {
		d := load(t, rec, WithClock(func() time.Time { return tt.now }))
		if got := lookup(t, d, "CN=U,"+base).PasswordStatus.ExpirationStatus; got != tt.want {
			t.Errorf("%s: status %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	ok := entry("CN=A,"+base, 1, "objectClass: user")
	tests := []struct {
		name string
		ldif string
		want string // in the error
	}{
		// Every entry needs a GUID: it is how dirgate names objects.
		{"missing objectGUID", ok + "dn: CN=B," + base + "\nobjectClass: user\n", `"CN=B,DC=t,DC=example" at line 5`},
		{"short objectGUID", "dn: CN=B," + base + "\nobjectGUID:: AAEC\n", "16 bytes"},
		{"two objectGUIDs", entry("CN=B,"+base, 2, "objectGUID:: AAAAAAAAAAAAAAAAAAAAAA=="), "exactly one objectGUID"},
		{"bad DN", entry("not a DN", 2), "invalid DN"},
		{"duplicate GUID", ok + entry("CN=B,"+base, 1), "objectGUID"},
		{"duplicate DN", ok + entry("cn=a,"+base, 2), "DN already used by the entry at line 1"},
		{"malformed SID", entry("CN=B,"+base, 2, "objectSid:: AQUAAA=="), "objectSid"},
		{"member not a DN", entry("CN=B,"+base, 2, "objectClass: group", "member: nonsense"), "member"},
		// The parser would read the named file into the value.
		{"URL value", entry("CN=B,"+base, 2, "description:< file:///etc/hostname"), "URL values"},
		{"folded URL value", entry("CN=B,"+base, 2, "description:", " < file:///etc/hostname"), "URL values"},
		{"change record", "dn: CN=B," + base + "\nchangetype: delete\n", "change records"},
		{"syntax error", ok + "dn: CN=B," + base + "\nno colon here\n", "record at line 5: Missing :"},
		{"bad base64", "dn:: !!!\n", "record at line 1: illegal base64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load("x.ldif", []byte(tt.ldif))
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "x.ldif") {
				t.Errorf("error %v, want one naming x.ldif and %q", err, tt.want)
			}
		})
	}
}

// Plain ldapsearch output (comments, version line, CRLF line ends, folded lines, the
// search result trailer) loads as it is.
func TestLoadLdapsearchOutput(t *testing.T) {
	text := "# extended LDIF\n#\nversion: 1\n\n# U, t.example\n" +
		entry("CN=U,"+base, 1, "objectClass: user", "description: a long value folded", " over two lines") +
		"# search result\nsearch: 2\nresult: 0 Success\n\n# numResponses: 2\n# numEntries: 1\n"
	d := load(t, strings.ReplaceAll(text, "\n", "\r\n"))
	if got := lookup(t, d, "CN=U,"+base, "description").Properties["description"]; !slices.Equal(got, []string{"a long value foldedover two lines"}) {
		t.Errorf("description = %q", got)
	}
	if d.Len() != 1 {
		t.Errorf("Len = %d, want 1", d.Len())
	}
}

func TestConfig(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "x.ldif")
	if err := os.WriteFile(file, []byte(small), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		cfg     Config
		wantErr bool
		wantLen int
	}{
		// No file: the embedded demo.
		{"demo", Config{}, false, -1},
		{"file", Config{LDIF: file}, false, 8},
		{"missing file", Config{LDIF: filepath.Join(dir, "none.ldif")}, true, 0},
		{"directory", Config{LDIF: dir}, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.cfg.Validate(); (err != nil) != tt.wantErr {
				t.Fatalf("Validate: %v", err)
			}
			d, err := tt.cfg.Open()
			if (err != nil) != tt.wantErr {
				t.Fatalf("Open: %v", err)
			}
			if err == nil && tt.wantLen >= 0 && d.Len() != tt.wantLen {
				t.Errorf("Len = %d, want %d", d.Len(), tt.wantLen)
			}
		})
	}
}
