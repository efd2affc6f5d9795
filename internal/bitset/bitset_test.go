package bitset_test

import (
	"slices"
	"testing"

	"github.com/dirgate/dirgate/internal/bitset"
)

func TestSet(t *testing.T) {
	for _, n := range []int{0, 1, 63, 64, 65, 130} {
		for _, limit := range []int{-1, 0, 1, 2, 63, 64, 65, 200} {
			s := bitset.First(n, limit)
			want := n
			if limit > 0 && limit < n {
				want = limit
			}
			if s.Count() != want || s.Len() != n {
				t.Errorf("First(%d, %d): %d of %d selected, want %d of %d", n, limit, s.Count(), s.Len(), want, n)
			}
			for i := range n {
				if s.Has(i) != (i < want) {
					t.Fatalf("First(%d, %d): position %d selected %v", n, limit, i, s.Has(i))
				}
			}
		}
	}
	// Limit keeps the first selected positions, whichever words they are in.
	s := bitset.New(200)
	var set []int
	for i := 0; i < 200; i += 3 {
		s.Set(i)
		set = append(set, i)
	}
	for _, limit := range []int{0, 1, 21, 22, 23, 60, 67, 68, 100} {
		c := bitset.New(200)
		for _, i := range set {
			c.Set(i)
		}
		c.Limit(limit)
		want := set
		if limit > 0 && limit < len(set) {
			want = set[:limit]
		}
		var got []int
		for i := range 200 {
			if c.Has(i) {
				got = append(got, i)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("Limit(%d): %v, want %v", limit, got, want)
		}
	}
}

// Each visits exactly the selected positions in order, and AppendKey tells apart any
// two selections that differ (in a position or in the listing's length).
func TestSetEachAndKey(t *testing.T) {
	a := bitset.New(130)
	for _, i := range []int{0, 5, 63, 64, 129} {
		a.Set(i)
	}
	var got []int
	a.Each(func(i int) { got = append(got, i) })
	if want := []int{0, 5, 63, 64, 129}; !slices.Equal(got, want) {
		t.Errorf("Each: %v, want %v", got, want)
	}
	b := a.Clone()
	if string(a.AppendKey(nil)) != string(b.AppendKey(nil)) {
		t.Error("equal selections, different keys")
	}
	b.Set(1)
	longer := bitset.New(131)
	for _, i := range []int{0, 5, 63, 64, 129} {
		longer.Set(i)
	}
	for name, other := range map[string]bitset.Set{"another position": b, "a longer listing": longer} {
		if string(a.AppendKey(nil)) == string(other.AppendKey(nil)) {
			t.Errorf("%s: same key", name)
		}
	}
}
