package cache

import (
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/redisconn"
	"github.com/dirgate/dirgate/test/harness/redistest"
)

// BenchmarkListing1000Feed is BenchmarkListing1000 with the cache followed by the
// change feed (Follow; the feed itself, idle, runs elsewhere), so that every entry
// also depends on the epoch: the feed's cost on a cached listing.
// Compare with BenchmarkListing1000 in the same run:
//
//	go test -run '^$' -bench 'Listing1000(Feed)?/(FirstLevel|Redis)$' -count 5 ./cache/
func BenchmarkListing1000Feed(b *testing.B) {
	start := func(b *testing.B, cfg Config) (instance, dirgate.Identifier) {
		d := newBenchDir(1000)
		in := newInstance(b, d, cfg)
		in.svc.Authz = ouFilter{}
		in.c.Follow()
		if _, _, err := in.tryList(b.Context(), d.group.GUID, dirgate.ListOptions{Properties: benchProps}); err != nil {
			b.Fatal(err)
		}
		return in, dirgate.MustParseIdentifier(d.group.GUID)
	}
	b.Run("FirstLevel", func(b *testing.B) {
		// Leases off, as in BenchmarkListing1000/FirstLevel: the epoch's token is read too.
		in, id := start(b, Config{Secret: sealSecret, Redis: redisClient(b, redisconn.Config{Addrs: []string{redistest.Start(b).Addr()}}), Lease: new(time.Duration(0))})
		benchList(b, in, id, dirgate.CacheHit)
	})
	b.Run("Redis", func(b *testing.B) {
		in, id := start(b, Config{Secret: sealSecret, Redis: redisClient(b, redisconn.Config{Addrs: []string{redistest.Start(b).Addr()}}), MaxBytes: 1 << 20})
		benchList(b, in, id, dirgate.CacheHit)
	})
}
