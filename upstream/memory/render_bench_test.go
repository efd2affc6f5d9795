package memory

import (
	"context"
	"testing"

	"github.com/dirgate/dirgate"
	loadtest "github.com/dirgate/dirgate/test/tools/load"
)

// BenchmarkRenderMembers renders the members of the generated group as a listing
// does (Members: every member turned into a dirgate.Object), without and with
// requested properties, and reports the cost per member.
func BenchmarkRenderMembers(b *testing.B) {
	d, err := Load("generated", loadtest.GeneratedExport(1000))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	g, err := d.Lookup(ctx, dirgate.MustParseIdentifier(loadtest.GeneratedGroupDN), nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		props []string
	}{{"props=none", nil}, {"props=mail,title", []string{"mail", "title"}}} {
		b.Run(tc.name, func(b *testing.B) {
			n := 0
			for b.Loop() {
				ms, err := d.Members(ctx, g, tc.props)
				if err != nil {
					b.Fatal(err)
				}
				n += len(ms)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/member")
		})
	}
}
