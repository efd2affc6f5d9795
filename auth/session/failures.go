package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisFailures counts failed sign-ins across replicas (proxy.SharedFailures): one
// counter per key the proxy names (a client address for unknown session ids, an
// address and an account name for passwords, and an address for its passwords
// whatever the names, which bounds spraying across replicas), in a fixed window
// that starts at its first failure. The key is hashed into Redis's key, which
// bounds its length; every key is a key of its own, so the counts stay in Redis
// until their windows end however many names an address tries.
type RedisFailures struct {
	client  redis.UniversalClient
	prefix  string
	timeout time.Duration
}

// NewRedisFailures counts in client under prefix; timeout bounds each command.
func NewRedisFailures(client redis.UniversalClient, prefix string, timeout time.Duration) *RedisFailures {
	return &RedisFailures{client: client, prefix: prefix, timeout: timeout}
}

func (f *RedisFailures) key(addr string) string {
	sum := sha256.Sum256([]byte(addr))
	return f.prefix + "fail:" + hex.EncodeToString(sum[:16])
}

// incr adds one and starts the window on the first failure, atomically.
var incr = redis.NewScript(`local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return n`)

// AddFailure records a failure of addr and returns the count in its window.
func (f *RedisFailures) AddFailure(ctx context.Context, addr string, window time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	n, err := incr.Run(ctx, f.client, []string{f.key(addr)}, window.Milliseconds()).Int()
	return n, err
}

// decr takes one back, within the window that is running (none: nothing to take).
var decr = redis.NewScript(`if redis.call('EXISTS', KEYS[1]) == 1 and tonumber(redis.call('GET', KEYS[1])) > 0 then
  return redis.call('DECR', KEYS[1])
end
return 0`)

// RemoveFailure gives back one count of addr: the proxy counts a sign-in before it
// checks the password and gives the count back when the check succeeds. Should
// the window have ended meanwhile and another started, that one loses a count.
func (f *RedisFailures) RemoveFailure(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	return decr.Run(ctx, f.client, []string{f.key(addr)}).Err()
}

// Failures returns addr's count and how long its window still runs.
func (f *RedisFailures) Failures(ctx context.Context, addr string) (int, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	k := f.key(addr)
	pipe := f.client.Pipeline()
	get := pipe.Get(ctx, k)
	ttl := pipe.PTTL(ctx, k)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return 0, 0, err
	}
	n, err := get.Int()
	if errors.Is(err, redis.Nil) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	return n, max(ttl.Val(), 0), nil
}
