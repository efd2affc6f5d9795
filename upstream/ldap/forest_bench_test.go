package ldap

// What reading the member values costs a listing in a forest of several domains
// (forest.go), against the same listing alone in the forest, on the harness DC, for
// groups of 3, 6 and 2,061 members:
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
	_, d := benchDC(b)
	org := fixture.Large()
	groups := []string{fixture.ProjectAlphaDN, fixture.ITDepartmentDN, fixture.AllStaffDN}
	configNC := dirgate.MustParseDN("CN=Configuration," + d.cfg.BaseDN)
	for _, dn := range groups {
		group := mustLookup(b, d, dn)
		want := len(org.DirectMembers(org.MustObject(dn)))
		for _, forest := range []bool{false, true} {
			name := fmt.Sprintf("members=%d/alone", want)
			if forest {
				name = fmt.Sprintf("members=%d/forest", want)
			}
			b.Run(name, func(b *testing.B) {
				// The configuration partition stands for another domain of the
				// forest: the member values are read, and none lies there.
				d.forestNCs = nil
				if forest {
					d.forestNCs = []dirgate.DN{configNC}
				}
				for b.Loop() {
					objs, err := d.Members(context.Background(), group, nil)
					if err != nil || len(objs) != want {
						b.Fatalf("%d members, %v; want %d", len(objs), err, want)
					}
				}
			})
		}
	}
	d.forestNCs = nil
}
