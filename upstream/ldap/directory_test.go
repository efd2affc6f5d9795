package ldap

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/dirgate/dirgate"
	goldap "github.com/go-ldap/ldap/v3"
)

const (
	domSID = "S-1-5-21-1-2-3"
	users  = "CN=Users,DC=corp,DC=example,DC=com"
)

// org is the fake directory most tests share: two users whose primary group is
// Domain Users, a group G1 holding alice, a nested G2, a contact and the S-1-5-11
// foreign security principal (whose SID also exists in the configuration partition,
// as on Samba), and a group in OU=ext.
type org struct {
	srv                                   *fakeServer
	alice, bob, du, g1, g2, fsp, contact  *fakeObj
	extGroup, extUser, wellKnown, builtin *fakeObj
}

func guid(n int) string { return fmt.Sprintf("%08x-0000-4000-8000-000000000000", n) }

func newOrg() *org {
	s := newFakeServer()
	o := &org{srv: s}
	s.add(&fakeObj{dn: s.domain, guid: guid(1), sid: domSID, classes: []string{"domain", "domainDNS"}})
	o.du = s.add(&fakeObj{dn: "CN=Domain Users," + users, guid: guid(2), sid: domSID + "-513", classes: []string{"group"}})
	o.alice = s.add(&fakeObj{dn: "CN=alice," + users, guid: guid(3), sid: domSID + "-1104", classes: []string{"person", "user"}, pgid: 513,
		attrs: map[string][]string{"description": {"first user"}}})
	o.bob = s.add(&fakeObj{dn: "CN=bob," + users, guid: guid(4), sid: domSID + "-1105", classes: []string{"person", "user"}, pgid: 513})
	o.fsp = s.add(&fakeObj{dn: "CN=S-1-5-11,CN=ForeignSecurityPrincipals," + s.domain, guid: guid(5), sid: "S-1-5-11", classes: []string{"foreignSecurityPrincipal"}})
	o.wellKnown = s.add(&fakeObj{dn: "CN=Authenticated Users,CN=WellKnown Security Principals,CN=Configuration," + s.domain, guid: guid(6), sid: "S-1-5-11", classes: []string{"foreignSecurityPrincipal"}})
	o.contact = s.add(&fakeObj{dn: "CN=Smith\\, John (x)*," + users, guid: guid(7), classes: []string{"person", "contact"}})
	o.g2 = s.add(&fakeObj{dn: "CN=G2," + users, guid: guid(8), sid: domSID + "-1103", classes: []string{"group"}, member: []string{o.bob.dn}})
	o.g1 = s.add(&fakeObj{dn: "CN=G1," + users, guid: guid(9), sid: domSID + "-1102", classes: []string{"group"},
		member: []string{o.alice.dn, o.g2.dn, o.fsp.dn, o.contact.dn, "CN=Authenticated Users,CN=WellKnown Security Principals,CN=Configuration," + s.domain}})
	o.builtin = s.add(&fakeObj{dn: "CN=Administrators,CN=Builtin," + s.domain, guid: guid(10), sid: "S-1-5-32-544", classes: []string{"group"}, member: []string{o.alice.dn}})
	o.extUser = s.add(&fakeObj{dn: "CN=ext,OU=ext," + s.domain, guid: guid(11), sid: domSID + "-1200", classes: []string{"user"}, pgid: 513})
	o.extGroup = s.add(&fakeObj{dn: "CN=extg,OU=ext," + s.domain, guid: guid(12), sid: domSID + "-1201", classes: []string{"group"}, member: []string{o.alice.dn, o.extUser.dn}})
	return o
}

func (o *org) dir(t *testing.T, cfg Config) *Directory {
	t.Helper()
	d, err := newFakeDirectory(o.srv, cfg)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(d.Close)
	return d
}

