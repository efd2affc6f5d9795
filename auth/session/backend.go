package session

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// MemoryBackend keeps records in this process: sessions and tokens then work on
// this replica only. It holds at most max records; when full, expired ones are
// dropped first and a new record is refused if none were.
type MemoryBackend struct {
	mu  sync.Mutex
	m   map[string]memEntry
	max int
	now func() time.Time
}

type memEntry struct {
	v   string
	exp time.Time
}

// DefaultMemoryMax bounds the in-process records (a few hundred bytes each).
const DefaultMemoryMax = 100_000

// ErrFull is returned when the in-process backend holds DefaultMemoryMax live records.
var ErrFull = errors.New("session: the in-process session store is full")

// NewMemoryBackend returns an empty in-process backend of at most max records (0
// means DefaultMemoryMax).
func NewMemoryBackend(max int) *MemoryBackend {
	if max <= 0 {
		max = DefaultMemoryMax
	}
	return &MemoryBackend{m: map[string]memEntry{}, max: max, now: time.Now}
}

func (b *MemoryBackend) Get(_ context.Context, key string) (string, bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.m[key]
	if !ok || !b.now().Before(e.exp) {
		return "", false, nil
	}
	return e.v, true, nil
}

func (b *MemoryBackend) Set(_ context.Context, key, value string, ttl time.Duration) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	if _, exists := b.m[key]; !exists && len(b.m) >= b.max {
		for k, e := range b.m {
			if !now.Before(e.exp) {
				delete(b.m, k)
			}
		}
		if len(b.m) >= b.max {
			return ErrFull
		}
	}
	b.m[key] = memEntry{v: value, exp: now.Add(ttl)}
	return nil
}

func (b *MemoryBackend) GetDel(ctx context.Context, key string) (string, bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.m[key]
	delete(b.m, key)
	if !ok || !b.now().Before(e.exp) {
		return "", false, nil
	}
	return e.v, true, nil
}

func (b *MemoryBackend) Del(_ context.Context, keys ...string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, k := range keys {
		delete(b.m, k)
	}
	return nil
}

// RedisBackend keeps records in Redis under a prefix, one key each (so that a
// Redis Cluster spreads them), with Redis's own expiry.
type RedisBackend struct {
	client  redis.UniversalClient
	prefix  string
	timeout time.Duration
}

// NewRedisBackend uses client (shared with the cache) with keys under prefix.
// timeout bounds each command (0: the client's own).
func NewRedisBackend(client redis.UniversalClient, prefix string, timeout time.Duration) *RedisBackend {
	return &RedisBackend{client: client, prefix: prefix, timeout: timeout}
}

func (b *RedisBackend) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	if b.timeout > 0 {
		return context.WithTimeout(ctx, b.timeout)
	}
	return ctx, func() {}
}

// MaxRecordBytes bounds a record read from Redis: records are a few hundred bytes.
// Of a longer value, which the store did not write, only the first MaxRecordBytes+1
// bytes are transferred, and they fail the record's HMAC check (logged, refused as
// unknown) (docs/auth.md, "What Redis holds").
const MaxRecordBytes = 4096

func (b *RedisBackend) Get(ctx context.Context, key string) (string, bool, error) {
	ctx, cancel := b.ctx(ctx)
	defer cancel()
	v, err := b.client.GetRange(ctx, b.prefix+key, 0, MaxRecordBytes).Result()
	if err != nil || v == "" {
		return "", false, err // empty: missing (records are never empty)
	}
	return v, true, nil
}

func (b *RedisBackend) Set(ctx context.Context, key, value string, ttl time.Duration) error {
	ctx, cancel := b.ctx(ctx)
	defer cancel()
	return b.client.Set(ctx, b.prefix+key, value, ttl).Err()
}

// getDelScript is GETDEL answering at most ARGV[1]+1 bytes of the value.
var getDelScript = redis.NewScript(`
local v = redis.call('GETRANGE', KEYS[1], 0, tonumber(ARGV[1]))
if v == '' then
  return false
end
redis.call('DEL', KEYS[1])
return v`)

func (b *RedisBackend) GetDel(ctx context.Context, key string) (string, bool, error) {
	ctx, cancel := b.ctx(ctx)
	defer cancel()
	v, err := getDelScript.Run(ctx, b.client, []string{b.prefix + key}, MaxRecordBytes).Text()
	if errors.Is(err, redis.Nil) {
		return "", false, nil
	}
	return v, err == nil, err
}

func (b *RedisBackend) Del(ctx context.Context, keys ...string) error {
	ctx, cancel := b.ctx(ctx)
	defer cancel()
	// One DEL per key: in a cluster the keys live in different slots.
	for _, k := range keys {
		if err := b.client.Del(ctx, b.prefix+k).Err(); err != nil {
			return err
		}
	}
	return nil
}
