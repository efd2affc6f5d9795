package render

import (
	"math"
	"runtime"
	"sync"
	"unsafe"
	"weak"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/encodedlisting"
)

// Body is the JSON of one listing response, rendered once and shared by every request
// that receives the same bytes, beside variants of it (compressed forms) made once,
// on first use. It is immutable once made: callers must not modify what it returns.
type Body struct {
	json []byte

	mu       sync.Mutex
	variants map[string]*variant
	cache    *BodyCache // accounts the variants' bytes; nil when the body is not shared
	size     int64      // bytes accounted to it while kept; guarded by cache.mu
	kept     bool       // whether cache still keeps it; guarded by cache.mu
	key      bodyKey    // what cache keeps it under; guarded by cache.mu
}

type variant struct {
	once sync.Once
	b    []byte
}

// NewBody wraps b, which the caller must not modify afterwards.
func NewBody(b []byte) *Body { return &Body{json: b} }

// JSON returns the body's bytes.
func (b *Body) JSON() []byte { return b.json }

// Variant returns the variant of the body called name, making it with make on first
// use: concurrent callers wait for the one call, and later ones get its result. make
// receives the JSON and may return nil (no such variant is worth having, such as a
// compressed form no smaller than the JSON).
func (b *Body) Variant(name string, make func(json []byte) []byte) []byte {
	b.mu.Lock()
	v := b.variants[name]
	if v == nil {
		if b.variants == nil {
			b.variants = map[string]*variant{}
		}
		v = &variant{}
		b.variants[name] = v
	}
	b.mu.Unlock()
	v.once.Do(func() {
		v.b = make(b.json)
		b.cache.grow(b, len(v.b))
	})
	return v.b
}

// BodyCache keeps rendered listing bodies, least recently used out, bounded in bytes
// (their variants included). A body is keyed by the listing it was rendered from,
// the listing's identity as an immutable value (a cache fill makes a new one, so a
// changed or invalidated listing never finds the bodies of the old one), and by the
// exact selection of its objects. Nothing else determines a rendered body's bytes.
// It is safe for concurrent use.
type BodyCache struct {
	mu       sync.Mutex
	maxBytes int64
	bytes    int64
	lru      *simplelru.LRU[bodyKey, *Body] // unbounded in count: the bound is in bytes
	// big is one body larger than the whole bound, kept beside it (not counted in
	// bytes) until another such body takes its place or its listing is collected.
	big    *Body
	bigKey bodyKey
	// watched are the listings whose collection drops the body beside the bound
	// (runtime.AddCleanup), each registered once while it lives.
	watched map[weak.Pointer[encodedlisting.Listing]]struct{}
}

// bodyKey holds the listing weakly: a listing evicted from its cache is not kept
// alive by the bodies rendered from it, and a weak pointer never equals one made
// from another listing, even one later allocated at the same address.
type bodyKey struct {
	listing weak.Pointer[encodedlisting.Listing]
	sel     string
}

// NewBodyCache returns a cache of at most maxBytes of bodies, plus one larger than
// that. Any body within the bound is kept, pushing out what it must: one that is not
// kept is rendered (and compressed) again on every request, at a cost in proportion
// to its size (175 ms a request for 100,000 members, gzip more). A body
// larger than the whole bound takes the place kept beside the bound, leaving the
// others where they are: every request for that listing would otherwise hold a copy
// of its own, so keeping one shared body costs less memory under concurrent callers,
// not more. It stays until another such body takes its place or its listing is
// collected.
func NewBodyCache(maxBytes int64) *BodyCache {
	lru, _ := simplelru.NewLRU[bodyKey, *Body](math.MaxInt, nil) // the size is positive
	return &BodyCache{maxBytes: maxBytes, lru: lru}
}

