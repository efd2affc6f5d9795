package cache

import (
	"log/slog"
	"strings"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/fielderr"
	"github.com/redis/go-redis/v9"
)

// Defaults for the zero values (and nil pointers) of Config.
const (
	DefaultTTL           = 5 * time.Minute
	DefaultTTLJitter     = 0.1
	DefaultTimeout       = 100 * time.Millisecond
	DefaultRetryInterval = time.Second
	DefaultMaxBytes      = 256 << 20
	DefaultKeyPrefix     = "dirgate:"
	DefaultLease         = time.Second
	DefaultFillWait      = 2 * time.Second
)

// MinSecretLength is the least number of bytes of Config.Secret with Redis (the
// session store's bound, for the same secret file).
const MinSecretLength = 32

// Config is the cache's factory: zero fields take the defaults above, Validate
// reports every problem at once, Open returns the live cache. TTLJitter, Lease and
// FillWait are pointers because their 0 is a value (none, off, never wait): nil
// takes the default. cmd/dirgate binds its cache-* settings, and redis-key-prefix,
// redis-timeout and redis-retry-interval, to these fields (docs/settings.md).
type Config struct {
	// Redis is the shared backend (redisconn opens it, with Timeout as its timeouts;
	// the caller closes it after the cache); nil keeps the cache in process.
	Redis redis.UniversalClient
	// KeyPrefix starts every key, so that several deployments can share one Redis:
	// letters, digits and ":_.-", at most 64 bytes.
	KeyPrefix string
	// TTL is how long an entry is served as fresh.
	TTL time.Duration
	// TTLJitter shortens each entry's TTL by a random fraction up to this value (0 to
	// 0.99), so that entries filled together do not expire together. nil means
	// DefaultTTLJitter; 0 means none.
	TTLJitter *float64
	// MaxStale is the oldest a listing may be when it is served because the directory
	// failed (stale-if-error); 0 never serves stale listings.
	MaxStale time.Duration
	// Timeout bounds every Redis operation; a slower Redis is bypassed.
	Timeout time.Duration
	// RetryInterval is how long the cache is bypassed after Redis failed before it is
	// tried again.
	RetryInterval time.Duration
	// MaxBytes bounds the decoded listings kept in process, and the in-process
	// backend when there is no Redis.
	MaxBytes int64
	// Lease is how long an instance sharing Redis may serve its first level without
	// reading version tokens, between renewals of its lease; a removal or addition
	// waits for every instance's acknowledgement, or at most this long for one that
	// stopped answering (lease.go): 20ms to 1m. nil means DefaultLease; 0 reads the
	// tokens on every request instead.
	Lease *time.Duration
	// FillWait is how long a miss waits for another instance sharing Redis that is
	// filling the same listing (its claim in Redis) before reading the directory
	// itself (claim.go): at most 1m. nil means DefaultFillWait; 0 never waits.
	FillWait *time.Duration
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
	// MinSecretLength bytes; unused in process.
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
	if c.TTLJitter == nil {
		c.TTLJitter = new(float64(DefaultTTLJitter))
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
	if c.Lease == nil {
		c.Lease = new(time.Duration(DefaultLease))
	}
	if c.FillWait == nil {
		c.FillWait = new(time.Duration(DefaultFillWait))
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

// Validate reports every problem of the configuration at once, each a
// *fielderr.Error naming its field. A zero value (nil pointer) takes its default.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) { errs = append(errs, fielderr.New(field, format, args...)) }
	for field, neg := range map[string]bool{"TTL": c.TTL < 0, "Timeout": c.Timeout < 0,
		"RetryInterval": c.RetryInterval < 0, "MaxBytes": c.MaxBytes < 0} {
		if neg {
			bad(field, "must be positive")
		}
	}
	if j := c.TTLJitter; j != nil && !(*j >= 0 && *j <= 0.99) { // refuses NaN too
		bad("TTLJitter", "must be between 0 and 0.99")
	}
	if c.MaxStale < 0 {
		bad("MaxStale", "must not be negative (0: never serve stale)")
	}
	if w := c.FillWait; w != nil && (*w < 0 || *w > time.Minute) {
		bad("FillWait", "must be between 0 (never wait) and 1m")
	}
	if l := c.Lease; l != nil && *l != 0 && (*l < 20*time.Millisecond || *l > time.Minute) {
		bad("Lease", "must be between 20ms and 1m (0: off)")
	}
	if c.KeyPrefix != "" && !validPrefix(c.KeyPrefix) {
		// Braces would move keys out of their Cluster slot.
		bad("KeyPrefix", "%q must be 1 to 64 letters, digits or :_.-", c.KeyPrefix)
	}
	if c.Redis != nil && len(c.Secret) < MinSecretLength {
		// Without it, whoever can write to Redis chooses the account a token resolves
		// to (docs/auth.md, "What Redis holds").
		bad("Secret", "must hold at least %d bytes with Redis, to authenticate its entries", MinSecretLength)
	}
	return fielderr.Join(errs...)
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