func obj(t *testing.T, d *Directory, id string) dirgate.Object {
	t.Helper()
	o, err := d.Lookup(context.Background(), dirgate.MustParseIdentifier(id), nil)
	if err != nil {
		t.Fatalf("lookup %s: %v", id, err)
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

func TestDiscover(t *testing.T) {
	o := newOrg()
	d := o.dir(t, Config{})
	if d.domainSID != domSID || !d.asq || d.pageASQ.Load() {
		t.Errorf("discover: sid %q asq %v pageASQ %v; want %q, true, false (Samba)", d.domainSID, d.asq, d.pageASQ.Load(), domSID)
	}
	if len(d.otherNCs) != 3 {
		t.Errorf("otherNCs = %v, want the configuration, schema and DNS partitions", d.otherNCs)
	}
	// A server that is not Samba gets paged ASQ from the start.
	o.srv.vendor = ""
	if d := o.dir(t, Config{}); !d.pageASQ.Load() {
		t.Errorf("pageASQ off for a non-Samba server")
	}
	// A BaseDN outside the server's domain is a configuration error at Open.
	if _, err := newFakeDirectory(o.srv, Config{BaseDN: "DC=other,DC=com"}); err == nil || !strings.Contains(err.Error(), "outside") {
		t.Errorf("BaseDN outside the domain: err = %v", err)
	}
}

func TestLookup(t *testing.T) {
	o := newOrg()
	// A second object inside BaseDN with the same SID makes S-1-5-99 ambiguous.
	o.srv.add(&fakeObj{dn: "CN=dup1," + users, guid: guid(20), sid: "S-1-5-99", classes: []string{"user"}})
	o.srv.add(&fakeObj{dn: "CN=dup2," + users, guid: guid(21), sid: "S-1-5-99", classes: []string{"user"}})
	tests := []struct {
		name    string
		base    string // BaseDN; empty means the domain
		id      string
		want    string // DN, or an error code
		wantReq int    // searches sent, -1 to skip the check
	}{
		// The three identifier forms, each one base search.
		{"dn", "", o.alice.dn, o.alice.dn, 1},
		{"dn other case and spacing", "", "cn=ALICE, cn=users,dc=corp,dc=example,dc=com", o.alice.dn, 1},
		{"guid", "", guid(3), o.alice.dn, 1},
		{"guid braces upper", "", "{" + strings.ToUpper(guid(3)) + "}", o.alice.dn, 1},
		{"sid", "", domSID + "-1104", o.alice.dn, 1},
		// Unknown objects are ENOTFOUND; a SID gets the subtree fallback first.
		{"unknown dn", "", "CN=nobody," + users, dirgate.ENOTFOUND, 1},
		{"unknown guid", "", guid(999), dirgate.ENOTFOUND, 1},
		{"unknown sid", "", domSID + "-9999", dirgate.ENOTFOUND, 2},
		// A DN the server rejects is EINVALID.
		{"bad syntax", "", "CN=x,OU=bad syntax," + "DC=corp,DC=example,DC=com", dirgate.EINVALID, 1},
		// S-1-5-11 is on two objects; only the FSP lies in the domain partition.
		{"duplicate sid", "", "S-1-5-11", o.fsp.dn, 2},
		{"ambiguous sid", "", "S-1-5-99", dirgate.EINVALID, 2},
		// Outside BaseDN: not found, and a DN is refused without asking the server.
		{"dn outside base", "OU=ext,DC=corp,DC=example,DC=com", o.alice.dn, dirgate.ENOTFOUND, 0},
		{"guid outside base", "OU=ext,DC=corp,DC=example,DC=com", guid(3), dirgate.ENOTFOUND, 1},
		{"inside narrowed base", "OU=ext,DC=corp,DC=example,DC=com", guid(11), o.extUser.dn, 1},
		// The configuration partition lies below the domain's DN but is not in scope.
		{"configuration partition", "", o.wellKnown.dn, dirgate.ENOTFOUND, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := o.dir(t, Config{BaseDN: tt.base})
			before := len(o.srv.log())
			got, err := d.Lookup(context.Background(), dirgate.MustParseIdentifier(tt.id), nil)
			if tt.want == got.DN && err == nil {
				// ok
			} else if code := dirgate.ErrorCode(err); code != tt.want {
				t.Fatalf("Lookup(%s) = %q, %v; want %s", tt.id, got.DN, err, tt.want)
			}
			if n := len(o.srv.log()) - before; tt.wantReq >= 0 && n != tt.wantReq {
				t.Errorf("sent %d searches, want %d: %v", n, tt.wantReq, o.srv.log()[before:])
			}
		})
	}
}

// TestLookupObject checks the rendered object and the requested attributes: the
// base attributes ToObject needs plus the properties.
func TestLookupObject(t *testing.T) {
	o := newOrg()
	d := o.dir(t, Config{})
	got, err := d.Lookup(context.Background(), dirgate.MustParseIdentifier(guid(3)), []string{"description", "objectsid"})
	if err != nil {
		t.Fatal(err)
	}
	if got.GUID != guid(3) || got.SID != domSID+"-1104" || got.ObjectType != dirgate.TypeUser || got.PrimaryGroupID != 513 ||
		got.DisplayName != "alice" || got.DomainName != "corp.example.com" || got.AccountStatus == nil {
		t.Errorf("object = %+v", got)
	}
	if fmt.Sprint(got.Properties) != fmt.Sprintf("map[description:[first user] objectsid:[%s-1104]]", domSID) {
		t.Errorf("properties = %v", got.Properties)
	}
	log := o.srv.log()
	attrs := strings.Split(log[len(log)-1], "|")[2]
	if !strings.Contains(attrs, "msDS-User-Account-Control-Computed") || !strings.HasSuffix(attrs, ",description") || strings.Count(strings.ToLower(attrs), "objectsid") != 1 {
		t.Errorf("requested attributes %q: want the base set once plus description", attrs)
	}
}

func TestMembers(t *testing.T) {
	o := newOrg()
	tests := []struct {
		name   string
		vendor string
		asq    bool
		group  *fakeObj
		want   []string
		// wantSearch is a substring of every search the listing must send (in order).
		wantSearch []string
	}{
		// ASQ on the group, unpaged on Samba; members in the configuration partition
		// left out; G1 has no primary members but is a domain group, so it is asked.
		{"samba asq", "Samba Team", true, o.g1, []string{o.contact.dn, o.g2.dn, o.alice.dn, o.fsp.dn},
			[]string{o.g1.dn + "|(objectClass=*)|", "|(primaryGroupID=1102)|"}},
		// Elsewhere ASQ carries the paging control.
		{"ad asq", "", true, o.g1, []string{o.contact.dn, o.g2.dn, o.alice.dn, o.fsp.dn},
			[]string{oidASQ + "," + goldap.ControlTypePaging, "|(primaryGroupID=1102)|"}},
		// Without ASQ: the memberOf filter, the DN escaped.
		{"no asq", "Samba Team", false, o.g1, []string{o.contact.dn, o.g2.dn, o.alice.dn, o.fsp.dn},
			[]string{"|(memberOf=CN=G1,CN=Users,DC=corp,DC=example,DC=com)|", "|(primaryGroupID=1102)|"}},
		// Primary-group members come from primaryGroupID, including those outside
		// the member attribute; extUser is inside the domain, so listed.
		{"primary group", "Samba Team", true, o.du, []string{o.alice.dn, o.bob.dn, o.extUser.dn},
			[]string{o.du.dn + "|", "(primaryGroupID=513)"}},
		// A builtin group's SID is not in the domain: no primaryGroupID search.
		{"builtin", "Samba Team", true, o.builtin, []string{o.alice.dn}, []string{o.builtin.dn + "|"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o.srv.vendor, o.srv.asq = tt.vendor, tt.asq
			d := o.dir(t, Config{})
			group := obj(t, d, tt.group.guid)
			before := len(o.srv.log())
			got, err := d.Members(context.Background(), group, nil)
			if err != nil {
				t.Fatal(err)
			}
			want := slices.Clone(tt.want)
			slices.Sort(want)
			if fmt.Sprint(dns(got)) != fmt.Sprint(want) {
				t.Errorf("members = %v, want %v", dns(got), want)
			}
			sent := o.srv.log()[before:]
			if len(sent) != len(tt.wantSearch) {
				t.Fatalf("searches = %v, want %d", sent, len(tt.wantSearch))
			}
			for i, w := range tt.wantSearch {
				if !strings.Contains(sent[i], w) {
					t.Errorf("search %d = %q, want it to contain %q", i, sent[i], w)
				}
			}
		})
	}
}

// TestMembersEscaping: a group DN with filter metacharacters reaches the memberOf
// filter escaped, and still matches.
func TestMembersEscaping(t *testing.T) {
	o := newOrg()
	o.srv.asq = false
	odd := o.srv.add(&fakeObj{dn: "CN=grp (a*b)\\5c," + users, guid: guid(30), sid: domSID + "-1300", classes: []string{"group"}, member: []string{o.bob.dn}})
	d := o.dir(t, Config{})
	got, err := d.Members(context.Background(), obj(t, d, odd.guid), nil)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(dns(got)) != fmt.Sprint([]string{o.bob.dn}) {
		t.Errorf("members = %v", dns(got))
	}
	log := o.srv.log()
	if want := `(memberOf=CN=grp \28a\2ab\29\5c5c,CN=Users,DC=corp,DC=example,DC=com)`; !strings.Contains(log[len(log)-2], want) {
		t.Errorf("filter %q, want %q", log[len(log)-2], want)
	}
}

// TestMembersDedupe: an object both in member and in the primary group is listed once.
func TestMembersDedupe(t *testing.T) {
	o := newOrg()
	o.du.member = []string{o.alice.dn}
	d := o.dir(t, Config{})
	got, err := d.Members(context.Background(), obj(t, d, o.du.guid), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Errorf("members = %v, want alice, bob, ext once each", dns(got))
	}
}

// bigGroup adds a group with n user members.
func bigGroup(o *org, n int) *fakeObj {
	var members []string
	for i := 0; i < n; i++ {
		u := o.srv.add(&fakeObj{dn: fmt.Sprintf("CN=u%05d,%s", i, users), guid: guid(1000 + i), sid: fmt.Sprintf("%s-%d", domSID, 5000+i), classes: []string{"user"}, pgid: 513})
		members = append(members, u.dn)
	}
	return o.srv.add(&fakeObj{dn: "CN=big," + users, guid: guid(900), sid: domSID + "-1900", classes: []string{"group"}, member: members})
}

// TestRangeRetrieval: with AD's MaxValRange a requested member property comes back
// complete, on a looked-up group and on a group inside a listing; Samba's whole
// answer needs no extra request.
func TestRangeRetrieval(t *testing.T) {
	for _, tt := range []struct {
		name        string
		maxValRange int
		wantExtra   int // range requests after the first answer
	}{
		// AD's 1500 scaled down: 0-149, then 150-299, 300-*.
		{"ad 150", 150, 2},
		{"ad 100", 100, 3},
		// The range ends exactly at the last value: 0-174, then 175-*.
		{"exact", 175, 1},
		{"samba unlimited", 0, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := newOrg()
			big := bigGroup(o, 350)
			o.srv.maxValRange = tt.maxValRange
			parent := o.srv.add(&fakeObj{dn: "CN=parent," + users, guid: guid(901), sid: domSID + "-1901", classes: []string{"group"}, member: []string{big.dn}})
			d := o.dir(t, Config{})
			before := len(o.srv.log())
			g, err := d.Lookup(context.Background(), dirgate.MustParseIdentifier(big.guid), []string{"member"})
			if err != nil {
				t.Fatal(err)
			}
			if got := g.Properties["member"]; fmt.Sprint(got) != fmt.Sprint(big.member) {
				t.Fatalf("member property has %d values, want the 350 in order", len(got))
			}
			if n := len(o.srv.log()) - before - 1; n != tt.wantExtra {
				t.Errorf("range requests = %d, want %d", n, tt.wantExtra)
			}
			ms, err := d.Members(context.Background(), obj(t, d, parent.guid), []string{"member"})
			if err != nil || len(ms) != 1 || len(ms[0].Properties["member"]) != 350 {
				t.Fatalf("members of parent: %v, %v", dns(ms), err)
			}
		})
	}
}

