package dirgate

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"
)

// EncodedListing is an unfiltered listing beside the JSON encoding of each of its
// objects. Encoding 1,000 objects costs about 4 ms; joining their encodings about
// 0.3 ms (perf-calibration.md), so a cache keeps listings in this form and responses
// are joined from it. It is immutable and safe for concurrent use.
type EncodedListing struct {
	objs  []Object
	frags []string

	indexOnce sync.Once
	index     map[string]int // GUID -> position, built when a response is not a subsequence
	sizeOnce  sync.Once
	size      int // bytes of all fragments
}

// EncodeListing encodes every object of objs.
func EncodeListing(objs []Object) (*EncodedListing, error) {
	frags := make([]string, len(objs))
	for i := range objs {
		b, err := json.Marshal(objs[i])
		if err != nil {
			return nil, fmt.Errorf("encode listing: object %s: %w", objs[i].GUID, err)
		}
		frags[i] = string(b)
	}
	return &EncodedListing{objs: objs, frags: frags}, nil
}

// NewEncodedListing pairs objects with encodings made earlier by EncodeListing (a
// cache that stored both). frags[i] must be the encoding of objs[i]; nil frags means
// that the objects have none and are encoded when served.
func NewEncodedListing(objs []Object, frags []string) (*EncodedListing, error) {
	if frags != nil && len(objs) != len(frags) {
		return nil, fmt.Errorf("encoded listing: %d objects but %d encodings", len(objs), len(frags))
	}
	return &EncodedListing{objs: objs, frags: frags}, nil
}

// Objects returns the listing. It is shared: callers must not modify it.
func (e *EncodedListing) Objects() []Object { return e.objs }

// Fragments returns the JSON encodings of the objects, nil when they have none.
func (e *EncodedListing) Fragments() []string { return e.frags }

// AppendJSON appends objs as a JSON array to dst, byte for byte what json.Marshal
// gives for a non-nil slice (a nil slice gives [] too). An object is taken from its
// recorded encoding only when it is one of the listing's objects, unchanged: a filter
// that returns altered copies (fewer properties, say) gets them encoded afresh. objs
// is usually a subsequence of the listing (permission filtering keeps the order), so
// it is matched with one forward scan. A nil e encodes every object.
func (e *EncodedListing) AppendJSON(dst []byte, objs []Object) ([]byte, error) {
	if e != nil && e.frags != nil && len(e.objs) > 0 {
		// One allocation for the body, sized as objs at the listing's average.
		dst = slices.Grow(dst, 2+len(objs)*(e.fragBytes()/len(e.objs)+1))
	}
	dst = append(dst, '[')
	cursor, scan := 0, true
	for i := range objs {
		if i > 0 {
			dst = append(dst, ',')
		}
		o := &objs[i]
		j := -1
		if e != nil && e.frags != nil {
			if scan {
				if j = e.scan(o.GUID, cursor); j >= 0 {
					cursor = j + 1
				} else {
					scan = false // not a subsequence: use the index from here on
				}
			}
			if j < 0 {
				j = e.lookup(o.GUID)
			}
		}
		if j >= 0 && sameRendering(o, &e.objs[j]) {
			dst = append(dst, e.frags[j]...)
			continue
		}
		b, err := json.Marshal(o)
		if err != nil {
			return nil, fmt.Errorf("encode object %s: %w", o.GUID, err)
		}
		dst = append(dst, b...)
	}
	return append(dst, ']'), nil
}

func (e *EncodedListing) fragBytes() int {
	e.sizeOnce.Do(func() {
		for _, f := range e.frags {
			e.size += len(f)
		}
	})
	return e.size
}

func (e *EncodedListing) scan(guid string, from int) int {
	for j := from; j < len(e.objs); j++ {
		if e.objs[j].GUID == guid {
			return j
		}
	}
	return -1
}

func (e *EncodedListing) lookup(guid string) int {
	e.indexOnce.Do(func() {
		e.index = make(map[string]int, len(e.objs))
		for j := range e.objs {
			e.index[e.objs[j].GUID] = j
		}
	})
	if j, ok := e.index[guid]; ok {
		return j
	}
	return -1
}

// sameRendering reports whether a and b encode to the same JSON. Copies of one
// object share their strings, maps and pointers, which the comparisons below check
// first, so that an unchanged object costs a few pointer comparisons.
func sameRendering(a, b *Object) bool {
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

func sameAccount(a, b *AccountStatus) bool {
	if a == b {
		return true
	}
	if a == nil || b == nil {
		return false
	}
	return a.IsDisabled == b.IsDisabled && a.IsLocked == b.IsLocked && sameTime(a.ExpirationDate, b.ExpirationDate)
}

func samePassword(a, b *PasswordStatus) bool {
	if a == b {
		return true
	}
	if a == nil || b == nil {
		return false
	}
	return a.ExpirationStatus == b.ExpirationStatus && sameTime(a.WhenChanged, b.WhenChanged) &&
		sameTime(a.ExpirationDate, b.ExpirationDate)
}

func sameTime(a, b *Timestamp) bool {
	if a == b {
		return true
	}
	return a != nil && b != nil && a.Equal(b.Time)
}

// render returns the JSON array of the selected objects, each from its recorded
// encoding: byte for byte what json.Marshal gives for them, in one allocation of the
// exact size. e must have encodings (Fragments is not nil) for every position.
func (e *EncodedListing) render(sel Selection) []byte {
	size := 2
	sel.each(func(i int) { size += len(e.frags[i]) + 1 })
	dst := make([]byte, 0, size)
	dst = append(dst, '[')
	sel.each(func(i int) {
		if len(dst) > 1 {
			dst = append(dst, ',')
		}
		dst = append(dst, e.frags[i]...)
	})
	return append(dst, ']')
}
