package cache

import (
	"context"
	"errors"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// store is a cache backend: string values under string keys, each with an expiry.
// The cache keeps its logic (versions, freshness, dependencies) above it, so that
// the two backends, Redis and the in-process memoryStore, stay small and pass one
// conformance suite (store_test.go).
type store interface {
	// get returns the values of keys, in order, "" for a key that holds none.
	get(ctx context.Context, keys ...string) ([]string, error)
	// set stores value, which must not be empty, under key for ttl.
	set(ctx context.Context, key, value string, ttl time.Duration) error
	// setIf stores value under key for ttl if, and only if, guardKey holds guard at
	// that moment; it reports whether it stored. key and guardKey share a hash tag.
	setIf(ctx context.Context, key, value string, ttl time.Duration, guardKey, guard string) (bool, error)
	// getOrSet returns the value of key, first storing value there for ttl if key
	// holds none, atomically.
	getOrSet(ctx context.Context, key, value string, ttl time.Duration) (string, error)
	// delIf deletes key if, and only if, it holds value.
	delIf(ctx context.Context, key, value string) error
	// setAll stores values[i], none empty, under keys[i] for ttl, in one round trip
	// (not atomically: after an error any of them may be stored).
	setAll(ctx context.Context, keys, values []string, ttl time.Duration) error
	// shared reports whether other instances read and write the store (Redis).
	shared() bool
	close() error
}

var errEmptyValue = errors.New("cache: empty values are not stored")

// memoryStore is the in-process backend, the default when no Redis is configured: a
// map bounded in bytes, evicting the least recently used values. An expired value is
// dropped when read, or when it is the least recently used and space is needed.
type memoryStore struct {
	mu sync.Mutex
	// lru is golang-lru's simplelru, unbounded in count (the bound is in bytes, kept
	// by store), its eviction callback taking a value's bytes off whichever way it
	// leaves. Items are held by pointer: copied out of Get by value, a read measured
	// about 8% slower (BenchmarkMemoryStoreGet, cache/lru_bench_test.go).
	lru      *simplelru.LRU[string, *memItem]
	bytes    int64
	maxBytes int64
	now      func() time.Time
}

type memItem struct {
	value   string
	expires time.Time
}

// memItemOverhead approximates the bookkeeping of one value (map slot, list entry).
const memItemOverhead = 128

func memSize(key, value string) int64 { return int64(len(key) + len(value) + memItemOverhead) }

func newMemoryStore(maxBytes int64, now func() time.Time) *memoryStore {
	m := &memoryStore{maxBytes: maxBytes, now: now}
	m.lru, _ = simplelru.NewLRU(math.MaxInt, func(key string, it *memItem) { m.bytes -= memSize(key, it.value) }) // the size is positive
	return m
}

func (m *memoryStore) get(ctx context.Context, keys ...string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = m.load(k)
	}
	return out, nil
}

// load returns key's live value, dropping it if it has expired.
func (m *memoryStore) load(key string) string {
	it, ok := m.lru.Get(key)
	if !ok {
		return ""
	}
	if !m.now().Before(it.expires) {
		m.lru.Remove(key)
		return ""
	}
	return it.value
}

func (m *memoryStore) set(ctx context.Context, key, value string, ttl time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if value == "" {
		return errEmptyValue
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.store(key, value, ttl)
	return nil
}

func (m *memoryStore) setIf(ctx context.Context, key, value string, ttl time.Duration, guardKey, guard string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if value == "" {
		return false, errEmptyValue
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.load(guardKey) != guard {
		return false, nil
	}
	m.store(key, value, ttl)
	return true, nil
}

func (m *memoryStore) getOrSet(ctx context.Context, key, value string, ttl time.Duration) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if value == "" {
		return "", errEmptyValue
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if v := m.load(key); v != "" {
		return v, nil
	}
	m.store(key, value, ttl)
	return value, nil
}

func (m *memoryStore) delIf(ctx context.Context, key, value string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.load(key) == value { // load drops an expired value first
		m.lru.Remove(key)
	}
	return nil
}

func (m *memoryStore) setAll(ctx context.Context, keys, values []string, ttl time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if slices.Contains(values, "") {
		return errEmptyValue
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, k := range keys {
		m.store(k, values[i], ttl)
	}
	return nil
}

func (m *memoryStore) shared() bool { return false }

func (m *memoryStore) store(key, value string, ttl time.Duration) {
	m.lru.Remove(key) // its bytes go with it (the eviction callback)
	size := memSize(key, value)
	if size > m.maxBytes {
		return // larger than the whole store: not kept, as if evicted at once
	}
	for m.bytes+size > m.maxBytes {
		m.lru.RemoveOldest()
	}
	m.lru.Add(key, &memItem{value: value, expires: m.now().Add(ttl)})
	m.bytes += size
}

func (m *memoryStore) close() error { return nil }