// keyBufs are scratch space for bodies' keys. A key is the selection's bitmap, an
// eighth of a byte a member: grown by append on every request it made 32 KB of
// garbage a request for 100,000 members (most of the 68 KB a cached hit allocated,
// BenchmarkLargeCachedListing -benchmem), which the collector pays for in
// proportion to the heap it marks.
var keyBufs = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledKey bounds the key buffers kept for reuse (a selection of about four
// million objects).
const maxPooledKey = 512 << 10

// body returns the body of sel over listing e, rendering it at most once while it is
// kept.
func (c *BodyCache) body(e *encodedlisting.Listing, sel dirgate.Selection) *Body {
	if c == nil {
		return NewBody(renderSelection(e, sel))
	}
	pooled := keyBufs.Get().(*[]byte)
	keyBuf := sel.AppendKey((*pooled)[:0])
	defer func() {
		if cap(keyBuf) <= maxPooledKey {
			*pooled = keyBuf
			keyBufs.Put(pooled)
		}
	}()
	wp := weak.Make(e)
	c.mu.Lock()
	// Looked up by a string over keyBuf: Get keeps no key, and a copy would cost an
	// allocation per request.
	lookup := bodyKey{wp, unsafe.String(unsafe.SliceData(keyBuf), len(keyBuf))}
	if b, ok := c.lru.Get(lookup); ok {
		c.mu.Unlock()
		return b
	}
	if c.big != nil && c.bigKey == lookup {
		b := c.big
		c.mu.Unlock()
		return b
	}
	c.mu.Unlock()
	// Rendered outside the lock: concurrent first requests may each render it, and
	// the first one stored wins. Their bytes are equal.
	b := &Body{json: renderSelection(e, sel)}
	// A body of the whole listing shares the cache's stored value (renderSelection)
	// and is still counted at its length, as a copy would be: it keeps that value
	// alive after the first level drops the entry, until it is evicted here, so not
	// counting it would let kept bodies hold memory outside both bounds. While the
	// entry is kept too, its bytes are counted by both caches, which only makes
	// each bound conservative.
	size := int64(len(b.json) + len(keyBuf))
	c.mu.Lock()
	defer c.mu.Unlock()
	k := bodyKey{wp, string(keyBuf)}
	if kept, ok := c.lru.Get(k); ok {
		return kept
	}
	if c.big != nil && c.bigKey == k {
		return c.big
	}
	if size > c.maxBytes {
		// Its variants are not counted either (b.cache stays nil).
		c.keepBig(b, k, e)
		return b
	}
	b.cache, b.size, b.kept, b.key = c, size, true, k
	c.lru.Add(k, b)
	c.bytes += size
	c.evict()
	return b
}

// keepBig keeps b, rendered from e, beside the bound under k, in place of the body
// kept there, until another takes its place or e is collected.
func (c *BodyCache) keepBig(b *Body, k bodyKey, e *encodedlisting.Listing) {
	c.big, c.bigKey = b, k
	if _, ok := c.watched[k.listing]; !ok {
		if c.watched == nil {
			c.watched = map[weak.Pointer[encodedlisting.Listing]]struct{}{}
		}
		c.watched[k.listing] = struct{}{}
		runtime.AddCleanup(e, c.dropBig, k.listing)
	}
}

// dropBig forgets the body kept beside the bound if it was rendered from the
// listing wp, which has been collected: no request can find it any more.
func (c *BodyCache) dropBig(wp weak.Pointer[encodedlisting.Listing]) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.watched, wp)
	if c.bigKey.listing == wp {
		c.big, c.bigKey = nil, bodyKey{}
	}
}

// grow accounts n more bytes to b while it is kept.
func (c *BodyCache) grow(b *Body, n int) {
	if c == nil || n == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !b.kept {
		return // evicted: its holders keep it, the cache no longer does
	}
	b.size += int64(n)
	c.bytes += int64(n)
	if b.size > c.maxBytes {
		// Its variants took it beyond the whole bound: evicted, it would be rendered
		// and compressed again by every request. It is kept beside the bound instead,
		// its bytes no longer counted, as if it had been larger from the start.
		c.lru.Remove(b.key)
		c.bytes -= b.size
		b.kept = false
		if e := b.key.listing.Value(); e != nil {
			c.keepBig(b, b.key, e)
		}
	}
	c.evict()
}

func (c *BodyCache) evict() {
	for c.bytes > c.maxBytes {
		_, b, ok := c.lru.RemoveOldest()
		if !ok {
			return
		}
		b.kept = false
		c.bytes -= b.size
	}
}

// Len is the number of bodies kept, the one beside the bound included.
func (c *BodyCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.big != nil {
		return c.lru.Len() + 1
	}
	return c.lru.Len()
}

// Bytes is the size of the bodies kept within the bound, their variants included.
func (c *BodyCache) Bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}
