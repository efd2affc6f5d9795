package load

import (
	"fmt"

	"github.com/dirgate/dirgate/test/harness/fixture"
)

// LoadOU holds the groups a load run creates on a domain controller seeded with the
// large fixture. Nothing else is written: the fixture's own groups stay as seeded.
const LoadOU = "OU=dirgate-load," + fixture.BaseDN

// Properties are the extra properties of the listings "with properties".
var Properties = []string{"mail", "department", "title", "accountExpires"}

// Caller indexes of the workloads built here.
const (
	CallerAdmin    = 0 // views and removes everything (Directory Admins)
	CallerHelpdesk = 1 // views users and computers of the staff and workstation OUs
	CallerNobody   = 2 // holds no role: every group is answered as unknown (404)
	// CallerHalf views the objects below HalfSubtrees (about half of every load
	// group) through the one role Setup.WritePolicy adds; LargeSetup only.
	CallerHalf = 3
)

// HalfSubtrees are the OUs CallerHalf may view: two of the four staff OUs, which the
// load groups' users are spread over evenly.
var HalfSubtrees = []string{fixture.FinanceOU, fixture.HROU}

// GroupSpec is a group the run creates (or corrects) with exactly these members.
type GroupSpec struct {
	DN      string
	Members []string
}

// Setup is the organisation a workload runs against: the groups it lists, the
// groups it must create first, and its callers (without tokens).
type Setup struct {
	Small, Medium, Large string // about 10, 200 and 2,000 members
	Thousand             string // exactly 1,000 direct members: the target listing
	Create               []GroupSpec
	Callers              []Caller
	Removals             []RemovalGroup
}

// LargeSetup describes the load groups for a domain controller seeded with the large
// fixture. They hold ordinary staff users that no fixture group but All Staff lists,
// so that the fixture's own checks (memberOf of the named users) are unaffected:
//
//	Load 10     9 users + Load 10 Inner (3 users)      direct 10,    indirect 13
//	Load 200    199 users + Load 10                    direct 200,   indirect 213
//	Load 1000   999 users + Load 200                   direct 1,000, indirect 1,213
//	Load Removal 1..4   20 users each, cycled by removals
//
// The large group is the fixture's All Staff (2,061 users, flat).
func LargeSetup(org *fixture.Org) (Setup, error) {
	pool := plainStaff(org)
	need := 3 + 9 + 199 + 999 + 4*20 + 2
	if len(pool) < need {
		return Setup{}, fmt.Errorf("load: the organisation has %d plain staff users, %d needed", len(pool), need)
	}
	take := func(n int) []string {
		out := pool[:n]
		pool = pool[n:]
		return out
	}
	g := func(name string) string { return "CN=" + name + "," + LoadOU }
	s := Setup{Small: g("Load 10"), Medium: g("Load 200"), Thousand: g("Load 1000"), Large: fixture.AllStaffDN}
	inner := g("Load 10 Inner")
	s.Create = []GroupSpec{
		{inner, take(3)},
		{s.Small, append(take(9), inner)},
		{s.Medium, append(take(199), s.Small)},
		{s.Thousand, append(take(999), s.Medium)},
	}
	for i := 1; i <= 4; i++ {
		rg := GroupSpec{g(fmt.Sprintf("Load Removal %d", i)), take(20)}
		s.Create = append(s.Create, rg)
		s.Removals = append(s.Removals, RemovalGroup{Group: rg.DN, Members: rg.Members})
	}
	s.Callers = callers(take(1)[0])
	s.Callers = append(s.Callers, Caller{Name: "half", Subject: take(1)[0]})
	return s, nil
}

// DemoSetup describes the demo organisation (the memory upstream's embedded
// directory) at the same roles: it needs no groups created, and its removal groups
// are the fixture's own. Its groups are small: it exercises the tool, not dirgate.
func DemoSetup(org *fixture.Org) Setup {
	s := Setup{Small: fixture.HelpDeskDN, Medium: fixture.ITDepartmentDN, Large: fixture.AllStaffDN, Thousand: fixture.AllStaffDN}
	for _, dn := range []string{fixture.RemovalDN, fixture.ConcurrentRemovalDN} {
		rg := RemovalGroup{Group: dn}
		for _, m := range org.DirectMembers(org.MustObject(dn)) {
			rg.Members = append(rg.Members, m.DN)
		}
		s.Removals = append(s.Removals, rg)
	}
	s.Callers = callers(fixture.FutureExpiryDN)
	return s
}

