package cache

import (
	"math"
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// firstLevel keeps decoded entries in process, least recently used first out, bounded
// in bytes: decoding a 1,000-object listing costs more than filtering and writing it
// (docs/benchmarks.md, "Cost calibration"), so hot listings are decoded once per
// instance. Entries are immutable; whether one may still be served is decided by the
// cache (versions, freshness), not here.
//
// Beside the bound it keeps one entry larger than the whole bound (big), the most
// recently added such one. Serving a listing needs it decoded anyway: not kept, it
// would be decoded again by every request, each holding its own copy while it
// writes (90 ms a request for 100,000 members, and a new listing that no
// rendered body or remembered decision is keyed by). Kept, every request shares one.
// So the first level holds at most its bound plus its largest listing.
type firstLevel struct {
	mu sync.Mutex
	// lru holds the entries within the bound, least recently used out: golang-lru's
	// simplelru, unbounded in count (the bound is in bytes, kept by add), its
	// eviction callback taking an entry's bytes off whichever way it leaves.
	lru      *simplelru.LRU[string, *entry]
	bytes    int64
	maxBytes int64
	big      *l1Item // an entry larger than maxBytes, not counted in bytes; nil if none
}

type l1Item struct {
	key string
	e   *entry
}

// l1Size is what an entry is accounted for in the first level's bound.
func l1Size(key string, e *entry) int64 { return int64(e.size + len(key)) }

func newFirstLevel(maxBytes int64) *firstLevel {
	l := &firstLevel{maxBytes: maxBytes}
	l.lru, _ = simplelru.NewLRU(math.MaxInt, func(key string, e *entry) { l.bytes -= l1Size(key, e) }) // the size is positive
	return l
}

func (l *firstLevel) get(key string) *entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.lru.Get(key); ok {
		return e
	}
	if l.big != nil && l.big.key == key {
		return l.big.e
	}
	return nil
}

// add keeps e under key, replacing what was there. Any entry within the bound is
// kept, pushing out what it must: one that is not kept is decoded again on every
// request, at a cost in proportion to its size, whereas what it pushes out costs one
// decode each when next used. An entry bigger than the whole bound takes the place
// of the one kept beside the bound, leaving the others where they are.
func (l *firstLevel) add(key string, e *entry) {
	size := l1Size(key, e)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lru.Remove(key) // its bytes go with it (the eviction callback)
	if l.big != nil && l.big.key == key {
		l.big = nil
	}
	if size > l.maxBytes {
		l.big = &l1Item{key: key, e: e}
		return
	}
	for l.bytes+size > l.maxBytes {
		if _, _, ok := l.lru.RemoveOldest(); !ok {
			break
		}
	}
	l.lru.Add(key, e)
	l.bytes += size
}

// remove drops key if it still holds e (a concurrent fill may have replaced it).
func (l *firstLevel) remove(key string, e *entry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if kept, ok := l.lru.Peek(key); ok && kept == e {
		l.lru.Remove(key)
	}
	if l.big != nil && l.big.key == key && l.big.e == e {
		l.big = nil
	}
}

// drop removes every entry for which match holds (the change feed's dropped
// resolutions): a walk of the whole level, under its lock.
func (l *firstLevel) drop(match func(key string, e *entry) bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, key := range l.lru.Keys() {
		if e, _ := l.lru.Peek(key); match(key, e) {
			l.lru.Remove(key)
		}
	}
	if l.big != nil && match(l.big.key, l.big.e) {
		l.big = nil
	}
}

func (l *firstLevel) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.lru.Len()
	if l.big != nil {
		n++
	}
	return n
}
