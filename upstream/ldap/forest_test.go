package ldap

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/ldapentry"
	"github.com/dirgate/dirgate/test/harness/sambatest"
	goldap "github.com/go-ldap/ldap/v3"
)

const (
	emeaNC  = "DC=emea,DC=corp,DC=example,DC=com" // a child domain: below the base DN
	apacNC  = "DC=apac,DC=example,DC=com"         // another tree of the forest
	emeaSID = "S-1-5-21-4-5-6"
)

// forestOrg is newOrg in a forest of three domains: G1 also holds a user of the
// child domain and a group of the other tree, which its DC knows only as phantoms.
func forestOrg() (*org, *fakeObj, *fakeObj) {
	o := newOrg()
	eve := &fakeObj{dn: "CN=eve,CN=Users," + emeaNC, guid: guid(30), sid: emeaSID + "-1500"}
	apac := &fakeObj{dn: "CN=Staff,CN=Users," + apacNC, guid: guid(31), sid: "S-1-5-21-7-8-9-1600"}
	o.srv.forest = []string{emeaNC, apacNC}
	o.srv.phantoms = map[string]*fakeObj{
		dirgate.MustParseDN(eve.dn).Key(): eve, dirgate.MustParseDN(apac.dn).Key(): apac,
	}
	o.g1.member = append(o.g1.member, eve.dn, apac.dn)
	return o, eve, apac
}

