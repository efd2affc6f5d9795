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
// dropped first and a new record is refused if none were. It also bounds the live
// records of one account (SetOwned), so that no single valid account can fill it.
type MemoryBackend struct {
	mu          sync.Mutex
	m           map[string]memEntry
	owners      map[string]map[string]struct{} // an account's keys
	max         int
	maxPerOwner int
	now         func() time.Time
}

type memEntry struct {
	v     string
	exp   time.Time
	owner string
}

// DefaultMemoryMax bounds the in-process records (a few hundred bytes each).
const DefaultMemoryMax = 100_000

// DefaultMemoryMaxPerAccount bounds one account's live records in process: a
// sign-in holds a session (Config.SessionTTL, 10 minutes by default) and then a
// token (Config.TokenTTL, 30 minutes) as well, so 100 records leave room for a
// sign-in every 25 seconds or so, sustained, while filling the store would take a
// thousand accounts.
const DefaultMemoryMaxPerAccount = 100

// ErrFull is returned when the in-process backend holds DefaultMemoryMax live records.
var ErrFull = errors.New("session: the in-process session store is full")

// ErrAccountFull is returned when a new session would give one account more than
// its bound of live records (DefaultMemoryMaxPerAccount).
var ErrAccountFull = errors.New("session: the account holds too many live sessions and tokens")

// NewMemoryBackend returns an empty in-process backend of at most max records (0
// means DefaultMemoryMax), DefaultMemoryMaxPerAccount of them per account.
func NewMemoryBackend(max int) *MemoryBackend {
	if max <= 0 {
		max = DefaultMemoryMax
	}
	return &MemoryBackend{m: map[string]memEntry{}, owners: map[string]map[string]struct{}{}, max: max,
		maxPerOwner: DefaultMemoryMaxPerAccount, now: time.Now}
}

// SetMaxPerAccount changes the per-account bound (tests; n > 0).
func (b *MemoryBackend) SetMaxPerAccount(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.maxPerOwner = n
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

func (b *MemoryBackend) Set(ctx context.Context, key, value string, ttl time.Duration) error {
	return b.SetOwned(ctx, key, value, "", ttl, false)
}

// SetOwned is Set for a record of an account (owner). With limit, a new record is
// refused with ErrAccountFull when the account already holds maxPerOwner live ones
// (its expired ones are dropped first). A record that replaces one under the same
// key keeps that one's owner.
func (b *MemoryBackend) SetOwned(_ context.Context, key, value, owner string, ttl time.Duration, limit bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	old, exists := b.m[key]
	if exists {
		owner = old.owner
	}
	if !exists && limit && owner != "" && len(b.owners[owner]) >= b.maxPerOwner {
		for k := range b.owners[owner] {
			if !now.Before(b.m[k].exp) {
				b.remove(k)
			}
		}
		if len(b.owners[owner]) >= b.maxPerOwner {
			return ErrAccountFull
		}
	}
	if !exists && len(b.m) >= b.max {
		for k, e := range b.m {
			if !now.Before(e.exp) {
				b.remove(k)
			}
		}
		if len(b.m) >= b.max {
			return ErrFull
		}
	}
	b.m[key] = memEntry{v: value, exp: now.Add(ttl), owner: owner}
	if owner != "" {
		if b.owners[owner] == nil {
			b.owners[owner] = map[string]struct{}{}
		}
		b.owners[owner][key] = struct{}{}
	}
	return nil
}

// remove deletes key and its place among its owner's keys.
func (b *MemoryBackend) remove(key string) {
	e, ok := b.m[key]
	if !ok {
		return
	}
	delete(b.m, key)
	if keys := b.owners[e.owner]; keys != nil {
		delete(keys, key)
		if len(keys) == 0 {
			delete(b.owners, e.owner)
		}
	}
}

func (b *MemoryBackend) GetDel(ctx context.Context, key string) (string, bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.m[key]
	b.remove(key)
	if !ok || !b.now().Before(e.exp) {
		return "", false, nil
	}
	return e.v, true, nil
}

func (b *MemoryBackend) Del(_ context.Context, keys ...string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, k := range keys {
		b.remove(k)
	}
	return nil
}

// RedisBackend keeps records in Redis under a prefix, one key each (so that a
// Redis Cluster spreads them), with Redis's own expiry.
type RedisBackend struct {
	client  redis.UniversalClient
	prefix  string
	timeout time.Duration

	// Deletions wait for waitReplicas replicas for at most waitTimeout (confirm.go);
	// confirmations counts the outcomes.
	waitReplicas  int
	waitTimeout   time.Duration
	confirmations confirmationCounter
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
