package cache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisStore is the shared backend over go-redis's universal client: one server, a
// Sentinel-managed primary or a Cluster, opened by the caller (redisconn). go-redis
// types stay inside this file and lease.go (the cache sees the store interface
// only).
type redisStore struct {
	client redis.UniversalClient
	// maxValue bounds what get reads of one value (maxStoredValue); log reports the
	// values refused for it.
	maxValue int
	log      *slog.Logger
}

// maxStoredValue is the largest value the cache writes to Redis: an entry of
// maxValueBytes, sealed. Every read takes at most one byte more (GETRANGE), so that a
// larger value, which dirgate did not write, is refused without being transferred
// (docs/cache.md, "Size of values").
const maxStoredValue = maxValueBytes + sealOverhead

// setIfScript stores ARGV[1] under KEYS[1] for ARGV[3] ms if KEYS[2] holds ARGV[2].
// Both keys carry one hash tag, so the script runs on one Cluster slot.
var setIfScript = redis.NewScript(`
if redis.call('GET', KEYS[2]) == ARGV[2] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
  return 1
end
return 0`)

// delIfScript deletes KEYS[1] if it holds ARGV[1].
var delIfScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`)

func newRedisStore(client redis.UniversalClient, log *slog.Logger) *redisStore {
	return &redisStore{client: client, maxValue: maxStoredValue, log: log}
}

// get reads keys with GETRANGE up to one byte past maxValue, pipelined (go-redis
// sends one batch per node of a Cluster). A value longer than maxValue is logged and
// read as none: the cache never wrote it, and only its first maxValue+1 bytes cross
// the network.
func (r *redisStore) get(ctx context.Context, keys ...string) ([]string, error) {
	out := make([]string, len(keys))
	end := int64(r.maxValue) // GETRANGE's end is inclusive: maxValue+1 bytes
	if len(keys) == 1 {
		v, err := r.client.GetRange(ctx, keys[0], 0, end).Result()
		if err != nil {
			return nil, fmt.Errorf("redis get: %w", err)
		}
		out[0] = r.capped(ctx, keys[0], v)
		return out, nil
	}
	cmds := make([]*redis.StringCmd, len(keys))
	_, err := r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.GetRange(ctx, k, 0, end)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redis get: %w", err)
	}
	for i, c := range cmds {
		out[i] = r.capped(ctx, keys[i], c.Val())
	}
	return out, nil
}

// capped returns v, or "" (a miss) when it is longer than maxValue.
func (r *redisStore) capped(ctx context.Context, key, v string) string {
	if len(v) <= r.maxValue {
		return v
	}
	r.log.WarnContext(ctx, "cache: refusing a Redis value over the size bound (not written by dirgate)", "key", key, "bound_bytes", r.maxValue)
	return ""
}

func (r *redisStore) set(ctx context.Context, key, value string, ttl time.Duration) error {
	if value == "" {
		return errEmptyValue
	}
	if err := r.client.Set(ctx, key, value, ttlOf(ttl)).Err(); err != nil {
		return fmt.Errorf("redis set: %w", err)
	}
	return nil
}

func (r *redisStore) setIf(ctx context.Context, key, value string, ttl time.Duration, guardKey, guard string) (bool, error) {
	if value == "" {
		return false, errEmptyValue
	}
	n, err := setIfScript.Run(ctx, r.client, []string{key, guardKey}, value, guard, ttlOf(ttl).Milliseconds()).Int()
	if err != nil {
		return false, fmt.Errorf("redis set if: %w", err)
	}
	return n == 1, nil
}

// getOrSet is SET NX GET (Redis 7.0): it returns the old value, or nil after storing.
func (r *redisStore) getOrSet(ctx context.Context, key, value string, ttl time.Duration) (string, error) {
	if value == "" {
		return "", errEmptyValue
	}
	old, err := r.client.SetArgs(ctx, key, value, redis.SetArgs{Mode: "NX", Get: true, TTL: ttlOf(ttl)}).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return value, nil
	case err != nil:
		return "", fmt.Errorf("redis get or set: %w", err)
	}
	return old, nil
}

func (r *redisStore) delIf(ctx context.Context, key, value string) error {
	if err := delIfScript.Run(ctx, r.client, []string{key}, value).Err(); err != nil {
		return fmt.Errorf("redis delete if: %w", err)
	}
	return nil
}

// setAll pipelines the SETs (go-redis sends one batch per node of a Cluster).
func (r *redisStore) setAll(ctx context.Context, keys, values []string, ttl time.Duration) error {
	if slices.Contains(values, "") {
		return errEmptyValue
	}
	if len(keys) == 1 {
		return r.set(ctx, keys[0], values[0], ttl)
	}
	cmds, err := r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			p.Set(ctx, k, values[i], ttlOf(ttl))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("redis set: %w", err)
	}
	for _, c := range cmds {
		if c.Err() != nil {
			return fmt.Errorf("redis set: %w", c.Err())
		}
	}
	return nil
}

func (r *redisStore) shared() bool { return true }

// close leaves the client open: its opener closes it.
func (r *redisStore) close() error { return nil }

// ttlOf rounds up to Redis's millisecond resolution: a positive TTL never becomes
// "no expiry".
func ttlOf(d time.Duration) time.Duration {
	if d < time.Millisecond {
		return time.Millisecond
	}
	return d.Round(time.Millisecond)
}
