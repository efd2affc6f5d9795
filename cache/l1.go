package cache

import (
	"container/list"
	"sync"
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
	mu       sync.Mutex
	items    map[string]*list.Element
	lru      list.List // of *l1Item, most recently used first
	bytes    int64
	maxBytes int64
	big      *l1Item // an entry larger than maxBytes, not counted in bytes; nil if none
}

type l1Item struct {
	key string
	e   *entry
}

func newFirstLevel(maxBytes int64) *firstLevel {
	return &firstLevel{items: map[string]*list.Element{}, maxBytes: maxBytes}
}

func (l *firstLevel) get(key string) *entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	el, ok := l.items[key]
	if !ok {
		if l.big != nil && l.big.key == key {
			return l.big.e
		}
		return nil
	}
	l.lru.MoveToFront(el)
	return el.Value.(*l1Item).e
}

// add keeps e under key, replacing what was there. Any entry within the bound is
// kept, pushing out what it must: one that is not kept is decoded again on every
// request, at a cost in proportion to its size, whereas what it pushes out costs one
// decode each when next used. An entry bigger than the whole bound takes the place
// of the one kept beside the bound, leaving the others where they are.
func (l *firstLevel) add(key string, e *entry) {
	size := int64(e.size + len(key))
	l.mu.Lock()
	defer l.mu.Unlock()
	if el, ok := l.items[key]; ok {
		l.removeElement(el)
	}
	if l.big != nil && l.big.key == key {
		l.big = nil
	}
	if size > l.maxBytes {
		l.big = &l1Item{key: key, e: e}
		return
	}
	for l.bytes+size > l.maxBytes && l.lru.Len() > 0 {
		l.removeElement(l.lru.Back())
	}
	l.items[key] = l.lru.PushFront(&l1Item{key: key, e: e})
	l.bytes += size
}

// remove drops key if it still holds e (a concurrent fill may have replaced it).
func (l *firstLevel) remove(key string, e *entry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if el, ok := l.items[key]; ok && el.Value.(*l1Item).e == e {
		l.removeElement(el)
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
	for key, el := range l.items {
		if match(key, el.Value.(*l1Item).e) {
			l.removeElement(el)
		}
	}
	if l.big != nil && match(l.big.key, l.big.e) {
		l.big = nil
	}
}

func (l *firstLevel) removeElement(el *list.Element) {
	it := l.lru.Remove(el).(*l1Item)
	delete(l.items, it.key)
	l.bytes -= int64(it.e.size + len(it.key))
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
