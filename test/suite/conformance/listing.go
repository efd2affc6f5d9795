package conformance

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/test/harness/fixture"
)

// Every seeded group lists exactly its member values plus its primary-group members,
// each object rendered as the fixture describes it, in listing order. This covers the
// group of more than 2,000 members (beyond AD's 1,500-value range) among the others.
func (s *suite) testDirectMembersOfEveryGroup(t *testing.T) {
	for _, g := range seededGroups(s.org) {
		got := s.list(t, g.DN, dirgate.ListOptions{})
		want := s.org.DirectMembers(g)
		sameObjects(t, g.DN, got, want)
		if !slices.IsSortedFunc(got, listingOrder) {
			t.Errorf("%s: listing is not ordered by DN (case-insensitive), then GUID", g.DN)
		}
		have := byKey(t, got)
		for _, w := range want {
			if o, ok := have[w.Key()]; ok {
				checkObject(t, o, w)
				if len(o.Properties) != 0 {
					t.Errorf("%s: properties %v without any requested", o.DN, o.Properties)
				}
			}
		}
	}
	if big := s.org.MustObject(fixture.AllStaffDN); s.org.Scale == fixture.LargeScale {
		if n := len(s.org.DirectMembers(big)); n <= 1500 {
			t.Fatalf("the large fixture's All Staff has %d members; the suite needs more than 1,500", n)
		}
	}
}

func listingOrder(a, b dirgate.Object) int {
	if c := strings.Compare(strings.ToLower(a.DN), strings.ToLower(b.DN)); c != 0 {
		return c
	}
	return strings.Compare(a.GUID, b.GUID)
}

// With includeIndirect, every seeded group lists its transitive members: nested groups
// included, each object once, the group itself never, even through a cycle.
func (s *suite) testIndirectMembersOfEveryGroup(t *testing.T) {
	for _, g := range seededGroups(s.org) {
		got := s.list(t, g.DN, dirgate.ListOptions{IncludeIndirect: true})
		sameObjects(t, g.DN+" (indirect)", got, s.org.TransitiveMembers(g))
		if _, self := byKey(t, got)[g.Key()]; self {
			t.Errorf("%s lists itself", g.DN)
		}
	}
}

// The chain nests five groups: the outermost lists the innermost group's members only
// with includeIndirect.
func (s *suite) testFiveDeepChain(t *testing.T) {
	outer := fixture.ChainDNs[0]
	inner := s.org.MustObject(fixture.ChainDNs[len(fixture.ChainDNs)-1])
	direct := byKey(t, s.list(t, outer, dirgate.ListOptions{}))
	indirect := byKey(t, s.list(t, outer, dirgate.ListOptions{IncludeIndirect: true}))
	for _, dn := range fixture.ChainDNs[1:] {
		if _, ok := indirect[fixture.DNKey(dn)]; !ok {
			t.Errorf("indirect listing of %s lacks nested group %s", outer, dn)
		}
	}
	if _, ok := direct[inner.Key()]; ok {
		t.Errorf("direct listing of %s holds %s, which is four levels down", outer, inner.DN)
	}
	for _, m := range inner.Members {
		if _, ok := indirect[m.Key()]; !ok {
			t.Errorf("indirect listing of %s lacks %s from the fifth level", outer, m.DN)
		}
	}
}

// Both cycles terminate; each group lists the other groups of its cycle and their
// members, never itself.
func (s *suite) testCycles(t *testing.T) {
	for _, cycle := range [][]string{
		{fixture.ProjectAlphaDN, fixture.ProjectBetaDN},
		{fixture.SalesEastDN, fixture.SalesWestDN, fixture.SalesNorthDN},
	} {
		for _, dn := range cycle {
			got := byKey(t, s.list(t, dn, dirgate.ListOptions{IncludeIndirect: true}))
			if _, self := got[fixture.DNKey(dn)]; self {
				t.Errorf("%s lists itself through its cycle", dn)
			}
			for _, other := range cycle {
				if other == dn {
					continue
				}
				if _, ok := got[fixture.DNKey(other)]; !ok {
					t.Errorf("%s does not list %s", dn, other)
				}
				for _, m := range s.org.MustObject(other).Members {
					if _, ok := got[m.Key()]; !ok && m.Key() != fixture.DNKey(dn) {
						t.Errorf("%s does not list %s (member of %s)", dn, m.DN, other)
					}
				}
			}
		}
	}
}

