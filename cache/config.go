package cache

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
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
)

// MinSecretLength is the least number of bytes of Config.Secret with Redis (the
// session store's bound, for the same secret file).
const MinSecretLength = 32

// Redis modes.
const (
	ModeSingle   = "single"
	ModeSentinel = "sentinel"
	ModeCluster  = "cluster"
)

// Config is the cache's factory: zero fields take the defaults above, Validate
// reports every problem at once, Open returns the live cache.
type Config struct {
	// Redis is the shared backend; without addresses the cache is in-process only.
	Redis RedisConfig
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
	// Logger receives Redis state changes and corrupt entries. nil means slog.Default().
	Logger *slog.Logger

	now func() time.Time // tests
}

// RedisConfig selects and reaches the Redis deployment. Mode decides the client:
// one server, a Sentinel-managed primary, or a Cluster.
type RedisConfig struct {
	// Addrs are host:port addresses: the server, the Sentinels, or Cluster seed nodes
	// (DIRGATE_REDIS_ADDR, comma-separated).
	Addrs []string
	// Mode is single, sentinel or cluster; "" means single for one address and
	// cluster for several (DIRGATE_REDIS_MODE).
	Mode string
	// MasterName is the Sentinel primary's name (DIRGATE_REDIS_MASTER_NAME).
	MasterName string
	// Username for Redis ACLs; empty uses the default user (DIRGATE_REDIS_USERNAME).
	Username string
	// PasswordFile holds the password, trailing newline ignored
	// (DIRGATE_REDIS_PASSWORD_FILE).
	PasswordFile string
	// SentinelPasswordFile holds the Sentinels' own password, if they have one
	// (DIRGATE_REDIS_SENTINEL_PASSWORD_FILE).
	SentinelPasswordFile string
	// DB is the database number; Cluster supports only 0 (DIRGATE_REDIS_DB).
	DB int
	// TLS enables TLS (DIRGATE_REDIS_TLS); the files below imply it.
	TLS bool
	// TLSCAFile is a PEM bundle of CAs for the server certificate; empty uses the
	// system roots (DIRGATE_REDIS_TLS_CA_FILE).
	TLSCAFile string
	// TLSCertFile and TLSKeyFile are a client certificate for servers that require one
	// (DIRGATE_REDIS_TLS_CERT_FILE, DIRGATE_REDIS_TLS_KEY_FILE).
	TLSCertFile, TLSKeyFile string
	// TLSServerName overrides the name checked in the server certificate
	// (DIRGATE_REDIS_TLS_SERVER_NAME).
	TLSServerName string
	// KeyPrefix starts every key, so that several deployments can share one Redis:
	// letters, digits and ":_.-", at most 64 bytes (DIRGATE_REDIS_KEY_PREFIX).
	KeyPrefix string
	// Tracing gives every Redis command a span (its name only). Set it when spans are
	// exported: the hook costs every command its attributes and a span even when
	// the tracer drops them.
	Tracing bool
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
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.Redis.KeyPrefix == "" {
		c.Redis.KeyPrefix = DefaultKeyPrefix
	}
	if c.Redis.Mode == "" && len(c.Redis.Addrs) > 0 {
		c.Redis.Mode = ModeSingle
		if len(c.Redis.Addrs) > 1 {
			c.Redis.Mode = ModeCluster
		}
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
	if c.Lease > 0 && c.Lease < 20*time.Millisecond {
		bad("lease must be at least 20ms (or negative: off)")
	}
	errs = append(errs, c.Redis.validate()...)
	if len(c.Redis.Addrs) > 0 && len(c.Secret) < MinSecretLength {
		// Without it, whoever can write to Redis chooses the account a token resolves
		// to (docs/auth.md, "What Redis holds").
		bad("Redis needs a secret of at least %d bytes to authenticate its entries (DIRGATE_SECRET_FILE)", MinSecretLength)
	}
	return errors.Join(errs...)
}

func (r RedisConfig) validate() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("cache: redis: "+format, args...)) }
	if !validPrefix(r.KeyPrefix) {
		bad("key prefix %q must be 1 to 64 letters, digits or :_.-", r.KeyPrefix)
	}
	if len(r.Addrs) == 0 {
		return errs
	}
	for _, a := range r.Addrs {
		if host, port, err := net.SplitHostPort(a); err != nil || host == "" || port == "" {
			bad("address %q must be host:port", a)
		}
	}
	switch r.Mode {
	case ModeSingle:
		if len(r.Addrs) != 1 {
			bad("mode single takes one address, not %d", len(r.Addrs))
		}
	case ModeSentinel:
		if r.MasterName == "" {
			bad("mode sentinel needs the master name")
		}
	case ModeCluster:
		if r.DB != 0 {
			bad("a cluster has only database 0")
		}
	default:
		bad("mode %q must be single, sentinel or cluster", r.Mode)
	}
	if r.MasterName != "" && r.Mode != ModeSentinel {
		bad("a master name is only used in mode sentinel")
	}
	if r.DB < 0 {
		bad("database must not be negative")
	}
	for _, f := range []string{r.PasswordFile, r.SentinelPasswordFile, r.TLSCAFile, r.TLSCertFile, r.TLSKeyFile} {
		if f == "" {
			continue
		}
		if _, err := os.Stat(f); err != nil {
			bad("%v", err)
		}
	}
	if (r.TLSCertFile == "") != (r.TLSKeyFile == "") {
		bad("a client certificate needs both its certificate and key files")
	}
	return errs
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

// options builds go-redis options. Retries are off and every timeout is short: a
// failed or slow operation is a bypass, and the next request tries again.
func (r RedisConfig) options(timeout time.Duration) (*redis.UniversalOptions, error) {
	o := &redis.UniversalOptions{
		Addrs:                 r.Addrs,
		MasterName:            r.MasterName,
		Username:              r.Username,
		DB:                    r.DB,
		ClientName:            "dirgate",
		IsClusterMode:         r.Mode == ModeCluster,
		MaxRetries:            -1,
		DialerRetries:         1,
		DialTimeout:           timeout,
		ReadTimeout:           timeout,
		WriteTimeout:          timeout,
		PoolTimeout:           timeout,
		ContextTimeoutEnabled: true,
		DisableIdentity:       true,
	}
	var err error
	if o.Password, err = readSecret(r.PasswordFile); err != nil {
		return nil, err
	}
	if o.SentinelPassword, err = readSecret(r.SentinelPasswordFile); err != nil {
		return nil, err
	}
	if r.TLS || r.TLSCAFile != "" || r.TLSCertFile != "" {
		if o.TLSConfig, err = r.tlsConfig(); err != nil {
			return nil, err
		}
	}
	return o, nil
}

func readSecret(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("cache: redis: %w", err)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

func (r RedisConfig) tlsConfig() (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: r.TLSServerName}
	if r.TLSCAFile != "" {
		pem, err := os.ReadFile(r.TLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("cache: redis: CA file: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("cache: redis: CA file %s holds no PEM certificate", r.TLSCAFile)
		}
	}
	if r.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(r.TLSCertFile, r.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("cache: redis: client certificate: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}