// TestASQSizeLimit: a Samba that starts enforcing MaxPageSize answers the unpaged ASQ
// with code 4; the adapter pages that listing and every later one.
func TestASQSizeLimit(t *testing.T) {
	o := newOrg()
	big := bigGroup(o, 250)
	o.srv.maxPage = 100
	d := o.dir(t, Config{PageSize: 100})
	g := obj(t, d, big.guid)
	for i := 0; i < 2; i++ {
		before := len(o.srv.log())
		ms, err := d.Members(context.Background(), g, nil)
		if err != nil || len(ms) != 250 {
			t.Fatalf("round %d: %d members, %v; want 250", i, len(ms), err)
		}
		sent := o.srv.log()[before:]
		var asq, paged int
		for _, s := range sent {
			if strings.Contains(s, oidASQ) {
				asq++
				if strings.Contains(s, goldap.ControlTypePaging) {
					paged++
				}
			}
		}
		// Round 0: one unpaged try, then 3 pages. Round 1: 3 pages only.
		if want := map[int][2]int{0: {4, 3}, 1: {3, 3}}[i]; asq != want[0] || paged != want[1] {
			t.Errorf("round %d: %d ASQ searches (%d paged), want %v", i, asq, paged, want)
		}
	}
}

func TestMemberOf(t *testing.T) {
	o := newOrg()
	for _, asq := range []bool{true, false} {
		t.Run(fmt.Sprintf("asq=%v", asq), func(t *testing.T) {
			o.srv.asq = asq
			d := o.dir(t, Config{})
			got, err := d.MemberOf(context.Background(), obj(t, d, o.alice.guid))
			if err != nil {
				t.Fatal(err)
			}
			want := []string{o.builtin.dn, o.du.dn, o.g1.dn, o.extGroup.dn}
			slices.Sort(want)
			if fmt.Sprint(dns(got)) != fmt.Sprint(want) {
				t.Errorf("MemberOf(alice) = %v, want %v", dns(got), want)
			}
			// Narrowed scope: only groups in OU=ext remain, and the primary group is
			// outside.
			d = o.dir(t, Config{BaseDN: "OU=ext,DC=corp,DC=example,DC=com"})
			ext := obj(t, d, o.extUser.guid)
			got, err = d.MemberOf(context.Background(), ext)
			if err != nil || fmt.Sprint(dns(got)) != fmt.Sprint([]string{o.extGroup.dn}) {
				t.Errorf("MemberOf(ext) in OU=ext = %v, %v", dns(got), err)
			}
		})
	}
}

