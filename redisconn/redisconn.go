// Package redisconn opens dirgate's connections to Redis: one server, a
// Sentinel-managed primary or a Cluster, with ACL passwords read from files, TLS,
// and the client's spans and metrics. It knows nothing of what is stored: the cache,
// the change feed and the session store each take the client it opens
// (cmd/dirgate wires them; docs/cache.md, "Configuration", lists the settings).
package redisconn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/dirgate/dirgate/internal/fielderr"
	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
)

// Redis modes.
const (
	ModeSingle   = "single"
	ModeSentinel = "sentinel"
	ModeCluster  = "cluster"
)

// Config selects and reaches the Redis deployment. Mode decides the client: one
// server, a Sentinel-managed primary, or a Cluster. cmd/dirgate binds its redis-*
// settings of the connection to these fields (docs/settings.md).
type Config struct {
	// Addrs are host:port addresses: the server, the Sentinels, or Cluster seed nodes.
	Addrs []string
	// Mode is single, sentinel or cluster; "" means single for one address and
	// cluster for several.
	Mode string
	// MasterName is the Sentinel primary's name.
	MasterName string
	// Username for Redis ACLs; empty uses the default user.
	Username string
	// PasswordFile holds the password, trailing newline ignored.
	PasswordFile string
	// SentinelPasswordFile holds the Sentinels' own password, if they have one.
	SentinelPasswordFile string
	// DB is the database number; Cluster supports only 0.
	DB int
	// TLS enables TLS; the files below imply it.
	TLS bool
	// TLSCAFile is a PEM bundle of CAs for the server certificate; empty uses the
	// system roots.
	TLSCAFile string
	// TLSCertFile and TLSKeyFile are a client certificate for servers that require one.
	TLSCertFile, TLSKeyFile string
	// TLSServerName overrides the name checked in the server certificate.
	TLSServerName string
	// Tracing gives every Redis command a span (its name only). Set it when spans are
	// exported: the hook costs every command its attributes and a span even when
	// the tracer drops them.
	Tracing bool
	// Metrics reports the connection pool's figures (the cache's client sets it).
	Metrics bool
	// Logger receives go-redis's own messages (dial failures), at the debug level:
	// the users of the client report the backend's state themselves. The logger is
	// global to go-redis: the first client opened with one sets it.
	Logger *slog.Logger
	// History, when set, reads the replication state of every server a connection
	// is opened to, so that a failover that may have lost writes is noticed before
	// any reply of the new primary is used (history.go). The clients of one
	// deployment share one History.
	History *History
}

// Configured reports whether any address is set: without one dirgate keeps its
// state in process.
func (c Config) Configured() bool { return len(c.Addrs) > 0 }

// WithDefaults resolves an empty Mode from the number of addresses.
func (c Config) WithDefaults() Config {
	if c.Mode == "" && len(c.Addrs) > 0 {
		c.Mode = ModeSingle
		if len(c.Addrs) > 1 {
			c.Mode = ModeCluster
		}
	}
	return c
}

// Validate reports every problem of the configuration at once, after defaults,
// each a *fielderr.Error naming its field. Without addresses there is nothing to
// check.
func (c Config) Validate() error {
	r := c.WithDefaults()
	var errs []error
	bad := func(field, format string, args ...any) { errs = append(errs, fielderr.New(field, format, args...)) }
	if len(r.Addrs) == 0 {
		return nil
	}
	for _, a := range r.Addrs {
		if host, port, err := net.SplitHostPort(a); err != nil || host == "" || port == "" {
			bad("Addrs", "address %q must be host:port", a)
		}
	}
	switch r.Mode {
	case ModeSingle:
		if len(r.Addrs) != 1 {
			bad("Mode", "single takes one address, not %d", len(r.Addrs))
		}
	case ModeSentinel:
		if r.MasterName == "" {
			bad("MasterName", "is required in mode sentinel: the master name")
		}
	case ModeCluster:
		if r.DB != 0 {
			bad("DB", "must be 0: a cluster has only database 0")
		}
	default:
		bad("Mode", "%q must be single, sentinel or cluster", r.Mode)
	}
	if r.MasterName != "" && r.Mode != ModeSentinel {
		bad("MasterName", "is only used in mode sentinel")
	}
	if r.DB < 0 {
		bad("DB", "must not be negative")
	}
	for field, f := range map[string]string{"PasswordFile": r.PasswordFile, "SentinelPasswordFile": r.SentinelPasswordFile,
		"TLSCAFile": r.TLSCAFile, "TLSCertFile": r.TLSCertFile, "TLSKeyFile": r.TLSKeyFile} {
		if f == "" {
			continue
		}
		if _, err := os.Stat(f); err != nil {
			bad(field, "%w", err)
		}
	}
	if (r.TLSCertFile == "") != (r.TLSKeyFile == "") {
		bad("TLSCertFile", "and {TLSKeyFile} must be set together: a client certificate and key")
	}
	return fielderr.Join(errs...)
}

