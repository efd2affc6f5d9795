package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisFailures counts failed sign-ins across replicas: the shared
// implementation of the throttle's Counter (throttle/counter.go). One counter per
// key the throttle names (a client address for unknown session ids, an address
// and an account name for passwords, and an address for its passwords whatever the
// names, which bounds spraying across replicas), in a fixed window that starts at
// its first failure. The key is hashed into Redis's key, which bounds its length;
// every key is a key of its own, so the counts stay in Redis until their windows
// end however many names an address tries. The counters are plain integers
// (…auth:fail:<hash>): a replica of an older version counting the same keys adds
// to the same counts.
type RedisFailures struct {
	client  redis.UniversalClient
	prefix  string
	timeout time.Duration
	window  time.Duration
}

// NewRedisFailures counts in client under prefix, each key over window (the
// throttle's); timeout bounds each command.
func NewRedisFailures(client redis.UniversalClient, prefix string, timeout, window time.Duration) *RedisFailures {
	return &RedisFailures{client: client, prefix: prefix, timeout: timeout, window: window}
}

func (f *RedisFailures) key(addr string) string {
	sum := sha256.Sum256([]byte(addr))
	return f.prefix + "fail:" + hex.EncodeToString(sum[:16])
}

// failScript adds one, starts the window on the first failure, and returns the
// count and how long the window still runs, in one step.
var failScript = redis.NewScript(`local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return {n, redis.call('PTTL', KEYS[1])}`)

// takeScript adds one unless the count has reached ARGV[2]; it returns the count
// with the attempt, or -1 and how long the window still runs.
var takeScript = redis.NewScript(`local n = tonumber(redis.call('GET', KEYS[1]) or '0')
if n >= tonumber(ARGV[2]) then return {-1, redis.call('PTTL', KEYS[1])} end
n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return {n, 0}`)

// giveScript takes one back, within the window that is running (none: nothing to
// take).
var giveScript = redis.NewScript(`if redis.call('EXISTS', KEYS[1]) == 1 and tonumber(redis.call('GET', KEYS[1])) > 0 then
  return redis.call('DECR', KEYS[1])
end
return 0`)

// Fail counts a failure of key: blocked when the count with it passes limit.
func (f *RedisFailures) Fail(ctx context.Context, key string, limit int, _ time.Time) (int, time.Duration, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	n, ttl, err := f.run(ctx, failScript, key, f.window.Milliseconds())
	if err != nil || n <= limit {
		return n, 0, false, err
	}
	return n, f.wait(ttl), true, nil
}

// Take counts an attempt at key unless its count has reached limit. The count is
// judged and taken in one script, so of attempts on all replicas at once at most
// limit are taken. Giving one back takes one off the window that is running:
// should the attempt's window have ended meanwhile and another started, that one
// loses a count.
func (f *RedisFailures) Take(ctx context.Context, key string, limit int, _ time.Time) (int, time.Duration, func(context.Context) error, error) {
	tctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	n, ttl, err := f.run(tctx, takeScript, key, f.window.Milliseconds(), limit)
	switch {
	case err != nil:
		return 0, 0, nil, err
	case n < 0:
		return 0, f.wait(ttl), nil, nil
	}
	return n, 0, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, f.timeout)
		defer cancel()
		return giveScript.Run(ctx, f.client, []string{f.key(key)}).Err()
	}, nil
}

// Blocked reports whether key's count has reached limit, and how long its window
// still runs.
func (f *RedisFailures) Blocked(ctx context.Context, key string, limit int, _ time.Time) (time.Duration, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	k := f.key(key)
	pipe := f.client.Pipeline()
	get := pipe.Get(ctx, k)
	ttl := pipe.PTTL(ctx, k)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return 0, false, err
	}
	n, err := get.Int()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	if n < limit {
		return 0, false, nil
	}
	return max(ttl.Val(), 0), true, nil
}

// run runs a script that returns a count and a PTTL in milliseconds.
func (f *RedisFailures) run(ctx context.Context, s *redis.Script, key string, args ...any) (int, int64, error) {
	res, err := s.Run(ctx, f.client, []string{f.key(key)}, args...).Int64Slice()
	if err != nil {
		return 0, 0, err
	}
	if len(res) != 2 {
		return 0, 0, fmt.Errorf("session: failure count: %d values", len(res))
	}
	return int(res[0]), res[1], nil
}

// wait is how long a full count still blocks: its window's remaining time, or a
// whole window for a count without one (written by something else).
func (f *RedisFailures) wait(pttl int64) time.Duration {
	if pttl > 0 {
		return time.Duration(pttl) * time.Millisecond
	}
	return f.window
}
