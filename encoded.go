package dirgate

import (
	"fmt"
	"sync"
	"unsafe"
)

// EncodedListing is an unfiltered listing beside the JSON encoding of each of its
// objects. Encoding 1,000 objects cost about 4 ms with encoding/json, joining their
// encodings about 0.3 ms (docs/benchmarks.md, "Cost calibration"); Object.AppendJSON
// encodes in about a fifth of encoding/json's time (BenchmarkObjectJSON), still
// several times a join. So a cache keeps listings in this form and returns them in
// a Listing, which reaches the renderer (render/), which joins responses from them.
// It is the door between the two: neither imports the other. It is immutable and
// safe for concurrent use, and a cache fill makes a new one, so its identity names
// one version of a listing.
type EncodedListing struct {
	objs   []Object
	frags  []string
	joined string // "[" frags[0] "," frags[1] ... "]", each fragment a substring of it; "" when not laid out so

	indexOnce sync.Once
	index     map[string]int // GUID -> position, built when a response is not a subsequence
	sizeOnce  sync.Once
	size      int // bytes of all fragments
}

// NewEncodedListing pairs objects with their encodings (Object.AppendJSON), made
// earlier (a cache that stored both). frags[i] must be the encoding of objs[i]; nil
// frags means that the objects have none and are encoded when served.
func NewEncodedListing(objs []Object, frags []string) (*EncodedListing, error) {
	if frags != nil && len(objs) != len(frags) {
		return nil, fmt.Errorf("encoded listing: %d objects but %d encodings", len(objs), len(frags))
	}
	return &EncodedListing{objs: objs, frags: frags}, nil
}

// NewJoinedListing is NewEncodedListing for encodings that lie in joined, the whole
// listing's JSON array, as its elements: frags[i] must be the substring of joined
// that is its i-th element (not merely equal to it), so that the array and the
// encodings are one copy of the bytes (a cache's stored value). An error
// means they do not.
func NewJoinedListing(objs []Object, frags []string, joined string) (*EncodedListing, error) {
	if frags == nil || len(objs) != len(frags) {
		return nil, fmt.Errorf("encoded listing: %d objects but %d encodings", len(objs), len(frags))
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
	return &EncodedListing{objs: objs, frags: frags, joined: joined}, nil
}

// JSON returns the JSON array of every object of the listing, byte for byte what
// json.Marshal gives for Objects, when the encodings lie in it (NewJoinedListing),
// and "" otherwise. It shares the encodings' bytes: a response of the whole listing
// can be sent without a copy of its own.
func (e *EncodedListing) JSON() string { return e.joined }

// Objects returns the listing. It is shared: callers must not modify it.
func (e *EncodedListing) Objects() []Object { return e.objs }

// Fragments returns the JSON encodings of the objects, nil when they have none.
func (e *EncodedListing) Fragments() []string { return e.frags }

// FragmentBytes is the size of all the encodings, counted once.
func (e *EncodedListing) FragmentBytes() int {
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
func (e *EncodedListing) Index(guid string) int {
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
