package load

import (
	"os"
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/test/harness/ci"
	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/test/harness/sambatest"
	"github.com/dirgate/dirgate/upstream/ldap"
)

// The direct-LDAP baseline against the harness DC finds exactly the DNs of each
// unfiltered listing (nested, cyclic, with primary-group members), and an expected
// set that differs by one DN makes every answer wrong. Only fixture groups are read:
// the test writes nothing to the shared DC.
func TestLDAPTarget(t *testing.T) {
	dc := sambatest.Env(t)
	if dc.FixtureDir == "" {
		// make test seeds the fixture; only a hand-started smoke DC lacks it.
		ci.SkipOrFail(t, "the DC was seeded without the fixture")
	}
	lc, err := LDAPConfigFromEnv(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	d, err := ldap.Config{URL: lc.URL, BindDN: lc.BindDN, PasswordFile: lc.PasswordFile, BaseDN: lc.BaseDN, CAFile: lc.CAFile}.Open(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	w := Workload{Name: "fixture", Callers: callers(fixture.FutureExpiryDN), Ops: []Op{
		// Nested five deep.
		{Name: "IT Department nested", Caller: CallerAdmin, Query: Query{Group: fixture.ITDepartmentDN, Indirect: true, Properties: Properties}, Weight: 1},
		// A cycle of three groups.
		{Name: "Sales East nested", Caller: CallerAdmin, Query: Query{Group: fixture.SalesEastDN, Indirect: true}, Weight: 1},
		// Paula Primary is a member only through primaryGroupID.
		{Name: "Finance Team", Caller: CallerAdmin, Query: Query{Group: fixture.FinanceTeamDN}, Weight: 1},
	}}
	c, err := Expect(t.Context(), &dirgate.MemberService{Dir: d}, w)
	if err != nil {
		t.Fatal(err)
	}
	target := &LDAPTarget{Config: lc, Checker: c}
	rep, err := Run(t.Context(), target, w, runOpts(2, 12))
	if err != nil {
		t.Fatal(err)
	}
	if rep.All.Requests != 12 || rep.All.ErrorCount() != 0 || rep.All.Wrong != 0 {
		t.Fatalf("requests %d errors %v wrong %d: %q", rep.All.Requests, rep.All.Errors, rep.All.Wrong, rep.All.Examples)
	}

	// The same listing against expectations that lack one member (Paula Primary,
	// the primary-group member) is wrong every time.
	w.Ops = w.Ops[2:]
	finance, err := d.Lookup(t.Context(), dirgate.MustParseIdentifier(fixture.FinanceTeamDN), nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := (&dirgate.MemberService{Dir: d}).Listing(t.Context(), finance, dirgate.ListOptions{})
	all := l.Objects
	if err != nil {
		t.Fatal(err)
	}
	var dns []string
	for _, m := range all {
		if dnKey(m.DN) != dnKey(fixture.PrimaryMemberDN) {
			dns = append(dns, m.DN)
		}
	}
	if len(dns) != len(all)-1 {
		t.Fatalf("%s not among %d members", fixture.PrimaryMemberDN, len(all))
	}
	c.SetDNs(w.Ops[0].Query, dns)
	rep, err = Run(t.Context(), target, w, runOpts(1, 3))
	if err != nil {
		t.Fatal(err)
	}
	if rep.All.Wrong != 3 {
		t.Errorf("wrong %d of %d, want all: %q", rep.All.Wrong, rep.All.Requests, rep.All.Examples)
	}
}
