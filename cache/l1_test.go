package cache

import (
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/encodedlisting"
	"github.com/dirgate/dirgate/test/harness/fixture"
)

// TestLargeEntryStaysDecoded: an entry larger than a quarter of the first level's
// bound, within it or beyond it, is kept decoded: every hit is served the very
// listing the first one decoded, not a listing decoded again from the store (that
// decode would be the cost of every hit on a large listing, and a new listing also
// misses every rendered body keyed by it).
func TestLargeEntryStaysDecoded(t *testing.T) {
	dir := demo(t)
	group := fixture.DomainUsersDN
	// The entry's size, from an instance whose bound holds anything.
	probe := newInstance(t, dir, Config{})
	probe.list(t, group, dirgate.ListOptions{})
	var size int64
	probe.c.l1.drop(func(key string, e *entry) bool {
		if len(e.objs) > 1 {
			size = max(size, int64(e.size+len(key)))
		}
		return false
	})
	if size == 0 {
		t.Fatal("the listing is not in the first level")
	}

	listing := func(in instance) (*encodedlisting.Listing, dirgate.CacheStatus) {
		_, l, err := in.svc.ListingFor(t.Context(), dirgate.Principal{}, dirgate.MustParseIdentifier(group), dirgate.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return l.Encoded, l.Status
	}
	for _, tc := range []struct {
		name     string
		maxBytes int64
	}{
		{"three quarters of the bound", size * 4 / 3},
		{"over the bound", size - 1},
		{"far over the bound", size / 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The in-process store, bounded alike, keeps the stored value: it is
			// smaller than the decoded entry.
			in := newInstance(t, dir, Config{MaxBytes: tc.maxBytes})
			first, _ := listing(in)
			for range 3 {
				again, st := listing(in)
				if again != first || st != dirgate.CacheHit {
					t.Fatalf("hit served another decoded listing (cache %s): decoded again from the store", st)
				}
			}
		})
	}
}

// TestFirstLevelBeyondBound: one entry larger than the bound is kept beside the
// bounded entries, not counted in their bytes and pushing none of them out; a second
// one takes its place; remove and drop reach it.
func TestFirstLevelBeyondBound(t *testing.T) {
	l := newFirstLevel(100)
	small := func(n int) *entry { return &entry{size: n} }
	a, b := small(40), small(40)
	l.add("a", a)
	l.add("b", b)
	big1, big2 := small(500), small(300)
	l.add("big1", big1)
	if l.get("a") != a || l.get("b") != b || l.get("big1") != big1 || l.bytes != 82 || l.len() != 3 {
		t.Fatalf("after the first big entry: a %v, b %v, big %v, %d bytes, %d entries", l.get("a") == a, l.get("b") == b, l.get("big1") == big1, l.bytes, l.len())
	}
	l.add("big2", big2)
	if l.get("big1") != nil || l.get("big2") != big2 || l.get("a") != a || l.len() != 3 {
		t.Fatal("a second big entry did not take the first one's place alone")
	}
	// The same key, now within the bound, leaves the place beside it.
	c := small(10)
	l.add("big2", c)
	if l.get("big2") != c || l.big != nil || l.len() != 3 {
		t.Fatal("a key that shrank stayed beside the bound")
	}
	l.add("big1", big1)
	l.remove("big1", big2) // another entry: not removed
	if l.get("big1") != big1 {
		t.Fatal("remove of another entry dropped the big one")
	}
	l.remove("big1", big1)
	if l.get("big1") != nil {
		t.Fatal("remove left the big entry")
	}
	l.add("big1", big1)
	l.drop(func(key string, e *entry) bool { return e.size > 100 })
	if l.get("big1") != nil || l.get("a") != a {
		t.Fatal("drop did not reach the big entry, or reached another")
	}
}

// TestFirstLevelEvictsLeastRecentlyUsed: within the bound, an add pushes out the
// least recently used entries (a read counts as a use) until it fits, and the bytes
// follow every way an entry leaves: eviction, replacement, remove, drop.
func TestFirstLevelEvictsLeastRecentlyUsed(t *testing.T) {
	l := newFirstLevel(100)
	e := func(n int) *entry { return &entry{size: n} } // accounted as n + 1 (its key)
	a, b, c := e(29), e(29), e(29)
	l.add("a", a)
	l.add("b", b)
	l.add("c", c)
	l.get("a")
	d := e(29)
	l.add("d", d) // 120 bytes: b, the least recently used, goes
	if l.get("b") != nil || l.get("a") != a || l.get("c") != c || l.get("d") != d || l.bytes != 90 || l.len() != 3 {
		t.Fatalf("after an evicting add: b kept %v, %d bytes, %d entries (want b gone, 90, 3)", l.get("b") != nil, l.bytes, l.len())
	}
	// Order now, least recent first: a, c, d. An entry of 70 pushes out a and c.
	big := e(69)
	l.add("e", big)
	if l.get("a") != nil || l.get("c") != nil || l.get("d") != d || l.get("e") != big || l.bytes != 100 {
		t.Fatalf("an add of 70 bytes: a kept %v, c kept %v, %d bytes (want both gone, 100)", l.get("a") != nil, l.get("c") != nil, l.bytes)
	}
	l.add("d", e(9)) // replaced: its old bytes go, pushing nothing out
	if l.get("e") != big || l.bytes != 80 || l.len() != 2 {
		t.Fatalf("after a replacement: %d bytes, %d entries (want 80, 2)", l.bytes, l.len())
	}
	l.remove("e", big)
	if l.bytes != 10 || l.len() != 1 {
		t.Fatalf("after remove: %d bytes, %d entries (want 10, 1)", l.bytes, l.len())
	}
	l.drop(func(string, *entry) bool { return true })
	if l.bytes != 0 || l.len() != 0 {
		t.Fatalf("after drop: %d bytes, %d entries (want 0, 0)", l.bytes, l.len())
	}
}