func callers(nobody string) []Caller {
	return []Caller{
		CallerAdmin:    {Name: "admin", Subject: fixture.DemoAdminDN},
		CallerHelpdesk: {Name: "helpdesk", Subject: fixture.DemoHelpdeskDN},
		CallerNobody:   {Name: "nobody", Subject: nobody},
	}
}

// plainStaff returns the users under OU=Staff that no fixture group lists but All
// Staff and whose primary group is Domain Users, in the fixture's order.
func plainStaff(org *fixture.Org) []string {
	listed := map[*fixture.Object]bool{}
	for _, grp := range org.OfKind(fixture.KindGroup) {
		if grp.DN == fixture.AllStaffDN {
			continue
		}
		for _, m := range grp.Members {
			listed[m] = true
		}
	}
	du := org.MustObject(fixture.DomainUsersDN)
	var out []string
	for _, u := range org.OfKind(fixture.KindUser) {
		if !listed[u] && u.PrimaryGroup == du && dnKey(u.DN) != dnKey(fixture.DemoAdminDN) &&
			hasSuffixKey(u.DN, fixture.StaffOU) {
			out = append(out, u.DN)
		}
	}
	return out
}

func hasSuffixKey(dn, parent string) bool {
	k, p := dnKey(dn), dnKey(parent)
	return len(k) > len(p) && k[len(k)-len(p)-1:] == ","+p
}

// OneCaller is the direct listing of group, without properties, by one caller.
func (s Setup) OneCaller(name, group string, caller int) Workload {
	return Workload{Name: name, Callers: s.Callers, Ops: []Op{
		{Name: name, Kind: OpList, Caller: caller, Query: Query{Group: group}, Weight: 1},
	}}
}

// ThousandWorkload is the target workload: the cached 1,000-member listing, direct,
// without properties, by the two callers that see it (the administrator all 1,000
// objects, the help desk the 999 users).
func (s Setup) ThousandWorkload() Workload {
	q := Query{Group: s.Thousand}
	return Workload{Name: "list1000", Callers: s.Callers, Ops: []Op{
		{Name: "Load 1000 as admin", Kind: OpList, Caller: CallerAdmin, Query: q, Weight: 1},
		{Name: "Load 1000 as helpdesk", Kind: OpList, Caller: CallerHelpdesk, Query: q, Weight: 1},
	}}
}

// MixWorkload lists the small, medium and large groups directly and through nesting,
// with and without properties, as each caller, in equal shares; lists the removal
// groups; and runs removal cycles (remove through dirgate, list, re-add through the
// directory) as the administrator in about 2% of operations.
func (s Setup) MixWorkload() Workload {
	w := Workload{Name: "mix", Callers: s.Callers, Removals: s.Removals}
	for _, grp := range []struct{ name, dn string }{{"small", s.Small}, {"medium", s.Medium}, {"large", s.Large}} {
		for _, indirect := range []bool{false, true} {
			for _, props := range [][]string{nil, Properties} {
				for ci, c := range s.Callers[:min(len(s.Callers), CallerNobody+1)] {
					q := Query{Group: grp.dn, Indirect: indirect, Properties: props}
					name := fmt.Sprintf("%s indirect=%t props=%t as %s", grp.name, indirect, props != nil, c.Name)
					w.Ops = append(w.Ops, Op{Name: name, Kind: OpList, Caller: ci, Query: q, Weight: 10})
				}
			}
		}
	}
	for _, rg := range s.Removals {
		for _, ci := range []int{CallerAdmin, CallerHelpdesk} {
			w.Ops = append(w.Ops, Op{Name: "removal group as " + s.Callers[ci].Name, Kind: OpList, Caller: ci,
				Query: Query{Group: rg.Group}, Weight: 2})
		}
	}
	if len(s.Removals) > 0 {
		w.Ops = append(w.Ops, Op{Name: "removal cycle", Kind: OpRemoveCycle, Caller: CallerAdmin, Weight: 8})
	}
	return w
}
