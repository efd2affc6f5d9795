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

// A body dropped from the cache no longer counts: a variant made for it afterwards
// (by a request that still holds it) leaves the cache's bytes as they are, and the
// bytes kept are always those of the bodies kept.
func TestBodyCacheEvictedVariant(t *testing.T) {
	objs := make([]dirgate.Object, 64)
	for i := range objs {
		objs[i] = dirgate.Object{GUID: fmt.Sprint(i), DN: fmt.Sprintf("CN=u%d,DC=x", i)}
	}
	e, err := dirgate.EncodeListing(objs)
	if err != nil {
		t.Fatal(err)
	}
	one := func(i int) dirgate.Selection {
		s := dirgate.NewSelection(len(objs))
		s.Set(i)
		return s
	}
	var key [256]byte
	first := NewBodyCache(1<<20).body(e, one(0), key[:0])
	size := int64(len(first.JSON()) + len(one(0).AppendKey(nil)))
	c := NewBodyCache(4 * size) // four such bodies
	first = c.body(e, one(0), key[:0])
	for i := 1; i <= 4; i++ {
		c.body(e, one(i), key[:0])
	}
	if c.Len() != 4 || c.Bytes() != 4*size {
		t.Fatalf("%d bodies, %d bytes kept; want 4 and %d", c.Len(), c.Bytes(), 4*size)
	}
	if again := c.body(e, one(0), key[:0]); again == first {
		t.Fatal("the least recently used body was not the one dropped")
	}
	// The first body's replacement pushed out body 1; the dropped first body grows.
	before := c.Bytes()
	first.Variant("x", func(j []byte) []byte { return append([]byte("x"), j...) })
	if c.Bytes() != before || c.Len() != 4 {
		t.Errorf("a dropped body's variant changed the cache: %d bytes, %d bodies; want %d and 4", c.Bytes(), c.Len(), before)
	}
}
