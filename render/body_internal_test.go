package render

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/encodedlisting"
	"github.com/dirgate/dirgate/test/harness/encodedtest"
)

// BenchmarkBodyCacheHit finds a kept body: the shared body's part of a cached
// listing's request (a listing of 1,000 objects, half of them selected).
func BenchmarkBodyCacheHit(b *testing.B) {
	objs := make([]dirgate.Object, 1000)
	for i := range objs {
		objs[i] = dirgate.Object{GUID: fmt.Sprint(i), DN: fmt.Sprintf("CN=u%d,DC=x", i)}
	}
	l, err := encodedtest.EncodeListing(objs)
	if err != nil {
		b.Fatal(err)
	}
	e := l.Encoded
	sel := dirgate.NewSelection(len(objs))
	for i := 0; i < len(objs); i += 2 {
		sel.Set(i)
	}
	c := NewBodyCache(64 << 20)
	first := c.body(e, sel)
	for b.Loop() {
		if c.body(e, sel) != first {
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
	l, err := encodedtest.EncodeListing(objs)
	if err != nil {
		t.Fatal(err)
	}
	e := l.Encoded
	one := func(i int) dirgate.Selection {
		s := dirgate.NewSelection(len(objs))
		s.Set(i)
		return s
	}
	first := NewBodyCache(1<<20).body(e, one(0))
	size := int64(len(first.JSON()) + len(one(0).AppendKey(nil)))
	c := NewBodyCache(4 * size) // four such bodies
	first = c.body(e, one(0))
	for i := 1; i <= 4; i++ {
		c.body(e, one(i))
	}
	if c.Len() != 4 || c.Bytes() != 4*size {
		t.Fatalf("%d bodies, %d bytes kept; want 4 and %d", c.Len(), c.Bytes(), 4*size)
	}
	if again := c.body(e, one(0)); again == first {
		t.Fatal("the least recently used body was not the one dropped")
	}
	// The first body's replacement pushed out body 1; the dropped first body grows.
	before := c.Bytes()
	first.Variant("x", func(j []byte) []byte { return append([]byte("x"), j...) })
	if c.Bytes() != before || c.Len() != 4 {
		t.Errorf("a dropped body's variant changed the cache: %d bytes, %d bodies; want %d and 4", c.Bytes(), c.Len(), before)
	}
}

// TestBodyCacheKeepsLargeBodies: a body larger than a quarter of the bound, within
// it or beyond it, is kept and found again (a body that is not kept is
// rendered and compressed again on every request). One beyond the bound is kept
// beside it, not counted in its bytes.
func TestBodyCacheKeepsLargeBodies(t *testing.T) {
	e, all := listingOf(t, 200)
	size := int64(len(NewBodyCache(1<<20).body(e, all).JSON()) + len(all.AppendKey(nil)))
	for _, tc := range []struct {
		bound, bytes int64
	}{{size * 4 / 3, size}, {size, size}, {size - 1, 0}, {1, 0}} {
		c := NewBodyCache(tc.bound)
		first := c.body(e, all)
		if c.body(e, all) != first || c.Len() != 1 || c.Bytes() != tc.bytes {
			t.Errorf("bound %d for a body of %d bytes: not found again, or %d bodies of %d bytes kept (want 1 of %d)", tc.bound, size, c.Len(), c.Bytes(), tc.bytes)
		}
	}
}

// A body beyond the bound pushes none of the bounded ones out; another one beyond it
// takes its place; it is forgotten once its listing is collected.
func TestBodyCacheBeyondBound(t *testing.T) {
	e, all := listingOf(t, 200)
	one := dirgate.NewSelection(200)
	one.Set(0)
	c := NewBodyCache(1024)
	small := c.body(e, one)
	big := c.body(e, all)
	if c.body(e, one) != small || c.body(e, all) != big || c.Len() != 2 {
		t.Fatal("the big body pushed a small one out, or was not kept")
	}
	e2, all2 := listingOf(t, 150)
	big2 := c.body(e2, all2)
	if c.body(e2, all2) != big2 || c.body(e, all) == big || c.body(e, one) != small {
		t.Fatal("a second big body did not take the first one's place alone")
	}
	// Big bodies of one listing in turn (two callers' views) are each rendered
	// again, and watch their listing once.
	most := all.Clone()
	most.Limit(150)
	for range 5 {
		c.body(e, all)
		c.body(e, most)
	}
	c.body(e2, all2)
	if n := len(c.watched); n != 2 {
		t.Errorf("%d listings watched, want 2", n)
	}
	defer runtime.KeepAlive(e) // watched to the end
	e2 = nil
	for range 100 {
		runtime.GC()
		c.mu.Lock()
		gone, watched := c.big == nil, len(c.watched)
		c.mu.Unlock()
		if gone && watched == 1 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t.Errorf("the big body outlived its listing (%v), or its listing is still watched (%d watched)", c.big != nil, len(c.watched))
}

// listingOf is an encoded listing of n objects and the selection of all of them.
func listingOf(t *testing.T, n int) (*encodedlisting.Listing, dirgate.Selection) {
	t.Helper()
	objs := make([]dirgate.Object, n)
	for i := range objs {
		objs[i] = dirgate.Object{GUID: fmt.Sprint(i), DN: fmt.Sprintf("CN=u%d,DC=x", i)}
	}
	l, err := encodedtest.EncodeListing(objs)
	if err != nil {
		t.Fatal(err)
	}
	e := l.Encoded
	all := dirgate.NewSelection(len(objs))
	for i := range objs {
		all.Set(i)
	}
	return e, all
}

// A body within the bound that its compressed forms take beyond it is kept beside the
// bound, not dropped: dropped, it would be rendered and compressed again by every
// request.
func TestBodyCacheVariantBeyondBound(t *testing.T) {
	e, all := listingOf(t, 200)
	size := int64(len(NewBodyCache(1<<20).body(e, all).JSON()) + len(all.AppendKey(nil)))
	c := NewBodyCache(size + 10)
	b := c.body(e, all)
	if c.Bytes() != size {
		t.Fatalf("%d bytes kept, want %d", c.Bytes(), size)
	}
	b.Variant("twice", func(j []byte) []byte { return append(append([]byte{}, j...), j...) })
	if c.body(e, all) != b || c.Len() != 1 || c.Bytes() != 0 {
		t.Errorf("after its variant: found again %v, %d bodies, %d bytes counted; want true, 1, 0", c.body(e, all) == b, c.Len(), c.Bytes())
	}
	runtime.KeepAlive(e)
}
