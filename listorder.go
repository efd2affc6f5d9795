package dirgate

import (
	"cmp"
	"slices"
	"strings"
	"unsafe"
)

// SortObjects puts a listing in its documented order: by DN compared without regard
// to letter case, then by GUID. Upstreams return members in arbitrary order; sorting
// makes sizeLimit and caching deterministic. A listing's GUIDs are unique (Listing
// keeps each object once); objects that share one keep their order among those of
// equal DNs.
//
// It sorts small keys rather than the objects, and lower-cases ASCII DNs (nearly all)
// into one buffer: a listing of 100,000 members would otherwise make as many lowered
// copies and move 200-byte objects some two million times.
func SortObjects(objs []Object) {
	if len(objs) < 2 {
		return
	}
	size := 0
	for i := range objs {
		size += len(objs[i].DN)
	}
	// Sized once, so appending never moves what earlier keys point into.
	lowered := make([]byte, 0, size)
	keys := make([]sortKey, len(objs))
	for i := range objs {
		dn := objs[i].DN
		k := sortKey{guid: objs[i].GUID, i: i}
		if isASCII(dn) {
			start := len(lowered)
			for j := 0; j < len(dn); j++ {
				c := dn[j]
				if 'A' <= c && c <= 'Z' {
					c += 'a' - 'A'
				}
				lowered = append(lowered, c)
			}
			k.dn = unsafe.String(unsafe.SliceData(lowered[start:]), len(dn))
		} else {
			k.dn = strings.ToLower(dn)
		}
		keys[i] = k
	}
	slices.SortFunc(keys, func(a, b sortKey) int {
		if c := strings.Compare(a.dn, b.dn); c != 0 {
			return c
		}
		if c := strings.Compare(a.guid, b.guid); c != 0 {
			return c
		}
		return cmp.Compare(a.i, b.i)
	})
	// Position j takes the object at keys[j].i: follow each cycle of the permutation,
	// marking what is placed with -1.
	for s := range keys {
		if keys[s].i < 0 {
			continue
		}
		first := objs[s]
		j := s
		for {
			src := keys[j].i
			keys[j].i = -1
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
	dn, guid string
	i        int
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
