package render

import (
	"container/list"
	"sync"
	"weak"

	"github.com/dirgate/dirgate"
)

// Body is the JSON of one listing response, rendered once and shared by every request
// that receives the same bytes, beside variants of it (compressed forms) made once,
// on first use. It is immutable once made: callers must not modify what it returns.
type Body struct {
	json []byte

	mu       sync.Mutex
	variants map[string]*variant
	cache    *BodyCache    // accounts the variants' bytes; nil when the body is not shared
	el       *list.Element // its place in cache while kept; guarded by cache.mu
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
	items    map[bodyKey]*list.Element
	lru      list.List // of *bodyItem, most recently used first
}

// bodyKey holds the listing weakly: a listing evicted from its cache is not kept
// alive by the bodies rendered from it, and a weak pointer never equals one made
// from another listing, even one later allocated at the same address.
type bodyKey struct {
	listing weak.Pointer[dirgate.EncodedListing]
	sel     string
}

type bodyItem struct {
	key  bodyKey
	body *Body
	size int64
}

// NewBodyCache returns a cache of at most maxBytes of bodies. A body larger than a
// quarter of the bound is rendered for its request and not kept.
func NewBodyCache(maxBytes int64) *BodyCache {
	return &BodyCache{maxBytes: maxBytes, items: map[bodyKey]*list.Element{}}
}

// body returns the body of sel over listing e, rendering it at most once while it is
// kept. keyBuf is scratch space for the key.
func (c *BodyCache) body(e *dirgate.EncodedListing, sel dirgate.Selection, keyBuf []byte) *Body {
	if c == nil {
		return NewBody(renderSelection(e, sel))
	}
	keyBuf = sel.AppendKey(keyBuf[:0])
	wp := weak.Make(e)
	c.mu.Lock()
	if el, ok := c.items[bodyKey{wp, string(keyBuf)}]; ok {
		c.lru.MoveToFront(el)
		b := el.Value.(*bodyItem).body
		c.mu.Unlock()
		return b
	}
	c.mu.Unlock()
	// Rendered outside the lock: concurrent first requests may each render it, and
	// the first one stored wins. Their bytes are equal.
	b := &Body{json: renderSelection(e, sel)}
	size := int64(len(b.json) + len(keyBuf))
	if size > c.maxBytes/4 {
		return b
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k := bodyKey{wp, string(keyBuf)}
	if el, ok := c.items[k]; ok {
		c.lru.MoveToFront(el)
		return el.Value.(*bodyItem).body
	}
	b.cache = c
	b.el = c.lru.PushFront(&bodyItem{key: k, body: b, size: size})
	c.items[k] = b.el
	c.bytes += size
	c.evict()
	return b
}

// grow accounts n more bytes to b while it is kept.
func (c *BodyCache) grow(b *Body, n int) {
	if c == nil || n == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if b.el == nil {
		return // evicted: its holders keep it, the cache no longer does
	}
	b.el.Value.(*bodyItem).size += int64(n)
	c.bytes += int64(n)
	c.evict()
}

func (c *BodyCache) evict() {
	for c.bytes > c.maxBytes && c.lru.Len() > 0 {
		it := c.lru.Remove(c.lru.Back()).(*bodyItem)
		delete(c.items, it.key)
		it.body.el = nil
		c.bytes -= it.size
	}
}

// Len is the number of bodies kept.
func (c *BodyCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

// Bytes is the size of the bodies kept, their variants included.
func (c *BodyCache) Bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}