// Open validates the configuration and returns a client with timeout as every one
// of its timeouts. Spans name the command only, never keys or values. The caller
// closes it. An unreachable Redis is not an error: commands fail until it answers.
func (c Config) Open(timeout time.Duration) (redis.UniversalClient, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c = c.WithDefaults()
	opts, err := c.options(timeout)
	if err != nil {
		return nil, err
	}
	if c.Logger != nil {
		setLoggerOnce.Do(func() { redis.SetLogger(debugLogger{c.Logger}) })
	}
	client := redis.NewUniversalClient(opts)
	if cc, ok := client.(*redis.ClusterClient); ok {
		cc.AddHook(reloadOnFailure{cc})
	}
	if c.Tracing {
		if err := redisotel.InstrumentTracing(client, redisotel.WithDBStatement(false), redisotel.WithCallerEnabled(false)); err != nil {
			client.Close()
			return nil, fmt.Errorf("redis tracing: %w", err)
		}
	}
	if c.Metrics {
		if err := redisotel.InstrumentMetrics(client); err != nil {
			client.Close()
			return nil, fmt.Errorf("redis metrics: %w", err)
		}
	}
	return client, nil
}

var setLoggerOnce sync.Once

type debugLogger struct{ log *slog.Logger }

func (l debugLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, "cache: redis client", "message", fmt.Sprintf(format, v...))
}

// options builds go-redis options. Retries are off and every timeout is short: a
// failed or slow operation is a bypass, and the next request tries again.
func (c Config) options(timeout time.Duration) (*redis.UniversalOptions, error) {
	o := &redis.UniversalOptions{
		Addrs:                 c.Addrs,
		MasterName:            c.MasterName,
		Username:              c.Username,
		DB:                    c.DB,
		ClientName:            "dirgate",
		IsClusterMode:         c.Mode == ModeCluster,
		MaxRetries:            -1,
		DialerRetries:         1,
		DialTimeout:           timeout,
		ReadTimeout:           timeout,
		WriteTimeout:          timeout,
		PoolTimeout:           timeout,
		ContextTimeoutEnabled: true,
		DisableIdentity:       true,
	}
	if c.History != nil {
		o.OnConnect = c.History.OnConnect
	}
	var err error
	if o.Password, err = readSecret(c.PasswordFile); err != nil {
		return nil, err
	}
	if o.SentinelPassword, err = readSecret(c.SentinelPasswordFile); err != nil {
		return nil, err
	}
	if c.TLS || c.TLSCAFile != "" || c.TLSCertFile != "" {
		if o.TLSConfig, err = c.tlsConfig(); err != nil {
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

func (c Config) tlsConfig() (*tls.Config, error) {
	t := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.TLSServerName}
	if c.TLSCAFile != "" {
		pem, err := os.ReadFile(c.TLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("cache: redis: CA file: %w", err)
		}
		t.RootCAs = x509.NewCertPool()
		if !t.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("cache: redis: CA file %s holds no PEM certificate", c.TLSCAFile)
		}
	}
	if c.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.TLSCertFile, c.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("cache: redis: client certificate: %w", err)
		}
		t.Certificates = []tls.Certificate{cert}
	}
	return t, nil
}
