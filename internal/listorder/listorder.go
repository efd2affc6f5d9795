// Package listorder sorts a listing by two keys without moving its elements more
// than once: dirgate.SortObjects's order (listorder.go in the root), by DN without
// regard to letter case, then by GUID.
package listorder

import (
	"cmp"
	"slices"
	"strings"
	"unsafe"
)

// Sort orders objs by the first key keys gives, compared after lower-casing, then by
// the second, compared as it is; elements equal in both keep their order.
//
// It sorts small keys rather than the elements, and lower-cases ASCII first keys
// (nearly all) into one buffer: a listing of 100,000 members would otherwise make as
// many lowered copies and move 200-byte objects some two million times.
func Sort[T any](objs []T, keys func(*T) (fold, exact string)) {
	if len(objs) < 2 {
		return
	}
	size := 0
	for i := range objs {
		f, _ := keys(&objs[i])
		size += len(f)
	}
	// Sized once, so appending never moves what earlier keys point into.
	lowered := make([]byte, 0, size)
	sorted := make([]sortKey, len(objs))
	for i := range objs {
		f, exact := keys(&objs[i])
		k := sortKey{exact: exact, i: i}
		if isASCII(f) {
			start := len(lowered)
			for j := 0; j < len(f); j++ {
				c := f[j]
				if 'A' <= c && c <= 'Z' {
					c += 'a' - 'A'
				}
				lowered = append(lowered, c)
			}
			k.fold = unsafe.String(unsafe.SliceData(lowered[start:]), len(f))
		} else {
			k.fold = strings.ToLower(f)
		}
		sorted[i] = k
	}
	slices.SortFunc(sorted, func(a, b sortKey) int {
		if c := strings.Compare(a.fold, b.fold); c != 0 {
			return c
		}
		if c := strings.Compare(a.exact, b.exact); c != 0 {
			return c
		}
		return cmp.Compare(a.i, b.i)
	})
	// Position j takes the element at sorted[j].i: follow each cycle of the
	// permutation, marking what is placed with -1.
	for s := range sorted {
		if sorted[s].i < 0 {
			continue
		}
		first := objs[s]
		j := s
		for {
			src := sorted[j].i
			sorted[j].i = -1
			if src == s {
				objs[j] = first
				break
			}
			objs[j] = objs[src]
			j = src
		}
	}
}

type sortKey struct {
	fold, exact string
	i           int
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
