// Package encodedtest makes encoded listings for tests: the renderer's, the
// cache's and the hostile-input suite's tests hold objects without their
// encodings, which dirgate's cache writes straight into its stored value and pairs
// with encodedlisting.NewJoined (cache/codec.go).
package encodedtest

import (
	"unsafe"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/encodedlisting"
)

// EncodeListing encodes every object of objs (Object.AppendJSON) and returns the
// listing of objs with those encodings (encodedlisting.New). The encodings are
// carved out of shared chunks: a listing of 100,000 objects is some 44 MB of JSON,
// and one string per object was 100,000 allocations for the collector to follow in
// the benchmarks that build one (cache/bench_test.go).
func EncodeListing(objs []dirgate.Object) (dirgate.Listing, error) {
	frags := make([]string, len(objs))
	var scratch, chunk []byte
	for i := range objs {
		scratch = objs[i].AppendJSON(scratch[:0])
		if len(chunk)+len(scratch) > cap(chunk) {
			chunk = make([]byte, 0, max(encodeChunkBytes, len(scratch)))
		}
		start := len(chunk)
		chunk = append(chunk, scratch...)
		// The chunk's bytes up to len(chunk) are never written again (later objects
		// are appended beyond them), so the string shares them rather than copying.
		frags[i] = unsafe.String(unsafe.SliceData(chunk[start:]), len(scratch))
	}
	enc, err := encodedlisting.New(len(objs), frags, encodedlisting.GUIDFunc(func(i int) string { return objs[i].GUID }))
	if err != nil {
		return dirgate.Listing{}, err
	}
	return dirgate.Listing{Objects: objs, Encoded: enc}, nil
}

// encodeChunkBytes bounds what a chunk of EncodeListing wastes at its end and what
// one fragment keeps alive.
const encodeChunkBytes = 64 << 10