// TestMemberOfDanglingPrimary: a primaryGroupID naming no group is no group, not an
// error.
func TestMemberOfDanglingPrimary(t *testing.T) {
	o := newOrg()
	d := o.dir(t, Config{})
	bob := obj(t, d, o.bob.guid)
	bob.PrimaryGroupID = 4242
	got, err := d.MemberOf(context.Background(), bob)
	if err != nil || fmt.Sprint(dns(got)) != fmt.Sprint([]string{o.g2.dn}) {
		t.Errorf("MemberOf = %v, %v; want G2 only", dns(got), err)
	}
}

// memberChange is a case of TestRemoveMember or TestAddMember: the org's state, the
// objects, the answer wanted (a sentinel, or nil with a code, "" for success) and
// whether member is in group's member values afterwards.
type memberChange struct {
	name     string
	setup    func(o *org)
	group    func(o *org) *fakeObj
	member   func(o *org) *fakeObj
	want     error
	wantCode string
	inAfter  bool
}

// runMemberChanges runs each case's change against a fresh org.
func runMemberChanges(t *testing.T, tests []memberChange, change func(d *Directory, g, m dirgate.Object) error) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := newOrg()
			d := o.dir(t, Config{})
			g, m := obj(t, d, tt.group(o).guid), obj(t, d, tt.member(o).guid)
			if tt.setup != nil {
				tt.setup(o)
			}
			err := change(d, g, m)
			switch {
			case tt.want != nil:
				if !errors.Is(err, tt.want) {
					t.Fatalf("err = %v, want %v", err, tt.want)
				}
			case tt.wantCode == "":
				if err != nil {
					t.Fatalf("err = %v", err)
				}
			default:
				if code := dirgate.ErrorCode(err); code != tt.wantCode {
					t.Fatalf("err = %v (%s), want %s", err, code, tt.wantCode)
				}
				if dirgate.ErrorMessage(err) == "" || strings.Contains(dirgate.ErrorMessage(err), "CN=") {
					t.Errorf("client message %q", dirgate.ErrorMessage(err))
				}
			}
			if got := contains(tt.group(o).member, tt.member(o).dn); got != tt.inAfter {
				t.Errorf("member in group = %v, want %v", got, tt.inAfter)
			}
		})
	}
}

