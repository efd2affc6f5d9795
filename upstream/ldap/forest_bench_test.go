package ldap

// What reading the member values costs a listing in a forest of several domains
// (forest.go), against the same listing alone in the forest, on the harness DC, for
// groups of 3, 6 and 2,061 members, and for a copy of each that also holds a member
// of "another domain":
//
//	go test -run '^$' -bench ForestMembers -benchtime 20x -count 5 ./upstream/ldap/

import (
	"context"
	"fmt"
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/test/harness/fixture"
)

func BenchmarkForestMembers(b *testing.B) {
	dc, d := benchDC(b)
	org := fixture.Large()
	groups := []string{fixture.ProjectAlphaDN, fixture.ITDepartmentDN, fixture.AllStaffDN}
	configNC := dirgate.MustParseDN("CN=Configuration," + d.cfg.BaseDN)
	sites := "CN=Sites," + configNC.String()
	for _, dn := range groups {
		group := mustLookup(b, d, dn, "member")
		want := len(org.DirectMembers(org.MustObject(dn)))
		// The same members and one of "another domain", listed as a reference.
		withRef := mustLookup(b, d, dc.TempGroup(b, fmt.Sprintf("forest-bench-%d", want), append(group.Properties["member"], sites)...))
		for _, v := range []struct {
			name   string
			forest bool
			group  dirgate.Object
			want   int
		}{{"alone", false, group, want}, {"forest", true, group, want}, {"forest-reference", true, withRef, want + 1}} {
			b.Run(fmt.Sprintf("members=%d/%s", want, v.name), func(b *testing.B) {
				// The configuration partition stands for another domain of the
				// forest.
				d.forestNCs = nil
				if v.forest {
					d.forestNCs = []dirgate.DN{configNC}
				}
				for b.Loop() {
					objs, err := d.Members(context.Background(), v.group, nil)
					if err != nil || len(objs) != v.want {
						b.Fatalf("%d members, %v; want %d", len(objs), err, v.want)
					}
				}
			})
		}
	}
	d.forestNCs = nil
}
