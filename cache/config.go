package cache

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/redis/go-redis/v9"
)

// Defaults for the zero values of Config. The env names are those proposed for
// cmd/dirgate.
const (
	DefaultTTL           = 5 * time.Minute        // DIRGATE_CACHE_TTL
	DefaultTTLJitter     = 0.1                    // DIRGATE_CACHE_TTL_JITTER
	DefaultTimeout       = 100 * time.Millisecond // DIRGATE_REDIS_TIMEOUT
	DefaultRetryInterval = time.Second            // DIRGATE_REDIS_RETRY_INTERVAL
	DefaultMaxBytes      = 256 << 20              // DIRGATE_CACHE_MAX_BYTES
	DefaultKeyPrefix     = "dirgate:"             // DIRGATE_REDIS_KEY_PREFIX
	DefaultLease         = time.Second            // DIRGATE_CACHE_LEASE
	DefaultFillWait      = 2 * time.Second        // DIRGATE_CACHE_FILL_WAIT
)

// MinSecretLength is the least number of bytes of Config.Secret with Redis (the
// session store's bound, for the same secret file).
const MinSecretLength = 32

// Config is the cache's factory: zero fields take the defaults above, Validate
// reports every problem at once, Open returns the live cache.
type Config struct {
	// Redis is the shared backend (redisconn opens it, with Timeout as its timeouts;
	// the caller closes it after the cache); nil keeps the cache in process.
	Redis redis.UniversalClient
	// KeyPrefix starts every key, so that several deployments can share one Redis:
	// letters, digits and ":_.-", at most 64 bytes (DIRGATE_REDIS_KEY_PREFIX).
	KeyPrefix string
	// TTL is how long an entry is served as fresh (DIRGATE_CACHE_TTL).
	TTL time.Duration
	// TTLJitter shortens each entry's TTL by a random fraction up to this value, so
	// that entries filled together do not expire together (DIRGATE_CACHE_TTL_JITTER).
	// 0 means DefaultTTLJitter; a negative value means none.
	TTLJitter float64
	// MaxStale is the oldest a listing may be when it is served because the directory
	// failed (stale-if-error); 0 never serves stale listings (DIRGATE_CACHE_MAX_STALE).
	MaxStale time.Duration
	// Timeout bounds every Redis operation; a slower Redis is bypassed
	// (DIRGATE_REDIS_TIMEOUT).
	Timeout time.Duration
	// RetryInterval is how long the cache is bypassed after Redis failed before it is
	// tried again (DIRGATE_REDIS_RETRY_INTERVAL).
	RetryInterval time.Duration
	// MaxBytes bounds the decoded listings kept in process, and the in-process
	// backend when there is no Redis (DIRGATE_CACHE_MAX_BYTES).
	MaxBytes int64
	// Lease is how long an instance sharing Redis may serve its first level without
	// reading version tokens, between renewals of its lease; a removal or addition
	// waits for every instance's acknowledgement, or at most this long for one that
	// stopped answering (lease.go, DIRGATE_CACHE_LEASE). 0 means DefaultLease; a
	// negative value reads the tokens on every request instead.
	Lease time.Duration
	// FillWait is how long a miss waits for another instance sharing Redis that is
	// filling the same listing (its claim in Redis) before reading the directory
	// itself (claim.go, DIRGATE_CACHE_FILL_WAIT). 0 means DefaultFillWait; a negative
	// value never waits.
	FillWait time.Duration
	// ExpandConcurrency bounds parallel member reads while a nested listing is filled
	// (dirgate.MemberService.ExpandConcurrency).
	ExpandConcurrency int
	// Transitive, when set, fills indirect listings with one upstream query (the LDAP
	// upstream's in-chain option) instead of the breadth-first expansion. Such a
	// listing is invalidated by any removal, since the query does not tell which
	// nested groups it went through.
	Transitive dirgate.TransitiveLister
	// Secret keys the HMAC of every value dirgate reads back from Redis (seal.go), so
	// that a Redis writer can neither change nor move an entry, a change-feed position
	// or event: every replica must have the same. Required with Redis, at least
	// MinSecretLength bytes (DIRGATE_SECRET_FILE); unused in process.
	Secret []byte
	// History tells the cache when Redis's history changed (a failover that may have
	// lost writes: history.go); nil without Redis, or when it cannot be known.
	History History
	// Logger receives Redis state changes and corrupt entries. nil means slog.Default().
	Logger *slog.Logger

	now func() time.Time // tests
}

func (c Config) withDefaults() Config {
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.TTLJitter == 0 {
		c.TTLJitter = DefaultTTLJitter
	}
	if c.TTLJitter < 0 {
		c.TTLJitter = 0
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.RetryInterval == 0 {
		c.RetryInterval = DefaultRetryInterval
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.Lease == 0 {
		c.Lease = DefaultLease
	}
	if c.FillWait == 0 {
		c.FillWait = DefaultFillWait
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.KeyPrefix == "" {
		c.KeyPrefix = DefaultKeyPrefix
	}
	return c
}

// Validate reports every problem of the configuration at once, after defaults.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("cache: "+format, args...)) }
	if c.TTL < 0 {
		bad("TTL must be positive")
	}
	if c.TTLJitter >= 1 {
		bad("TTL jitter must be below 1")
	}
	if c.MaxStale < 0 {
		bad("max stale must not be negative")
	}
	if c.Timeout < 0 || c.RetryInterval < 0 {
		bad("Redis timeout and retry interval must be positive")
	}
	if c.MaxBytes < 0 {
		bad("max bytes must be positive")
	}
	if c.FillWait > time.Minute {
		bad("fill wait must be at most 1m (or negative: off)")
	}
	if c.Lease > 0 && c.Lease < 20*time.Millisecond {
		bad("lease must be at least 20ms (or negative: off)")
	}
	if !validPrefix(c.KeyPrefix) {
		bad("redis: key prefix %q must be 1 to 64 letters, digits or :_.-", c.KeyPrefix)
	}
	if c.Redis != nil && len(c.Secret) < MinSecretLength {
		// Without it, whoever can write to Redis chooses the account a token resolves
		// to (docs/auth.md, "What Redis holds").
		bad("Redis needs a secret of at least %d bytes to authenticate its entries (DIRGATE_SECRET_FILE)", MinSecretLength)
	}
	return errors.Join(errs...)
}

func validPrefix(p string) bool {
	if p == "" || len(p) > 64 {
		return false
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte(":_.-", c) >= 0) {
			return false
		}
	}
	return true
}