// TestRemoveMember: the removal's answers, the member's place afterwards (inAfter:
// still in the group).
func TestRemoveMember(t *testing.T) {
	runMemberChanges(t, []memberChange{
		// The ordinary removal.
		{"member", nil, func(o *org) *fakeObj { return o.g1 }, func(o *org) *fakeObj { return o.alice }, nil, "", false},
		// 53 for a non-member.
		{"not member", nil, func(o *org) *fakeObj { return o.g2 }, func(o *org) *fakeObj { return o.alice }, dirgate.ErrNotMember, "", false},
		// 53 when the group is the member's primary group.
		{"primary", nil, func(o *org) *fakeObj { return o.du }, func(o *org) *fakeObj { return o.alice }, dirgate.ErrPrimaryGroup, "", false},
		// 16: the target has no member attribute.
		{"not a group", nil, func(o *org) *fakeObj { return o.bob }, func(o *org) *fakeObj { return o.alice }, nil, dirgate.EINVALID, false},
		// 50: the service account may not write.
		{"forbidden", func(o *org) {
			o.srv.modifyErr = goldap.NewError(goldap.LDAPResultInsufficientAccessRights, errors.New("insufficient access"))
		}, func(o *org) *fakeObj { return o.g1 }, func(o *org) *fakeObj { return o.alice }, nil, dirgate.EFORBIDDEN, true},
		// The connection breaks before the request is sent: the retry removes it.
		{"retry before write", func(o *org) { o.srv.failNext.Store(1) },
			func(o *org) *fakeObj { return o.g1 }, func(o *org) *fakeObj { return o.alice }, nil, "", false},
		// The connection breaks after the write: the retry's 53 is success.
		{"retry after write", func(o *org) { o.srv.applyThenFail.Store(1) },
			func(o *org) *fakeObj { return o.g1 }, func(o *org) *fakeObj { return o.alice }, nil, "", false},
		// A 53 is an answer even when the connection closes right after it: no retry,
		// whose second 53 would pass for success.
		{"answer then close", func(o *org) { o.srv.closeAfterAnswer.Store(true) },
			func(o *org) *fakeObj { return o.g2 }, func(o *org) *fakeObj { return o.alice }, dirgate.ErrNotMember, "", false},
		// Both attempts fail on the network: EUPSTREAM, and nothing was written.
		{"network twice", func(o *org) { o.srv.failNext.Store(2) },
			func(o *org) *fakeObj { return o.g1 }, func(o *org) *fakeObj { return o.alice }, nil, dirgate.EUPSTREAM, true},
	}, func(d *Directory, g, m dirgate.Object) error {
		return d.RemoveMember(context.Background(), g, m)
	})
}

