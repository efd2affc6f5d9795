package render

import (
	"maps"
	"reflect"
	"slices"
	"unsafe"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/encodedlisting"
)

// AppendJSON appends objs as a JSON array to dst, byte for byte what json.Marshal
// gives for a non-nil slice (a nil slice gives [] too). An object is taken from the
// listing's recorded encoding only when it is one of the listing's objects,
// unchanged: a filter that returns altered copies (fewer properties, say) gets them
// encoded afresh. objs is usually a subsequence of the listing (permission filtering
// keeps the order), so it is matched with one forward scan. A listing without
// encodings (Encoded nil) encodes every object.
func AppendJSON(dst []byte, listing dirgate.Listing, objs []dirgate.Object) ([]byte, error) {
	e := listing.Encoded
	var listed []dirgate.Object
	var frags []string
	if e != nil {
		listed, frags = listing.Objects, e.Fragments()
	}
	if frags != nil && len(listed) > 0 {
		// One allocation for the body, sized as objs at the listing's average.
		dst = slices.Grow(dst, 2+len(objs)*(e.FragmentBytes()/len(listed)+1))
	}
	dst = append(dst, '[')
	cursor, scan := 0, true
	for i := range objs {
		if i > 0 {
			dst = append(dst, ',')
		}
		o := &objs[i]
		j := -1
		if frags != nil {
			if scan {
				if j = scanFor(listed, o.GUID, cursor); j >= 0 {
					cursor = j + 1
				} else {
					scan = false // not a subsequence: use the index from here on
				}
			}
			if j < 0 {
				j = e.Index(o.GUID)
			}
		}
		if j >= 0 && sameRendering(o, &listed[j]) {
			dst = append(dst, frags[j]...)
			continue
		}
		dst = o.AppendJSON(dst)
	}
	return append(dst, ']'), nil
}

// scanFor returns the position of guid in listed from position from on, -1 when it
// is not there.
func scanFor(listed []dirgate.Object, guid string, from int) int {
	for j := from; j < len(listed); j++ {
		if listed[j].GUID == guid {
			return j
		}
	}
	return -1
}

// sameRendering reports whether a and b encode to the same JSON. Copies of one
// object share their strings, maps and pointers, which the comparisons below check
// first, so that an unchanged object costs a few pointer comparisons.
func sameRendering(a, b *dirgate.Object) bool {
	return a.GUID == b.GUID && a.DN == b.DN && a.DisplayName == b.DisplayName &&
		a.ObjectType == b.ObjectType && a.ObjectTypeCode == b.ObjectTypeCode &&
		a.DomainName == b.DomainName && a.DirectoryType == b.DirectoryType &&
		sameProperties(a.Properties, b.Properties) &&
		sameAccount(a.AccountStatus, b.AccountStatus) && samePassword(a.PasswordStatus, b.PasswordStatus)
}

func sameProperties(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 {
		return true // nil and empty both render as {}
	}
	if reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer() {
		return true // one map, shared by copies of one object
	}
	return maps.EqualFunc(a, b, slices.Equal)
}

func sameAccount(a, b *dirgate.AccountStatus) bool {
	if a == b {
		return true
	}
	if a == nil || b == nil {
		return false
	}
	return a.IsDisabled == b.IsDisabled && a.IsLocked == b.IsLocked && sameTime(a.ExpirationDate, b.ExpirationDate)
}

func samePassword(a, b *dirgate.PasswordStatus) bool {
	if a == b {
		return true
	}
	if a == nil || b == nil {
		return false
	}
	return a.ExpirationStatus == b.ExpirationStatus && sameTime(a.WhenChanged, b.WhenChanged) &&
		sameTime(a.ExpirationDate, b.ExpirationDate)
}

func sameTime(a, b *dirgate.Timestamp) bool {
	if a == b {
		return true
	}
	return a != nil && b != nil && a.Equal(b.Time)
}

// renderSelection returns the JSON array of the selected objects of e, each from its
// recorded encoding: byte for byte what json.Marshal gives for them, in one
// allocation of the exact size. e must have encodings (Fragments is not nil) for
// every position.
//
// A selection of every object (a caller who may see everything) is the listing's
// own JSON when e has it (encodedlisting.Listing.JSON): the bytes of the cache's stored
// value, returned without a copy (42 MiB for 100,000 members, per listing
// served). They are a string's bytes, never to be written: the slice's capacity ends
// at its length, so that an append copies rather than writes past it, and nothing
// that receives a Body writes to its JSON.
func renderSelection(e *encodedlisting.Listing, sel dirgate.Selection) []byte {
	frags := e.Fragments()
	if j := e.JSON(); j != "" && sel.Len() == len(frags) && sel.Count() == len(frags) {
		return unsafe.Slice(unsafe.StringData(j), len(j))
	}
	size := 2
	sel.Each(func(i int) { size += len(frags[i]) + 1 })
	dst := make([]byte, 0, size)
	dst = append(dst, '[')
	sel.Each(func(i int) {
		if len(dst) > 1 {
			dst = append(dst, ',')
		}
		dst = append(dst, frags[i]...)
	})
	return append(dst, ']')
}
