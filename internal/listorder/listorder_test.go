package listorder

import (
	"slices"
	"testing"
)

// TestSortKeepsTies: elements equal in both keys keep their order (the root's
// TestSortObjectsAsBefore holds the order itself to a plain stable sort).
func TestSortKeepsTies(t *testing.T) {
	type elem struct{ fold, exact, tag string }
	objs := []elem{{"B", "1", "first"}, {"a", "2", ""}, {"b", "1", "second"}, {"Ä", "0", ""}, {"A", "1", ""}}
	Sort(objs, func(e *elem) (string, string) { return e.fold, e.exact })
	var got []string
	for _, e := range objs {
		got = append(got, e.fold+e.exact+e.tag)
	}
	want := []string{"A1", "a2", "B1first", "b1second", "Ä0"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