// TestAddMember: the addition's answers, the member's place afterwards.
func TestAddMember(t *testing.T) {
	runMemberChanges(t, []memberChange{
		// The ordinary addition.
		{"new member", nil, func(o *org) *fakeObj { return o.g2 }, func(o *org) *fakeObj { return o.alice }, nil, "", true},
		// 68 for a member already there.
		{"already member", nil, func(o *org) *fakeObj { return o.g1 }, func(o *org) *fakeObj { return o.alice }, dirgate.ErrAlreadyMember, "", true},
		// 68 when the group is the member's primary group (not in member, and stays out).
		{"primary", nil, func(o *org) *fakeObj { return o.du }, func(o *org) *fakeObj { return o.alice }, dirgate.ErrAlreadyMember, "", false},
		// 53 with the primary group: AD's other answer, still "already a member".
		{"primary 53", func(o *org) {
			o.srv.modifyErr = goldap.NewError(goldap.LDAPResultUnwillingToPerform, errors.New("WILL_NOT_PERFORM"))
		}, func(o *org) *fakeObj { return o.du }, func(o *org) *fakeObj { return o.alice }, dirgate.ErrAlreadyMember, "", false},
		// 53 otherwise: AD refuses this change (group scopes), a client error.
		{"unwilling", func(o *org) {
			o.srv.modifyErr = goldap.NewError(goldap.LDAPResultUnwillingToPerform, errors.New("WILL_NOT_PERFORM"))
		}, func(o *org) *fakeObj { return o.g2 }, func(o *org) *fakeObj { return o.alice }, nil, dirgate.EINVALID, false},
		// 20, as RFC 4511 servers say "already there".
		{"attribute or value exists", func(o *org) {
			o.srv.modifyErr = goldap.NewError(goldap.LDAPResultAttributeOrValueExists, errors.New("exists"))
		}, func(o *org) *fakeObj { return o.g2 }, func(o *org) *fakeObj { return o.alice }, dirgate.ErrAlreadyMember, "", false},
		// 65: the target is not a group.
		{"not a group", nil, func(o *org) *fakeObj { return o.bob }, func(o *org) *fakeObj { return o.alice }, nil, dirgate.EINVALID, false},
		// 32: the member vanished after it was resolved.
		{"member gone", func(o *org) {
			o.srv.modifyErr = goldap.NewError(goldap.LDAPResultNoSuchObject, errors.New("specified dn doesn't exist"))
		}, func(o *org) *fakeObj { return o.g2 }, func(o *org) *fakeObj { return o.alice }, nil, dirgate.ENOTFOUND, false},
		// 50: the service account may not write.
		{"forbidden", func(o *org) {
			o.srv.modifyErr = goldap.NewError(goldap.LDAPResultInsufficientAccessRights, errors.New("insufficient access"))
		}, func(o *org) *fakeObj { return o.g2 }, func(o *org) *fakeObj { return o.alice }, nil, dirgate.EFORBIDDEN, false},
		// The connection breaks before the request is sent: the retry adds it.
		{"retry before write", func(o *org) { o.srv.failNext.Store(1) },
			func(o *org) *fakeObj { return o.g2 }, func(o *org) *fakeObj { return o.alice }, nil, "", true},
		// The connection breaks after the write: the retry's 68 is success, not "no changes".
		{"retry after write", func(o *org) { o.srv.applyThenFail.Store(1) },
			func(o *org) *fakeObj { return o.g2 }, func(o *org) *fakeObj { return o.alice }, nil, "", true},
		// A 68 is an answer even when the connection closes right after it.
		{"answer then close", func(o *org) { o.srv.closeAfterAnswer.Store(true) },
			func(o *org) *fakeObj { return o.g1 }, func(o *org) *fakeObj { return o.alice }, dirgate.ErrAlreadyMember, "", true},
		// Both attempts fail on the network: EUPSTREAM, and nothing was written.
		{"network twice", func(o *org) { o.srv.failNext.Store(2) },
			func(o *org) *fakeObj { return o.g2 }, func(o *org) *fakeObj { return o.alice }, nil, dirgate.EUPSTREAM, false},
		// A retry's 68 for a primary-group member is not the first attempt's work:
		// primaryGroupID is never written to member.
		{"primary group on a retry", func(o *org) { o.srv.failNext.Store(1) },
			func(o *org) *fakeObj { return o.du }, func(o *org) *fakeObj { return o.alice }, dirgate.ErrAlreadyMember, "", false},
	}, func(d *Directory, g, m dirgate.Object) error {
		return d.AddMember(context.Background(), g, m)
	})
}