// TestForestMembersListsOtherDomainsReferences: a member held by another domain of
// the forest (a child domain below the base DN, or another tree) is listed as a
// reference with its DN, GUID and SID, read from the member values with
// the extended DN control through every range; the group's own members are listed
// as before.
func TestForestMembersListsOtherDomainsReferences(t *testing.T) {
	o, eve, apac := forestOrg()
	o.srv.maxValRange = 2 // G1's seven values come in four ranges
	d := o.dir(t, Config{})
	if fmt.Sprint(d.ForestDomainNCs()) != fmt.Sprint([]string{emeaNC, apacNC}) {
		t.Fatalf("forest's other domains %v", d.ForestDomainNCs())
	}
	if d.inScope(eve.dn) || !d.inScope(o.alice.dn) {
		t.Errorf("scope: the child domain's DN in scope %v, alice's %v", d.inScope(eve.dn), d.inScope(o.alice.dn))
	}
	before := len(o.srv.log())
	got, err := d.Members(context.Background(), obj(t, d, o.g1.dn), []string{"description"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{o.alice.dn, o.g2.dn, o.fsp.dn, o.contact.dn, eve.dn, apac.dn}
	slices.Sort(want)
	if !slices.Equal(dns(got), want) {
		t.Fatalf("members = %v, want %v", dns(got), want)
	}
	for _, g := range got {
		if g.Unresolved {
			t.Errorf("%s: Unresolved: only the router marks what a failing domain did not resolve", g.DN)
		}
		if g.DN != eve.dn && g.DN != apac.dn {
			continue
		}
		p := map[string]*fakeObj{eve.dn: eve, apac.dn: apac}[g.DN]
		if g.GUID != p.guid || g.SID != p.sid || g.ObjectType != "" || len(g.Properties["description"]) != 0 {
			t.Errorf("reference %+v, want GUID %s SID %s and nothing more", g, p.guid, p.sid)
		}
	}
	if got[slices.IndexFunc(got, func(g dirgate.Object) bool { return g.DN == eve.dn })].DomainName != "emea.corp.example.com" {
		t.Errorf("eve's domain name is not her DN's")
	}
	// The values are read with the extended DN control, which every range request
	// carries.
	ranged := 0
	for _, s := range o.srv.log()[before:] {
		if strings.Contains(s, "member;range=") {
			ranged++
			if !strings.Contains(s, goldap.ControlTypeMicrosoftExtendedDN) {
				t.Errorf("range request without the extended DN control: %s", s)
			}
		}
	}
	if ranged != 3 {
		t.Errorf("%d range requests, want 3", ranged)
	}
	// An object of the child domain is not this domain's to look up.
	if _, err := d.Lookup(context.Background(), dirgate.MustParseIdentifier(eve.dn), nil); dirgate.ErrorCode(err) != dirgate.ENOTFOUND {
		t.Errorf("lookup of the child domain's object: %v, want not found", err)
	}
}

// TestForestMembersAloneReadsNoValues: a domain alone in its forest lists as it
// always did, without reading the member values.
func TestForestMembersAloneReadsNoValues(t *testing.T) {
	o := newOrg()
	d := o.dir(t, Config{})
	if len(d.ForestDomainNCs()) != 0 {
		t.Fatalf("other domains of the forest: %v", d.ForestDomainNCs())
	}
	before := len(o.srv.log())
	if _, err := d.Members(context.Background(), obj(t, d, o.g1.dn), nil); err != nil {
		t.Fatal(err)
	}
	for _, s := range o.srv.log()[before:] {
		if strings.Contains(s, goldap.ControlTypeMicrosoftExtendedDN) {
			t.Errorf("member values read in a forest of one domain: %s", s)
		}
	}
}

// TestForestGroupsHolding finds the groups that hold another domain's object by its
// DN, and none where the forest holds no other domain.
func TestForestGroupsHolding(t *testing.T) {
	o, eve, _ := forestOrg()
	d := o.dir(t, Config{})
	got, err := d.GroupsHolding(context.Background(), []dirgate.DN{dirgate.MustParseDN(eve.dn)})
	if err != nil || !slices.Equal(dns(got), []string{o.g1.dn}) {
		t.Errorf("groups holding eve = %v, %v; want G1", dns(got), err)
	}
	// Many DNs go in searches of holdingChunk each; G2 holds bob, asked last.
	many := []dirgate.DN{dirgate.MustParseDN(eve.dn)}
	for i := range 2 * holdingChunk {
		many = append(many, dirgate.MustParseDN(fmt.Sprintf("CN=u%d,CN=Users,%s", i, emeaNC)))
	}
	many = append(many, dirgate.MustParseDN(o.bob.dn))
	before := o.srv.holdingFilters
	got, err = d.GroupsHolding(context.Background(), many)
	if err != nil || !slices.Equal(dns(got), []string{o.g1.dn, o.g2.dn}) || o.srv.holdingFilters-before != 3 {
		t.Errorf("groups holding %d DNs = %v, %v in %d searches; want G1 and G2 in 3", len(many), dns(got), err, o.srv.holdingFilters-before)
	}
	alone := newOrg()
	got, err = alone.dir(t, Config{}).GroupsHolding(context.Background(), []dirgate.DN{dirgate.MustParseDN(eve.dn)})
	if err != nil || len(got) != 0 {
		t.Errorf("alone in its forest: %v, %v", dns(got), err)
	}
}

// TestForestBadCrossRef: a forest with a crossRef naming no DN, read in part,
// leaves the domain listing its own members, and Open succeeds.
func TestForestBadCrossRef(t *testing.T) {
	o, _, _ := forestOrg()
	o.srv.forest = []string{emeaNC, "not a DN"}
	d := o.dir(t, Config{})
	if len(d.ForestDomainNCs()) != 0 {
		t.Errorf("a forest with a crossRef naming no DN kept: %v", d.ForestDomainNCs())
	}
}

func TestParseExtendedDN(t *testing.T) {
	const g = "38343208-2623-4687-9489-51e5cb448fdc"
	tests := []struct {
		in            string
		guid, sid, dn string // guid "" means an error
	}{
		{"<GUID=" + g + ">;<SID=S-1-5-21-1-2-3-500>;CN=Administrator,CN=Users,DC=corp", g, "S-1-5-21-1-2-3-500", "CN=Administrator,CN=Users,DC=corp"},
		{"<GUID=" + strings.ToUpper(g) + ">;CN=Sites,CN=Configuration,DC=corp", g, "", "CN=Sites,CN=Configuration,DC=corp"},
		{"<SID=S-1-5-21-1-2-3-500>;<GUID=" + g + ">;CN=x\\;y,DC=corp", g, "S-1-5-21-1-2-3-500", "CN=x\\;y,DC=corp"},
		{"CN=plain,DC=corp", "", "", ""},                          // no GUID
		{"<GUID=" + g + ">", "", "", ""},                          // no DN
		{"<GUID=" + g + ">CN=x,DC=corp", "", "", ""},              // no ';'
		{"<GUID=" + g + ";CN=x,DC=corp", "", "", ""},              // unterminated
		{"<GUID=nope>;CN=x,DC=corp", "", "", ""},                  // bad GUID
		{"<GUID=" + g + ">;<SID=S-1-x>;CN=x,DC=corp", "", "", ""}, // bad SID
		{"<GUID=" + g + ">;<GUID=" + g + ">;CN=x,DC=corp", "", "", ""},
		{"<WKGUID=" + g + ">;<GUID=" + g + ">;CN=x,DC=corp", "", "", ""},
		{"<GUID=" + g + ">;CN=x,=bad", "", "", ""},
	}
	for _, tt := range tests {
		got, err := parseExtendedDN(tt.in)
		if tt.guid == "" {
			if err == nil {
				t.Errorf("%q: parsed as %+v, want an error", tt.in, got)
			}
			continue
		}
		if err != nil || got != (extendedDN{tt.guid, tt.sid, tt.dn}) {
			t.Errorf("%q = %+v, %v", tt.in, got, err)
		}
	}
}

// FuzzParseExtendedDN: a DC's member value never panics the parser, and what it
// accepts carries a canonical GUID and a DN that parses.
func FuzzParseExtendedDN(f *testing.F) {
	f.Add("<GUID=38343208-2623-4687-9489-51e5cb448fdc>;<SID=S-1-5-21-1-2-3-500>;CN=a,DC=b")
	f.Add("<GUID=38343208-2623-4687-9489-51e5cb448fdc>;CN=a,DC=b")
	f.Add("<SID=S-1-5-21-1-2-3-500>;;CN=a")
	f.Add("<>;<")
	f.Fuzz(func(t *testing.T, s string) {
		x, err := parseExtendedDN(s)
		if err != nil {
			return
		}
		if id, err := dirgate.ParseIdentifier(x.guid); err != nil || id.Canonical() != x.guid {
			t.Errorf("%q: GUID %q not canonical", s, x.guid)
		}
		if _, err := dirgate.ParseDN(x.dn); err != nil {
			t.Errorf("%q: DN %q does not parse", s, x.dn)
		}
		if _, err := x.object(nil, time.Time{}); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	})
}

// TestIntegrationForestMembers reads, from the harness DC, a group that holds an
// object of another naming context of the DC (CN=Sites in the configuration
// partition) beside a user. Samba holds one domain per forest, so the test counts
// the configuration partition among the forest's other domains: the member values
// are then read with the extended DN control from the real DC, and the reference
// carries the object's GUID; the user comes from the attribute scoped query as
// always. The DC's own forest is read as one domain, with its root.
func TestIntegrationForestMembers(t *testing.T) {
	dc := sambatest.Env(t)
	configNC := "CN=Configuration," + dc.BaseDN
	sites := "CN=Sites," + configNC
	admin := "CN=Administrator,CN=Users," + dc.BaseDN
	group := dc.TempGroup(t, "forest-members", sites, admin)
	d := openDC(t, dcConfig(dc))
	if len(d.ForestDomainNCs()) != 0 {
		t.Fatalf("other domains of the forest: %v, want none", d.ForestDomainNCs())
	}
	g := mustLookup(t, d, group)
	got, err := d.Members(context.Background(), g, nil)
	if err != nil || !slices.Equal(keys(got), dnKeys(admin)) {
		t.Fatalf("members alone in the forest = %v, %v; want the administrator", keys(got), err)
	}
	var sitesGUID string
	err = d.do(context.Background(), true, func(ctx context.Context, c conn, _ int) error {
		return search(ctx, c, query{base: sites, scope: goldap.ScopeBaseObject, filter: "(objectClass=*)", attrs: []string{"objectGUID"}},
			func(e *goldap.Entry) error {
				sitesGUID = ldapentry.GUIDFromBytes(e.GetRawAttributeValue("objectGUID"))
				return nil
			})
	})
	if err != nil || sitesGUID == "" {
		t.Fatalf("read CN=Sites: %v", err)
	}
	d.forestNCs = append(d.forestNCs, dirgate.MustParseDN(configNC))
	for _, asq := range []bool{true, false} {
		d.asq = asq
		got, err = d.Members(context.Background(), g, nil)
		if err != nil || !slices.Equal(keys(got), dnKeys(admin, sites)) {
			t.Fatalf("asq=%v: members = %v, %v; want the administrator and CN=Sites", asq, keys(got), err)
		}
		for _, o := range got {
			if o.DN != admin && o.GUID != sitesGUID {
				t.Errorf("reference GUID %s, want %s", o.GUID, sitesGUID)
			}
		}
	}
	holding, err := d.GroupsHolding(context.Background(), []dirgate.DN{dirgate.MustParseDN(sites)})
	if err != nil || !slices.Contains(keys(holding), dnKeys(group)[0]) {
		t.Errorf("groups holding CN=Sites = %v, %v; want the group among them", keys(holding), err)
	}
}

// TestForestChildOwnObjectsOutsideBase: a child domain served under an OU lists
// neither its own objects outside that OU nor the parent's objects as its own; the
// parent's user is a reference, its own object outside the OU is left out, as
// before: the parent's naming context holds that DN too, but the child's own,
// deeper, is the one it lies in.
func TestForestChildOwnObjectsOutsideBase(t *testing.T) {
	s := newFakeServer()
	s.domain = emeaNC
	s.forest = []string{s.domain[len("DC=emea,"):]} // the parent, DC=corp,…
	parentUser := &fakeObj{dn: "CN=pat," + users, guid: guid(40), sid: domSID + "-1300"}
	s.phantoms = map[string]*fakeObj{dirgate.MustParseDN(parentUser.dn).Key(): parentUser}
	s.add(&fakeObj{dn: emeaNC, guid: guid(41), sid: emeaSID, classes: []string{"domain", "domainDNS"}})
	in := s.add(&fakeObj{dn: "CN=in,OU=Staff," + emeaNC, guid: guid(42), sid: emeaSID + "-1101", classes: []string{"user"}})
	out := s.add(&fakeObj{dn: "CN=svc,OU=Service," + emeaNC, guid: guid(43), sid: emeaSID + "-1102", classes: []string{"user"}})
	g := s.add(&fakeObj{dn: "CN=G,OU=Staff," + emeaNC, guid: guid(44), sid: emeaSID + "-1103", classes: []string{"group"},
		member: []string{in.dn, out.dn, parentUser.dn}})
	d, err := newFakeDirectory(s, Config{BaseDN: "OU=Staff," + emeaNC})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	got, err := d.Members(context.Background(), obj(t, d, g.dn), nil)
	if want := []string{in.dn, parentUser.dn}; err != nil || !slices.Equal(dns(got), want) {
		t.Errorf("members = %v, %v; want %v", dns(got), err, want)
	}
}

// TestForestMemberOfAnotherDomainNotPrimary: a member of another domain whose
// primaryGroupID (a RID of its own domain) happens to be this group's RID is no
// primary member: AD's refusal of the addition is a refused addition, not "already
// a member", and a removal of a non-member is "not a member".
func TestForestMemberOfAnotherDomainNotPrimary(t *testing.T) {
	o, eve, _ := forestOrg()
	d := o.dir(t, Config{})
	g := obj(t, d, o.g2.dn) // RID 1103
	member := dirgate.Object{DN: eve.dn, GUID: eve.guid, SID: eve.sid, ObjectType: dirgate.TypeUser, PrimaryGroupID: 1103}
	o.srv.modifyErr = goldap.NewError(goldap.LDAPResultUnwillingToPerform, errors.New("group scope"))
	err := d.AddMember(context.Background(), g, member)
	if errors.Is(err, dirgate.ErrAlreadyMember) || dirgate.ErrorCode(err) != dirgate.EINVALID {
		t.Errorf("refused addition: %v, want EINVALID", err)
	}
	err = d.RemoveMember(context.Background(), g, member)
	if errors.Is(err, dirgate.ErrPrimaryGroup) || !errors.Is(err, dirgate.ErrNotMember) {
		t.Errorf("removal of a non-member: %v, want not a member", err)
	}
}
