package render

import (
	"fmt"
	"testing"

	"github.com/dirgate/dirgate"
)

// BenchmarkBodyCacheHit finds a kept body: the shared body's part of a cached
// listing's request (a listing of 1,000 objects, half of them selected).
func BenchmarkBodyCacheHit(b *testing.B) {
	objs := make([]dirgate.Object, 1000)
	for i := range objs {
		objs[i] = dirgate.Object{GUID: fmt.Sprint(i), DN: fmt.Sprintf("CN=u%d,DC=x", i)}
	}
	e, err := dirgate.EncodeListing(objs)
	if err != nil {
		b.Fatal(err)
	}
	sel := dirgate.NewSelection(len(objs))
	for i := 0; i < len(objs); i += 2 {
		sel.Set(i)
	}
	c := NewBodyCache(64 << 20)
	var key [256]byte
	first := c.body(e, sel, key[:0])
	for b.Loop() {
		if c.body(e, sel, key[:0]) != first {
			b.Fatal("another body")
		}
	}
}