// TestReadRetry: a read that meets a broken connection is retried once on a newly
// dialled one; a second failure is EUPSTREAM.
func TestReadRetry(t *testing.T) {
	o := newOrg()
	d := o.dir(t, Config{})
	dials := o.srv.dials.Load()
	o.srv.failNext.Store(1)
	if _, err := d.Lookup(context.Background(), dirgate.MustParseIdentifier(o.alice.guid), nil); err != nil {
		t.Fatalf("lookup after one failure: %v", err)
	}
	if got := o.srv.dials.Load() - dials; got != 1 {
		t.Errorf("dials = %d, want 1 (the retry's fresh connection)", got)
	}
	g1 := obj(t, d, o.g1.guid)
	o.srv.failNext.Store(2)
	_, err := d.Members(context.Background(), g1, nil)
	if code := dirgate.ErrorCode(err); code != dirgate.EUPSTREAM {
		t.Errorf("two failures: err = %v, want EUPSTREAM", err)
	}
	// The pool recovers: the next call works.
	if _, err := d.Lookup(context.Background(), dirgate.MustParseIdentifier(o.alice.guid), nil); err != nil {
		t.Errorf("lookup after recovery: %v", err)
	}
}

// TestContext: a server that does not answer is cut off by the caller's
// cancellation (ECANCELED) or by the request timeout (ETIMEOUT), and the stuck
// connection is dropped.
func TestContext(t *testing.T) {
	o := newOrg()
	// The attempt timeout above the request's: no hedge, no health check dials (the
	// dial count below is the call's).
	d := o.dir(t, Config{RequestTimeout: 50e6, AttemptTimeout: 60e9})
	o.srv.hang.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := d.Lookup(ctx, dirgate.MustParseIdentifier(o.alice.guid), nil)
	if code := dirgate.ErrorCode(err); code != dirgate.ECANCELED {
		t.Errorf("canceled: err = %v, want ECANCELED", err)
	}
	_, err = d.Members(context.Background(), dirgate.Object{DN: o.g1.dn}, nil)
	if code := dirgate.ErrorCode(err); code != dirgate.ETIMEOUT {
		t.Errorf("request timeout: err = %v, want ETIMEOUT", err)
	}
	o.srv.hang.Store(false)
	dials := o.srv.dials.Load()
	if _, err := d.Lookup(context.Background(), dirgate.MustParseIdentifier(o.alice.guid), nil); err != nil {
		t.Fatal(err)
	}
	if o.srv.dials.Load() != dials+1 {
		t.Errorf("the connection that timed out was reused")
	}
}

