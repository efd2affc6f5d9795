package dirgate

import "math/bits"

// Selection is a set of positions in a listing: the objects one caller may view. It
// is how an authorizer that only chooses objects (a ViewSelector) reports its
// decisions, and, being exact, the key under which the renderer (render/) shares a
// body between every caller who receives the same objects of the same listing.
type Selection struct {
	n     int // positions in the listing
	words []uint64
}

// NewSelection returns an empty selection over a listing of n objects.
func NewSelection(n int) Selection {
	return Selection{n: n, words: make([]uint64, (n+63)/64)}
}

// AllSelected returns the selection of the first min(limit, n) positions of a listing
// of n objects; a limit of 0 or less means all.
func AllSelected(n, limit int) Selection {
	s := NewSelection(n)
	if limit <= 0 || limit > n {
		limit = n
	}
	for i := 0; i < limit/64; i++ {
		s.words[i] = ^uint64(0)
	}
	if r := limit % 64; r > 0 {
		s.words[limit/64] = 1<<r - 1
	}
	return s
}

// Len is the number of positions of the listing the selection is over.
func (s Selection) Len() int { return s.n }

// Set adds position i.
func (s Selection) Set(i int) { s.words[i/64] |= 1 << (i % 64) }

// Has reports whether position i is selected.
func (s Selection) Has(i int) bool { return s.words[i/64]&(1<<(i%64)) != 0 }

// SelectionOf returns the selection of the positions allowed marks.
func SelectionOf(allowed []bool) Selection {
	s := NewSelection(len(allowed))
	for i, ok := range allowed {
		if ok {
			s.words[i>>6] |= 1 << (uint(i) & 63)
		}
	}
	return s
}

// Clone returns a copy that can be modified without changing s.
func (s Selection) Clone() Selection {
	return Selection{n: s.n, words: append([]uint64(nil), s.words...)}
}

// Count is the number of selected positions.
func (s Selection) Count() int {
	n := 0
	for _, w := range s.words {
		n += bits.OnesCount64(w)
	}
	return n
}

// Limit keeps the first limit selected positions (sizeLimit); limit <= 0 keeps all.
func (s Selection) Limit(limit int) {
	if limit <= 0 {
		return
	}
	for i, w := range s.words {
		c := bits.OnesCount64(w)
		if c <= limit {
			limit -= c
			continue
		}
		for ; limit > 0; limit-- {
			w &= w - 1 // drop the lowest set bit; what remains is beyond the limit
		}
		s.words[i] &^= w
		clear(s.words[i+1:])
		return
	}
}

// AppendKey appends the selection's exact identity (its length and every word) to
// dst: two selections append the same bytes only when they are equal.
func (s Selection) AppendKey(dst []byte) []byte {
	dst = appendUint64(dst, uint64(s.n))
	for _, w := range s.words {
		dst = appendUint64(dst, w)
	}
	return dst
}

func appendUint64(dst []byte, v uint64) []byte {
	return append(dst, byte(v), byte(v>>8), byte(v>>16), byte(v>>24), byte(v>>32), byte(v>>40), byte(v>>48), byte(v>>56))
}

// Each calls f with every selected position, in increasing order.
func (s Selection) Each(f func(i int)) {
	for wi, w := range s.words {
		for w != 0 {
			f(wi*64 + bits.TrailingZeros64(w))
			w &= w - 1
		}
	}
}
