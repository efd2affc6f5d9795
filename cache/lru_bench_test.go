package cache

import (
	"fmt"
	"testing"
	"time"
)

// The LRUs' hot paths on their own (the listing benchmarks are dominated by writing
// the body): a first-level hit, a first-level add that evicts, a token read from the
// in-process store. Both structures are golang-lru's simplelru bounded in bytes
// (l1.go, store.go); these benchmarks are what a hand-written list in their place
// would have to beat (docs/benchmarks.md, "The LRUs").

func lruKeys() []string {
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprintf("dirgate:{%036d}:l:0123456789abcdef0123456789abcdef", i)
	}
	return keys
}

func BenchmarkFirstLevelGet(b *testing.B) {
	l, keys := newFirstLevel(1<<30), lruKeys()
	for _, k := range keys {
		l.add(k, &entry{size: 1000})
	}
	i := 0
	for b.Loop() {
		if l.get(keys[i%len(keys)]) == nil {
			b.Fatal("miss")
		}
		i++
	}
}

func BenchmarkFirstLevelAddEvicting(b *testing.B) {
	keys := lruKeys()
	l := newFirstLevel(int64(500 * (1000 + len(keys[0]))))
	e := &entry{size: 1000}
	i := 0
	for b.Loop() {
		l.add(keys[i%len(keys)], e)
		i++
	}
}

func BenchmarkMemoryStoreGet(b *testing.B) {
	s, keys := newMemoryStore(1<<30, time.Now), lruKeys()
	for _, k := range keys {
		if err := s.set(b.Context(), k, "token", time.Hour); err != nil {
			b.Fatal(err)
		}
	}
	i := 0
	for b.Loop() {
		if _, err := s.get(b.Context(), keys[i%len(keys)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
