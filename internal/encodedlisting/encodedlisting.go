// Package encodedlisting holds the JSON encodings of an unfiltered listing's
// objects, which a cache records and a renderer joins responses from.
//
// Encoding 1,000 objects cost about 4 ms with encoding/json, joining their
// encodings about 0.3 ms (docs/benchmarks.md, "Cost calibration");
// dirgate.Object.AppendJSON encodes in about a fifth of encoding/json's time
// (BenchmarkObjectJSON), still several times a join. So a cache (cache/) keeps
// listings with their encodings and returns them in a dirgate.Listing, whose Encoded
// is a *Listing beside its Objects; the listing reaches the renderer (render/),
// which joins responses from them. Neither imports the other. This package knows
// nothing of dirgate's objects (the root package imports it): a Listing holds the
// encodings, and reads the objects' GUIDs through the GUIDs it is made with.
package encodedlisting

import (
	"fmt"
	"sync"
	"unsafe"
)

// GUIDs gives the GUID of a listing's i-th object. A pointer to what holds the
// objects (a cache's entry) serves without an allocation of its own.
type GUIDs interface {
	GUID(i int) string
}

// GUIDFunc is a function serving as GUIDs.
type GUIDFunc func(i int) string

// GUID returns f(i).
func (f GUIDFunc) GUID(i int) string { return f(i) }

// Listing is the JSON encoding of each object of a listing. It is immutable and
// safe for concurrent use, and a cache fill makes a new one, so its identity names
// one version of a listing.
type Listing struct {
	n      int // objects in the listing
	frags  []string
	joined string // "[" frags[0] "," frags[1] ... "]", each fragment a substring of it; "" when not laid out so
	guids  GUIDs  // the GUIDs of the listing's objects, which the index is built from

	indexOnce sync.Once
	index     map[string]int // GUID -> position, built when a response is not a subsequence
	sizeOnce  sync.Once
	size      int // bytes of all fragments
}

// New pairs the n objects of a listing with their encodings
// (dirgate.Object.AppendJSON), made earlier (a cache that stored both). frags[i]
// must be the encoding of the i-th object, whose GUID is guids.GUID(i); nil frags
// means that the objects have none and are encoded when served.
func New(n int, frags []string, guids GUIDs) (*Listing, error) {
	if frags != nil && n != len(frags) {
		return nil, fmt.Errorf("encoded listing: %d objects but %d encodings", n, len(frags))
	}
	return &Listing{n: n, frags: frags, guids: guids}, nil
}

// NewJoined is New for encodings that lie in joined, the whole listing's JSON
// array, as its elements: frags[i] must be the substring of joined that is its i-th
// element (not merely equal to it), so that the array and the encodings are one
// copy of the bytes (a cache's stored value). An error means they do not.
func NewJoined(n int, frags []string, joined string, guids GUIDs) (*Listing, error) {
	if frags == nil || n != len(frags) {
		return nil, fmt.Errorf("encoded listing: %d objects but %d encodings", n, len(frags))
	}
	// Each fragment must start where the array has it, which a comparison of
	// addresses checks without reading the bytes; the separators are read.
	base := uintptr(unsafe.Pointer(unsafe.StringData(joined)))
	off := 1
	if len(joined) < 2 || joined[0] != '[' || joined[len(joined)-1] != ']' {
		return nil, fmt.Errorf("encoded listing: joined encodings are not an array")
	}
	for i, f := range frags {
		if i > 0 {
			if off >= len(joined) || joined[off] != ',' {
				return nil, fmt.Errorf("encoded listing: no separator before encoding %d", i)
			}
			off++
		}
		if off+len(f) > len(joined)-1 || len(f) > 0 && uintptr(unsafe.Pointer(unsafe.StringData(f))) != base+uintptr(off) {
			return nil, fmt.Errorf("encoded listing: encoding %d is not the array's element", i)
		}
		off += len(f)
	}
	if off != len(joined)-1 {
		return nil, fmt.Errorf("encoded listing: %d bytes after the last encoding", len(joined)-1-off)
	}
	return &Listing{n: n, frags: frags, joined: joined, guids: guids}, nil
}

// JSON returns the JSON array of every object of the listing, byte for byte what
// json.Marshal gives for the objects, when the encodings lie in it (NewJoined), and
// "" otherwise. It shares the encodings' bytes: a response of the whole listing can
// be sent without a copy of its own.
func (e *Listing) JSON() string { return e.joined }

// Fragments returns the JSON encodings of the objects, nil when they have none.
func (e *Listing) Fragments() []string { return e.frags }

// FragmentBytes is the size of all the encodings, counted once.
func (e *Listing) FragmentBytes() int {
	e.sizeOnce.Do(func() {
		if e.joined != "" {
			e.size = len(e.joined) - 2 - max(len(e.frags)-1, 0) // the brackets and commas
			return
		}
		for _, f := range e.frags {
			e.size += len(f)
		}
	})
	return e.size
}

// Index returns the position of the object whose GUID is guid, -1 when the listing
// has none. The index is built on first use.
func (e *Listing) Index(guid string) int {
	e.indexOnce.Do(func() {
		e.index = make(map[string]int, e.n)
		for j := range e.n {
			e.index[e.guids.GUID(j)] = j
		}
	})
	if j, ok := e.index[guid]; ok {
		return j
	}
	return -1
}
