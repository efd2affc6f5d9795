package dirgate

import (
	"encoding/json"
	"fmt"
	"sync"
)

// EncodedListing is an unfiltered listing beside the JSON encoding of each of its
// objects. Encoding 1,000 objects costs about 4 ms; joining their encodings about
// 0.3 ms (docs/benchmarks.md, "Cost calibration"), so a cache keeps listings in this
// form and hands them, in the request's ListingReport, to the renderer (render/),
// which joins responses from them. It is the door between the two: neither imports
// the other. It is immutable and safe for concurrent use, and a cache fill makes a
// new one, so its identity names one version of a listing.
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

// FragmentBytes is the size of all the encodings, counted once.
func (e *EncodedListing) FragmentBytes() int {
	e.sizeOnce.Do(func() {
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