func TestTransitiveMembers(t *testing.T) {
	o := newOrg()
	// A cycle G2 -> G3 -> G2, and carol whose primary group is G3.
	g3 := o.srv.add(&fakeObj{dn: "CN=G3," + users, guid: guid(40), sid: domSID + "-1140", classes: []string{"group"}, member: []string{o.g2.dn}})
	o.g2.member = append(o.g2.member, g3.dn)
	carol := o.srv.add(&fakeObj{dn: "CN=carol," + users, guid: guid(41), sid: domSID + "-1141", classes: []string{"user"}, pgid: 1140})
	d := o.dir(t, Config{UseInChain: true})
	got, err := d.TransitiveMembers(context.Background(), obj(t, d, o.g2.guid), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{o.bob.dn, g3.dn, carol.dn}
	slices.Sort(want)
	if fmt.Sprint(dns(got)) != fmt.Sprint(want) {
		t.Errorf("TransitiveMembers(G2) = %v, want %v (G2 itself excluded)", dns(got), want)
	}
	// Off by default.
	d = o.dir(t, Config{})
	if _, err := d.TransitiveMembers(context.Background(), obj(t, d, o.g2.guid), nil); dirgate.ErrorCode(err) != dirgate.EINTERNAL {
		t.Errorf("disabled: err = %v, want EINTERNAL", err)
	}
}

// TestTransitiveMatchesBFS: the in-chain listing is the member service's expansion.
func TestTransitiveMatchesBFS(t *testing.T) {
	o := newOrg()
	g3 := o.srv.add(&fakeObj{dn: "CN=G3," + users, guid: guid(40), sid: domSID + "-1140", classes: []string{"group"}, member: []string{o.g1.dn, o.du.dn}})
	o.g2.member = append(o.g2.member, g3.dn)
	d := o.dir(t, Config{UseInChain: true})
	g := obj(t, d, g3.guid)
	inChain, err := d.TransitiveMembers(context.Background(), g, nil)
	if err != nil {
		t.Fatal(err)
	}
	svc := &dirgate.MemberService{Dir: d}
	l, err := svc.Listing(context.Background(), g, dirgate.ListOptions{IncludeIndirect: true})
	bfs := l.Objects
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(dns(inChain)) != fmt.Sprint(dns(bfs)) {
		t.Errorf("in-chain %v\nBFS      %v", dns(inChain), dns(bfs))
	}
}

// TestPropertiesChecked: a property name with an option would change what the server
// returns; the adapter refuses it before sending anything, whoever called it.
func TestPropertiesChecked(t *testing.T) {
	o := newOrg()
	d := o.dir(t, Config{UseInChain: true})
	g := obj(t, d, o.g1.guid)
	before := len(o.srv.log())
	bad := []string{"member;range=0-1"}
	_, err := d.Lookup(context.Background(), dirgate.MustParseIdentifier(o.g1.guid), bad)
	if dirgate.ErrorCode(err) != dirgate.EINVALID {
		t.Errorf("Lookup: %v, want EINVALID", err)
	}
	if _, err := d.Members(context.Background(), g, bad); dirgate.ErrorCode(err) != dirgate.EINVALID {
		t.Errorf("Members: %v, want EINVALID", err)
	}
	if _, err := d.TransitiveMembers(context.Background(), g, bad); dirgate.ErrorCode(err) != dirgate.EINVALID {
		t.Errorf("TransitiveMembers: %v, want EINVALID", err)
	}
	if n := len(o.srv.log()) - before; n != 0 {
		t.Errorf("%d searches sent", n)
	}
}
