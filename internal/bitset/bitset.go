// Package bitset is a set of positions 0..n-1, one bit each: dirgate.Selection, the
// objects of a listing one caller may view, is one (selection.go), and its exact
// identity (AppendKey) keys the bodies the renderer shares (render/body.go).
package bitset

import "math/bits"

// Set is a set of positions 0..n-1. Its words may be shared by copies of it: Clone
// before modifying one that others hold.
type Set struct {
	n     int // positions 0..n-1
	words []uint64
}

// New returns an empty set over n positions.
func New(n int) Set {
	return Set{n: n, words: make([]uint64, (n+63)/64)}
}

// First returns the set of the first min(limit, n) of n positions; a limit of 0 or
// less means all.
func First(n, limit int) Set {
	s := New(n)
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

// Len is the number of positions the set is over.
func (s Set) Len() int { return s.n }

// Set adds position i.
func (s Set) Set(i int) { s.words[i/64] |= 1 << (i % 64) }

// Has reports whether position i is in the set.
func (s Set) Has(i int) bool { return s.words[i/64]&(1<<(i%64)) != 0 }

// Of returns the set of the positions allowed marks.
func Of(allowed []bool) Set {
	s := New(len(allowed))
	for i, ok := range allowed {
		if ok {
			s.words[i>>6] |= 1 << (uint(i) & 63)
		}
	}
	return s
}

// Clone returns a copy that can be modified without changing s.
func (s Set) Clone() Set {
	return Set{n: s.n, words: append([]uint64(nil), s.words...)}
}

// Count is the number of positions in the set.
func (s Set) Count() int {
	n := 0
	for _, w := range s.words {
		n += bits.OnesCount64(w)
	}
	return n
}

// Limit keeps the first limit positions of the set; limit <= 0 keeps all.
func (s Set) Limit(limit int) {
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

// AppendKey appends the set's exact identity (its length and every word) to dst:
// two sets append the same bytes only when they are equal.
func (s Set) AppendKey(dst []byte) []byte {
	dst = appendUint64(dst, uint64(s.n))
	for _, w := range s.words {
		dst = appendUint64(dst, w)
	}
	return dst
}

func appendUint64(dst []byte, v uint64) []byte {
	return append(dst, byte(v), byte(v>>8), byte(v>>16), byte(v>>24), byte(v>>32), byte(v>>40), byte(v>>48), byte(v>>56))
}

// Each calls f with every position in the set, in increasing order.
func (s Set) Each(f func(i int)) {
	for wi, w := range s.words {
		for w != 0 {
			f(wi*64 + bits.TrailingZeros64(w))
			w &= w - 1
		}
	}
}
