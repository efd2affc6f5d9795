package dirgate

import "github.com/dirgate/dirgate/internal/bitset"

// Selection is a set of positions in a listing: the objects one caller may view. It
// is how an authorizer that only chooses objects (a ViewSelector) reports its
// decisions, and, being exact, the key under which the renderer (render/) shares a
// body between every caller who receives the same objects of the same listing
// (AppendKey). A bit set (internal/bitset); copies share their words, so a
// selection that others may hold is cloned before it is modified.
type Selection = bitset.Set

// NewSelection returns an empty selection over a listing of n objects.
func NewSelection(n int) Selection { return bitset.New(n) }

// AllSelected returns the selection of the first min(limit, n) positions of a listing
// of n objects; a limit of 0 or less means all.
func AllSelected(n, limit int) Selection { return bitset.First(n, limit) }

// SelectionOf returns the selection of the positions allowed marks.
func SelectionOf(allowed []bool) Selection { return bitset.Of(allowed) }
