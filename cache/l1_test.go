package cache

import (
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/test/fixture"
)

// TestLargeEntryStaysDecoded: an entry larger than a quarter of the first level's
// bound, but within it, is kept decoded: every hit is served the very listing the
// first one decoded, not a listing decoded again from the store (issue 26: that
// decode was the cost of a hit on a large listing, and a new listing also misses
// every rendered body keyed by it). An entry larger than the whole bound is not kept.
func TestLargeEntryStaysDecoded(t *testing.T) {
	dir := demo(t)
	group := fixture.DomainUsersDN
	// The entry's size, from an instance whose bound holds anything.
	probe := newInstance(t, dir, Config{})
	probe.list(t, group, dirgate.ListOptions{})
	var size int64
	probe.c.l1.drop(func(key string, e *entry) bool {
		if len(e.list.Objects()) > 1 {
			size = max(size, int64(e.size+len(key)))
		}
		return false
	})
	if size == 0 {
		t.Fatal("the listing is not in the first level")
	}

	listing := func(in instance) (*dirgate.EncodedListing, dirgate.CacheStatus) {
		ctx, rep := dirgate.WithListingReport(t.Context())
		if _, err := in.svc.List(ctx, dirgate.Principal{}, dirgate.MustParseIdentifier(group), dirgate.ListOptions{}); err != nil {
			t.Fatal(err)
		}
		return rep.Encoded(), rep.CacheStatus()
	}
	for _, tc := range []struct {
		name     string
		maxBytes int64
		kept     bool
	}{
		{"three quarters of the bound", size * 4 / 3, true},
		{"over the bound", size - 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The in-process store, bounded alike, keeps the stored value: it is
			// smaller than the decoded entry.
			in := newInstance(t, dir, Config{MaxBytes: tc.maxBytes})
			first, _ := listing(in)
			for range 3 {
				again, st := listing(in)
				if tc.kept && (again != first || st != dirgate.CacheHit) {
					t.Fatalf("hit served another decoded listing (cache %s): decoded again from the store", st)
				}
				if !tc.kept && again == first {
					t.Fatal("an entry over the bound was kept")
				}
			}
		})
	}
}
