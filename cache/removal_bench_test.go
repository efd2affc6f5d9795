package cache

import (
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/redisconn"
	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/test/harness/redistest"
)

// BenchmarkRemoval measures a removal and an addition through the cache on a real
// redis-server (one pair per iteration: tokens written, announced, the instance's own
// lease acknowledged), with the affected listings read again in between, so that
// their refill (which records the version tokens, the epoch's among them) is counted.
// docs/benchmarks.md ("Redis failovers") gives what the epoch costs it.
func BenchmarkRemoval(b *testing.B) {
	dir := demo(b)
	in := newInstance(b, dir, Config{Secret: sealSecret, Redis: redisClient(b, redisconn.Config{Addrs: []string{redistest.Start(b).Addr()}})})
	group := dirgate.MustParseIdentifier(fixture.DesktopEngineersDN)
	var target dirgate.Object
	for _, o := range truth(b, dir, fixture.DesktopEngineersDN, dirgate.ListOptions{}) {
		if o.ObjectType == dirgate.TypeUser {
			target = o
			break
		}
	}
	member := dirgate.MustParseIdentifier(target.GUID)
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := in.svc.Remove(ctx, dirgate.Principal{}, group, member); err != nil {
			b.Fatal(err)
		}
		in.list(b, fixture.ITDepartmentDN, dirgate.ListOptions{IncludeIndirect: true})
		if _, err := in.svc.Add(ctx, dirgate.Principal{}, group, member); err != nil {
			b.Fatal(err)
		}
		in.list(b, fixture.ITDepartmentDN, dirgate.ListOptions{IncludeIndirect: true})
	}
}