// A member whose primaryGroupID names the group is listed although the group's member
// attribute leaves it out, directly and indirectly.
func (s *suite) testPrimaryGroupMember(t *testing.T) {
	for _, indirect := range []bool{false, true} {
		got := byKey(t, s.list(t, fixture.FinanceTeamDN, dirgate.ListOptions{IncludeIndirect: indirect}))
		if _, ok := got[fixture.DNKey(fixture.PrimaryMemberDN)]; !ok {
			t.Errorf("Finance Team (indirect=%v) lacks its primary-group member %s", indirect, fixture.PrimaryMemberDN)
		}
	}
}

// Members of every kind render with their type, code and (for accounts only) status.
func (s *suite) testMixedKinds(t *testing.T) {
	mixed := s.org.MustObject(fixture.MixedDN)
	got := byKey(t, s.list(t, mixed.DN, dirgate.ListOptions{}))
	kinds := map[fixture.Kind]bool{}
	for _, w := range mixed.Members {
		o, ok := got[w.Key()]
		if !ok {
			t.Errorf("Mixed Members lacks %s", w.DN)
			continue
		}
		kinds[w.Kind] = true
		checkObject(t, o, w)
		// A computer is a trust account: its password never expires
		// (docs/directory.md, "userAccountControl and its computed twin").
		if w.Kind == fixture.KindComputer && (o.PasswordStatus.ExpirationStatus != dirgate.PasswordNotExpired || o.PasswordStatus.ExpirationDate != nil) {
			t.Errorf("computer %s: password status %+v, want not expired and no expiry", w.DN, o.PasswordStatus)
		}
	}
	if len(kinds) != 5 {
		t.Errorf("Mixed Members covers kinds %v, want user, contact, computer, group and foreignSecurityPrincipal", kinds)
	}
}

// Each state account shows its state. Password status is only checked where every
// directory agrees: accounts the harness gives a password. The others are created
// without one, which a DC shows as "must change" and an export as a valid password.
func (s *suite) testAccountStates(t *testing.T) {
	group := s.org.MustObject(fixture.AccountStatesDN)
	got := byKey(t, s.list(t, group.DN, dirgate.ListOptions{}))
	now := time.Now()
	for _, w := range group.Members {
		o, ok := got[w.Key()]
		if !ok {
			t.Errorf("Account States lacks %s", w.DN)
			continue
		}
		if o.AccountStatus == nil || o.PasswordStatus == nil {
			t.Errorf("%s: no account or password status", w.DN)
			continue
		}
		a, p := o.AccountStatus, o.PasswordStatus
		if a.IsDisabled != w.Account.Disabled || a.IsLocked != w.Account.Locked {
			t.Errorf("%s: disabled %v locked %v, want %v %v", w.DN, a.IsDisabled, a.IsLocked, w.Account.Disabled, w.Account.Locked)
		}
		switch {
		case w.Account.Expires.IsZero() && a.ExpirationDate != nil:
			t.Errorf("%s: account expires %v, want never", w.DN, a.ExpirationDate)
		case !w.Account.Expires.IsZero() && (a.ExpirationDate == nil || !a.ExpirationDate.Equal(w.Account.Expires)):
			t.Errorf("%s: account expires %v, want %v", w.DN, a.ExpirationDate, w.Account.Expires)
		}
		if w.Account.Password == "" {
			continue
		}
		switch {
		case w.Account.MustChange:
			if p.ExpirationStatus != dirgate.PasswordExpired || p.ExpirationDate != nil || p.WhenChanged != nil {
				t.Errorf("%s: password %+v, want expired, never set, no expiry date", w.DN, p)
			}
		case w.Account.NeverExpires:
			if p.ExpirationStatus != dirgate.PasswordNotExpired || p.ExpirationDate != nil || p.WhenChanged == nil {
				t.Errorf("%s: password %+v, want not expired, set, no expiry date", w.DN, p)
			}
		default:
			if p.ExpirationStatus != dirgate.PasswordNotExpired || p.WhenChanged == nil || p.ExpirationDate == nil || !p.ExpirationDate.After(now) {
				t.Errorf("%s: password %+v, want set and expiring in the future", w.DN, p)
			}
		}
	}
}

var isoTime = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$`)

// Requested properties come back under lower-case keys, one per requested name, as
// arrays: [] for an attribute the object lacks; GUIDs and SIDs in string form;
// FILETIMEs with seven fractional digits or "never"; GeneralizedTimes in ISO 8601.
func (s *suite) testProperties(t *testing.T) {
	props, err := dirgate.NormalizeProperties([]string{"Department", "objectGUID", "objectSid", "accountExpires",
		"whenCreated", "mail", "memberOf", "facsimileTelephoneNumber", "TITLE", "pwdLastSet"})
	if err != nil {
		t.Fatal(err)
	}
	for _, gdn := range []string{fixture.AccountStatesDN, fixture.MixedDN} {
		for _, o := range s.list(t, gdn, dirgate.ListOptions{Properties: props}) {
			w := s.org.Object(o.DN)
			if w == nil {
				t.Errorf("%s lists unknown %s", gdn, o.DN)
				continue
			}
			s.checkProperties(t, o, w, props)
		}
	}
}

func (s *suite) checkProperties(t *testing.T, o dirgate.Object, w *fixture.Object, props []string) {
	t.Helper()
	if len(o.Properties) != len(props) {
		t.Errorf("%s: properties %v, want exactly the keys %v", w.DN, o.Properties, props)
	}
	for _, p := range props {
		if v, ok := o.Properties[p]; !ok || v == nil {
			t.Errorf("%s: property %q missing or null", w.DN, p)
		}
	}
	P := o.Properties
	opt := func(v string) []string {
		if v == "" {
			return []string{}
		}
		return []string{v}
	}
	expect := func(name string, got, want []string) {
		if !slices.Equal(got, want) {
			t.Errorf("%s: %s = %q, want %q", w.DN, name, got, want)
		}
	}
	expect("objectguid", P["objectguid"], []string{o.GUID})
	expect("department", P["department"], opt(w.Department))
	expect("mail", P["mail"], opt(w.Mail))
	expect("title", P["title"], opt(w.Title))
	expect("facsimiletelephonenumber", P["facsimiletelephonenumber"], []string{})
	if w.SID != "" || w.Kind.IsPrincipal() {
		if sid := P["objectsid"]; len(sid) != 1 || sid[0] != o.SID || !strings.HasPrefix(sid[0], "S-1-5-") {
			t.Errorf("%s: objectsid = %q, want [%q]", w.DN, sid, o.SID)
		}
	} else {
		expect("objectsid", P["objectsid"], []string{})
	}
	if wc := P["whencreated"]; len(wc) != 1 || !isoTime.MatchString(wc[0]) {
		t.Errorf("%s: whencreated = %q, want one ISO 8601 UTC time", w.DN, wc)
	}
	if w.Kind.HasAccount() {
		want := "never"
		if !w.Account.Expires.IsZero() {
			want = w.Account.Expires.UTC().Format(dirgate.TimestampLayout)
		}
		expect("accountexpires", P["accountexpires"], []string{want})
		if w.Account.MustChange {
			expect("pwdlastset", P["pwdlastset"], []string{"never"})
		}
	}
	var wantGroups []string
	for _, g := range s.org.MemberOf(w) {
		wantGroups = append(wantGroups, g.Key())
	}
	var gotGroups []string
	for _, dn := range P["memberof"] {
		gotGroups = append(gotGroups, keyOf(t, dn))
	}
	for _, k := range wantGroups {
		if !slices.Contains(gotGroups, k) {
			t.Errorf("%s: memberof %q lacks %s", w.DN, P["memberof"], k)
		}
	}
	// A DC makes built-in principals members of built-in groups the fixture does not know.
	if !w.Builtin && len(gotGroups) != len(wantGroups) {
		t.Errorf("%s: memberof %q, want %d groups", w.DN, P["memberof"], len(wantGroups))
	}
}

// sizeLimit keeps the first objects of the ordered listing.
func (s *suite) testSizeLimit(t *testing.T) {
	all := s.list(t, fixture.AllStaffDN, dirgate.ListOptions{})
	for _, n := range []int{1, 10, len(all), len(all) + 5} {
		got := s.list(t, fixture.AllStaffDN, dirgate.ListOptions{SizeLimit: n})
		want := all[:min(n, len(all))]
		if len(got) != len(want) {
			t.Errorf("sizeLimit %d: %d objects, want %d", n, len(got), len(want))
			continue
		}
		for i := range want {
			if got[i].GUID != want[i].GUID {
				t.Errorf("sizeLimit %d: object %d is %s, want %s", n, i, got[i].DN, want[i].DN)
				break
			}
		}
	}
}
