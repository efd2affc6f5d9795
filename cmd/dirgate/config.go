package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/dirgate/dirgate/auth/session"
	"github.com/dirgate/dirgate/cache"
	"github.com/dirgate/dirgate/changefeed"
	"github.com/dirgate/dirgate/internal/fielderr"
	"github.com/dirgate/dirgate/opaconfig"
	"github.com/dirgate/dirgate/policy/decisionlog"
	"github.com/dirgate/dirgate/redisconn"
	"github.com/dirgate/dirgate/throttle"
	"github.com/dirgate/dirgate/upstream/breaker"
	"github.com/dirgate/dirgate/upstream/ldap"
	"gopkg.in/yaml.v3"
)

// Config holds every setting. Each is a flag (--listen), an environment variable
// (DIRGATE_LISTEN) and a key of the optional YAML file (listen:); a flag beats the
// environment, which beats the file, which beats the default.
//
// The settings of an adapter are bound to the fields of the adapter's own Config,
// embedded here; wire.go adds what only the running program has (loggers, clients,
// the secret) before it opens the adapter. Each adapter validates its Config
// (Validate), and this command renders its errors under the settings' names.
type Config struct {
	Listen          string
	MetricsListen   string
	TLSCertFile     string
	TLSKeyFile      string
	BasePath        string
	TokensFile      string
	Upstream        string
	MemoryLDIF      string
	LogLevel        string
	LogFormat       string
	LogFlush        time.Duration
	RequestTimeout  time.Duration
	ShutdownTimeout time.Duration
	PrincipalTTL    time.Duration
	TrustedProxies  string

	Demo bool

	SignIn     bool
	SecretFile string

	// Throttle: auth-max-failures, auth-failure-window, signin-max-concurrent*.
	Throttle throttle.Config
	// Session: session-ttl, token-ttl.
	Session session.Config
	// LDAP: ldap-*, validated with the ldap upstream only: the home domain.
	LDAP ldap.Config
	// LDAPDomainsFile names the YAML file of the further domains served beside the
	// home domain (domains.go).
	LDAPDomainsFile string
	// Redis: the connection's redis-* settings.
	Redis redisconn.Config
	// RedisWait: redis-wait-replicas, redis-wait-timeout (sign-in's deletions).
	RedisWait session.Confirmation
	// Cache: cache-*, redis-key-prefix, redis-timeout, redis-retry-interval. The write
	// journal, the change feed and sign-in share its Redis key prefix and timings.
	Cache cache.Config
	// Feed: changefeed-interval; ChangeFeed turns the feed on.
	ChangeFeed bool
	Feed       changefeed.Config
	// Breaker: breaker-*, for each domain controller.
	Breaker breaker.Settings

	MemoryReturnGarbage int64

	PolicyDir             string
	OPAConfigFile         string
	PolicyCandidateDir    string
	PolicyCandidateBundle string
	PolicyCandidateSample float64
	PolicyDrafts          bool
	PolicyNetworkBuiltins bool
	OPAAllowUnsigned      bool
	OPAAllowPlainHTTP     bool
	OPABundleMaxBytes     int64
	DecisionLog           string
	DecisionLogMask       string
	DecisionLogMaxDenied  int
}

// settings binds every setting to its Config field, with its help text.
// docs/settings.md is this list (TestSettingsDocListsEverySetting keeps them in step).
// The adapters' fields with pointer types (nil: the adapter's default) point at
// the setting's value.
func (c *Config) settings(fs *flag.FlagSet) {
	c.Cache.TTLJitter, c.Cache.Lease, c.Cache.FillWait = new(float64), new(time.Duration), new(time.Duration)

	fs.StringVar(&c.Listen, "listen", "127.0.0.1:8080", "address to serve HTTP on (host:port; port 0 picks a free port)")
	fs.StringVar(&c.MetricsListen, "metrics-listen", "127.0.0.1:9464", "address to serve /metrics (and /healthz, /readyz) on, apart from the API (host:port; port 0 picks a free port; off: no metrics)")
	fs.StringVar(&c.TLSCertFile, "tls-cert-file", "", "PEM certificate chain: serve HTTPS (TLS 1.2 or later) on --listen; reloaded when it changes")
	fs.StringVar(&c.TLSKeyFile, "tls-key-file", "", "PEM private key of --tls-cert-file")
	fs.StringVar(&c.BasePath, "base-path", "/restApi", "path prefix of the API, matched case-insensitively; \"\" serves at /api/...")
	fs.StringVar(&c.TokensFile, "tokens-file", "", "YAML file of access tokens (docs/auth.md); empty with the demo directory uses the demo tokens")
	fs.StringVar(&c.Upstream, "upstream", "memory", "directory to serve: memory (an LDIF file, or the embedded demo) or ldap")
	fs.BoolVar(&c.Demo, "demo", false, "serve the embedded demo's public tokens and passwords on a listen address that is not loopback (without it, that is a configuration error)")
	fs.StringVar(&c.MemoryLDIF, "memory-ldif", "", "LDIF export loaded by the memory upstream; empty loads the embedded demo directory")
	fs.StringVar(&c.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&c.LogFormat, "log-format", "json", "log format: json or text")
	fs.DurationVar(&c.LogFlush, "log-flush", 20*time.Millisecond, "how long log and decision lines may wait to be written together (0: each at once)")
	fs.DurationVar(&c.RequestTimeout, "request-timeout", 30*time.Second, "deadline for serving one request, upstream calls included")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "how long in-flight requests may run after SIGINT/SIGTERM")
	fs.DurationVar(&c.PrincipalTTL, "principal-ttl", 30*time.Second, "how long a token's resolved principal (its groups and account state) is reused")
	fs.IntVar(&c.Throttle.MaxFailures, "auth-max-failures", throttle.DefaultMaxFailures, "failed authentications from one address (sign-in: one address and account name) within the window before a further failure gets 429; valid tokens are always served")
	fs.DurationVar(&c.Throttle.Window, "auth-failure-window", throttle.DefaultWindow, "window over which failed authentications are counted")
	fs.BoolVar(&c.SignIn, "signin", true, "serve the sign-in flow (POST {base}/api/authSessions/create, {base}/api/auth; docs/auth.md)")
	fs.StringVar(&c.SecretFile, "secret-file", "", "file of at least 32 bytes keying the HMACs of everything dirgate keeps in Redis (cache entries, change feed, sessions, tokens); the same on every replica; required with Redis")
	fs.DurationVar(&c.Session.SessionTTL, "session-ttl", session.DefaultSessionTTL, "lifetime of a sign-in session (its id is exchanged once for a token)")
	fs.DurationVar(&c.Session.TokenTTL, "token-ttl", session.DefaultTokenTTL, "lifetime of a signed-in token (no renewal: sign in again)")
	fs.IntVar(&c.Throttle.MaxSignIns, "signin-max-concurrent", throttle.DefaultMaxSignIns, "password checks in progress at once, from all addresses together; the excess gets 429 (each holds a bind against the directory)")
	fs.IntVar(&c.Throttle.MaxSignInsPerClient, "signin-max-concurrent-per-client", throttle.DefaultMaxSignInsPerClient, "password checks in progress at once from one client address; the excess gets 429")
	fs.StringVar(&c.TrustedProxies, "trusted-proxies", "", "comma-separated CIDRs of proxies (ingress) whose X-Forwarded-For names the client for the failed-authentication throttle")

	fs.StringVar(&c.LDAP.URL, "ldap-url", "", "domain controllers in order of preference, separated by spaces or commas: ldaps://host:636, or ldap://host:389 which is always upgraded with StartTLS (plain LDAP is never used)")
	fs.StringVar(&c.LDAP.Domain, "ldap-domain", "", "AD domain whose domain controllers are found in DNS (SRV _ldap._tcp.dc._msdcs.<domain>, StartTLS on the record's port); instead of ldap-url")
	fs.Var((*commaList)(&c.LDAP.DomainSuffixes), "ldap-domain-suffixes", "comma-separated DNS suffixes besides ldap-domain within which a discovered domain controller's name may lie; SRV targets outside both are never used")
	fs.StringVar(&c.LDAP.Site, "ldap-site", "", "AD site whose domain controllers are preferred (SRV _ldap._tcp.<site>._sites.dc._msdcs.<domain> first); only with ldap-domain")
	fs.StringVar(&c.LDAP.BindDN, "ldap-bind-dn", "", "service account DN to bind as")
	fs.StringVar(&c.LDAP.PasswordFile, "ldap-password-file", "", "file holding the service account's password")
	fs.StringVar(&c.LDAP.BaseDN, "ldap-base-dn", "", "naming context searched for members, e.g. DC=corp,DC=example,DC=com")
	fs.StringVar(&c.LDAP.CAFile, "ldap-ca-file", "", "PEM file of CA certificates that sign the directory's certificate (default: system roots)")
	fs.IntVar(&c.LDAP.PoolSize, "ldap-pool-size", ldap.DefaultPoolSize, "bound LDAP connections kept open")
	fs.DurationVar(&c.LDAP.RequestTimeout, "ldap-timeout", ldap.DefaultRequestTimeout, "deadline for one upstream call, retry included (also bounded by the request)")
	fs.DurationVar(&c.LDAP.DialTimeout, "ldap-dial-timeout", ldap.DefaultDialTimeout, "deadline for connecting to one domain controller, the TLS handshake and the bind")
	fs.DurationVar(&c.LDAP.AttemptTimeout, "ldap-attempt-timeout", ldap.DefaultAttemptTimeout, "how long one attempt on one domain controller waits for its first answer before a read is also sent to the next one, or a write or sign-in is given up on it; at most ldap-timeout")
	fs.DurationVar(&c.LDAP.HealthInterval, "ldap-health-interval", ldap.DefaultHealthInterval, "how often domain controllers marked down, and preferred ones not in use, are checked again")
	fs.DurationVar(&c.LDAP.WriteOverlay, "ldap-write-overlay", ldap.DefaultWriteOverlay, "how long a membership change made through dirgate is laid over listings read from another domain controller that has not received it")
	fs.DurationVar(&c.LDAP.DiscoveryInterval, "ldap-discovery-interval", ldap.DefaultDiscoveryInterval, "how often the DNS SRV records of ldap-domain are read again")
	fs.DurationVar(&c.LDAP.IdleTimeout, "ldap-idle-timeout", ldap.DefaultIdleTimeout, "pooled connections unused for longer are closed and re-dialled")
	fs.IntVar(&c.LDAP.PageSize, "ldap-page-size", ldap.DefaultPageSize, "page size of paged searches (AD's MaxPageSize is 1000)")
	fs.StringVar(&c.LDAPDomainsFile, "ldap-domains-file", "", "YAML file of further domains served beside the one of the ldap-* settings, each with its own domain controllers, base DN and service account (docs/settings.md); empty: that domain alone")
	fs.BoolVar(&c.LDAP.UseInChain, "ldap-in-chain", false, "expand nested groups with the in-chain matching rule instead of breadth-first reads (slow on Samba)")

	fs.Var((*commaList)(&c.Redis.Addrs), "redis-addr", "Redis host:port, comma-separated (Sentinels or Cluster seeds); empty keeps the cache in process")
	fs.StringVar(&c.Redis.Mode, "redis-mode", "", "single, sentinel or cluster; empty: single for one address, cluster for several")
	fs.StringVar(&c.Redis.MasterName, "redis-master-name", "", "Sentinel primary name (redis-mode sentinel)")
	fs.StringVar(&c.Redis.Username, "redis-username", "", "Redis ACL user")
	fs.StringVar(&c.Redis.PasswordFile, "redis-password-file", "", "file holding the Redis password")
	fs.StringVar(&c.Redis.SentinelPasswordFile, "redis-sentinel-password-file", "", "file holding the Sentinels' password")
	fs.IntVar(&c.Redis.DB, "redis-db", 0, "Redis database number (cluster: 0)")
	fs.BoolVar(&c.Redis.TLS, "redis-tls", false, "connect to Redis with TLS (implied by the TLS files)")
	fs.StringVar(&c.Redis.TLSCAFile, "redis-tls-ca-file", "", "PEM CAs for Redis's certificate (default: system roots)")
	fs.StringVar(&c.Redis.TLSCertFile, "redis-tls-cert-file", "", "client certificate for Redis")
	fs.StringVar(&c.Redis.TLSKeyFile, "redis-tls-key-file", "", "client certificate key for Redis")
	fs.StringVar(&c.Redis.TLSServerName, "redis-tls-server-name", "", "name checked in Redis's certificate (default: the address's host)")
	fs.StringVar(&c.Cache.KeyPrefix, "redis-key-prefix", cache.DefaultKeyPrefix, "prefix of every Redis key")
	fs.DurationVar(&c.Cache.Timeout, "redis-timeout", cache.DefaultTimeout, "bound of each Redis operation; slower is bypassed")
	fs.DurationVar(&c.Cache.RetryInterval, "redis-retry-interval", cache.DefaultRetryInterval, "how long Redis is bypassed after a failure")
	fs.IntVar(&c.RedisWait.Replicas, "redis-wait-replicas", 1, "replicas that must confirm a revocation, an ended session or a session's exchange (at most those the primary has; 0: none)")
	fs.DurationVar(&c.RedisWait.Timeout, "redis-wait-timeout", 250*time.Millisecond, "how long a revocation waits for the replicas' confirmation")
	fs.DurationVar(&c.Cache.TTL, "cache-ttl", cache.DefaultTTL, "how long a cached listing is fresh")
	fs.Float64Var(c.Cache.TTLJitter, "cache-ttl-jitter", cache.DefaultTTLJitter, "each entry's TTL is shortened by a random fraction up to this (0 to 0.99)")
	fs.DurationVar(&c.Cache.MaxStale, "cache-max-stale", time.Hour, "oldest listing (and caller principal) served when the directory fails (0: never)")
	fs.DurationVar(c.Cache.Lease, "cache-lease", cache.DefaultLease, "with Redis: how long an instance serves its first level without reading version tokens between lease renewals; about how long a removal waits for an instance that stopped answering (0: read tokens on every request)")
	fs.DurationVar(c.Cache.FillWait, "cache-fill-wait", cache.DefaultFillWait, "with Redis: how long a listing miss waits for another instance already filling that listing (its claim in Redis) before reading the directory itself (0: never wait)")
	fs.Int64Var(&c.Cache.MaxBytes, "cache-max-bytes", cache.DefaultMaxBytes, "bytes of decoded listings kept in process (and of the in-process store); rendered bodies get a further quarter")
	fs.Int64Var(&c.MemoryReturnGarbage, "memory-return-garbage", 64<<20, "bytes allocated since the last collection (and at least a quarter of the live heap) after which dirgate collects and returns free memory to the system, at most every 10s (0: off; docs/operations.md)")
	fs.BoolVar(&c.ChangeFeed, "changefeed", true, "follow changes made in the directory itself (LDAP: one reader per deployment polls uSNChanged; memory: the LDIF file is watched); off: such changes are seen after cache-ttl and principal-ttl")
	fs.DurationVar(&c.Feed.Interval, "changefeed-interval", changefeed.DefaultInterval, "how often the change feed reads the directory")

	fs.StringVar(&c.PolicyDir, "policy-dir", "", "directory of Rego policies and data in OPA's bundle layout, watched and reloaded (docs/policy.md); empty uses the bundled policy")
	fs.StringVar(&c.OPAConfigFile, "opa-config-file", "", "an OPA configuration file (opa run --config-file's): the policy comes from its bundles, decisions go to its decision_logs service (docs/policy.md); exclusive with policy-dir")
	fs.BoolVar(&c.OPAAllowUnsigned, "opa-allow-unsigned-bundles", false, "accept bundles of opa-config-file without a signing block (or with allow_unsigned_delta_bundles); refused at start otherwise, because whoever serves or alters an unsigned bundle decides the policy")
	fs.BoolVar(&c.OPAAllowPlainHTTP, "opa-allow-plain-http", false, "accept services of opa-config-file at http:// URLs or with allow_insecure_tls; refused at start otherwise, because whoever answers them serves the bundles and reads the credentials sent")
	fs.Int64Var(&c.OPABundleMaxBytes, "opa-bundle-max-bytes", opaconfig.DefaultMaxBundleBytes, "bound of each bundle download, compressed and decompressed, and of each file of a bundle without size_limit_bytes; a larger bundle is refused while it is read")
	fs.StringVar(&c.PolicyCandidateBundle, "policy-candidate-bundle", "", "the name of a bundle of opa-config-file that is a candidate policy, evaluated in shadow like policy-candidate-dir")
	fs.StringVar(&c.PolicyCandidateDir, "policy-candidate-dir", "", "a candidate policy directory evaluated in shadow beside the active one, watched and reloaded; differences are counted and logged, answers never change (docs/policy.md)")
	fs.Float64Var(&c.PolicyCandidateSample, "policy-candidate-sample", 1, "fraction of requests also decided by the candidate policy (0 to 1)")
	fs.BoolVar(&c.PolicyDrafts, "policy-drafts", false, "let callers allowed to explain try a draft policy (POST to the decisions API); off by default because OPA cannot bound a draft's memory (docs/policy.md)")
	fs.BoolVar(&c.PolicyNetworkBuiltins, "policy-network-builtins", false, "let policies (directory, bundles, candidate) call http.send, net.lookup_ip_addr and opa.runtime and fetch remote JSON schemas; off, a policy calling them does not load")
	fs.StringVar(&c.DecisionLog, "decision-log", "stdout", "where authorization decisions are logged, one JSON line each: stdout, stderr, a file path (appended to), or off")
	fs.StringVar(&c.DecisionLogMask, "decision-log-mask", "", "comma-separated JSON pointers erased from every decision log line, e.g. /input/subject/dn")
	fs.IntVar(&c.DecisionLogMaxDenied, "decision-log-max-denied", decisionlog.DefaultMaxDenied, "denied objects named by GUID per listing line of the decision log (0: none)")

	fs.IntVar(&c.Breaker.FailureThreshold, "breaker-failures", breaker.DefaultFailureThreshold, "consecutive upstream failures that open the circuit breaker")
	fs.DurationVar(&c.Breaker.OpenTimeout, "breaker-open-timeout", breaker.DefaultOpenTimeout, "how long the breaker stays open before a trial request")
	fs.IntVar(&c.Breaker.HalfOpenMaxRequests, "breaker-half-open-requests", breaker.DefaultHalfOpenMaxRequests, "trial requests let through while half-open")
}

// envName maps a setting to its environment variable: ldap-url -> DIRGATE_LDAP_URL.
func envName(setting string) string {
	return "DIRGATE_" + strings.ToUpper(strings.ReplaceAll(setting, "-", "_"))
}

// LoadConfig reads flags (args), the environment (getenv) and the YAML file named by
// --config or DIRGATE_CONFIG, in that order of precedence, then validates the result.
func LoadConfig(args []string, getenv func(string) string, stderr io.Writer) (*Config, error) {
	c := &Config{}
	fs := flag.NewFlagSet("dirgate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.settings(fs)
	var configFile string
	fs.StringVar(&configFile, "config", "", "optional YAML file of settings (keys are the flag names)")
	fs.Usage = func() { usage(fs, stderr) }
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (see dirgate --help)", fs.Arg(0))
	}
	explicit := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	if configFile == "" {
		configFile = getenv(envName("config"))
	}

	var errs []error
	fromEnv := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) {
		if explicit[f.Name] || f.Name == "config" {
			return
		}
		if v, ok := lookupEnv(getenv, envName(f.Name)); ok {
			fromEnv[f.Name] = true
			if err := f.Value.Set(v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", envName(f.Name), err))
			}
		}
	})
	if configFile != "" {
		if err := applyFile(fs, configFile, func(name string) bool { return explicit[name] || fromEnv[name] }); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// lookupEnv treats an empty variable as unset, as shells and Kubernetes often export
// empty values for optional settings.
func lookupEnv(getenv func(string) string, name string) (string, bool) {
	v := getenv(name)
	return v, v != ""
}

func applyFile(fs *flag.FlagSet, path string, overridden func(string) bool) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs []error
	for _, k := range keys {
		f := fs.Lookup(k)
		if f == nil || k == "config" {
			errs = append(errs, fmt.Errorf("config file %s: unknown setting %q", path, k))
			continue
		}
		if overridden(k) {
			continue
		}
		if err := f.Value.Set(fmt.Sprint(m[k])); err != nil {
			errs = append(errs, fmt.Errorf("config file %s: %s: %w", path, k, err))
		}
	}
	return errors.Join(errs...)
}

// Validate reports every problem at once.
func (c *Config) Validate() error {
	var errs []error
	bad := func(setting, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s (%s): %s", setting, envName(setting), fmt.Sprintf(format, args...)))
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		bad("listen", "must be host:port: %v", err)
	}
	if c.MetricsListen != "off" {
		if _, port, err := net.SplitHostPort(c.MetricsListen); err != nil {
			bad("metrics-listen", "must be host:port, or off: %v", err)
		} else if c.MetricsListen == c.Listen && port != "0" {
			bad("metrics-listen", "must differ from listen (%s): metrics are served apart from the API", c.Listen)
		}
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		bad("tls-cert-file", "and tls-key-file must be set together")
	} else if c.TLSCertFile != "" {
		if _, err := tls.LoadX509KeyPair(c.TLSCertFile, c.TLSKeyFile); err != nil {
			bad("tls-cert-file", "%v", err)
		}
	}
	if c.BasePath != "" && (!strings.HasPrefix(c.BasePath, "/") || strings.HasSuffix(c.BasePath, "/")) {
		bad("base-path", "must start with / and not end with /, or be empty")
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		bad("log-level", "must be debug, info, warn or error")
	}
	if c.LogFormat != "json" && c.LogFormat != "text" {
		bad("log-format", "must be json or text")
	}
	if c.LogFlush < 0 || c.LogFlush > time.Second {
		bad("log-flush", "must be between 0 and 1s")
	}
	for name, d := range map[string]time.Duration{"request-timeout": c.RequestTimeout, "shutdown-timeout": c.ShutdownTimeout,
		"principal-ttl": c.PrincipalTTL} {
		if d <= 0 {
			bad(name, "must be positive")
		}
	}
	// An adapter reads a zero field as its default; these settings have no such
	// value, so their 0 is refused rather than silently meaning the default. Their
	// other values are the adapters' to check.
	for name, zero := range map[string]bool{"auth-max-failures": c.Throttle.MaxFailures == 0,
		"auth-failure-window": c.Throttle.Window == 0, "signin-max-concurrent": c.Throttle.MaxSignIns == 0,
		"signin-max-concurrent-per-client": c.Throttle.MaxSignInsPerClient == 0,
		"session-ttl":                      c.Session.SessionTTL == 0, "token-ttl": c.Session.TokenTTL == 0,
		"ldap-timeout": c.LDAP.RequestTimeout == 0, "ldap-dial-timeout": c.LDAP.DialTimeout == 0,
		"ldap-idle-timeout": c.LDAP.IdleTimeout == 0, "ldap-attempt-timeout": c.LDAP.AttemptTimeout == 0,
		"ldap-health-interval": c.LDAP.HealthInterval == 0, "ldap-discovery-interval": c.LDAP.DiscoveryInterval == 0,
		"ldap-write-overlay": c.LDAP.WriteOverlay == 0, "ldap-pool-size": c.LDAP.PoolSize == 0,
		"ldap-page-size": c.LDAP.PageSize == 0, "cache-ttl": c.Cache.TTL == 0, "cache-max-bytes": c.Cache.MaxBytes == 0,
		"redis-timeout": c.Cache.Timeout == 0, "redis-retry-interval": c.Cache.RetryInterval == 0,
		"breaker-failures": c.Breaker.FailureThreshold == 0, "breaker-open-timeout": c.Breaker.OpenTimeout == 0,
		"breaker-half-open-requests": c.Breaker.HalfOpenMaxRequests == 0} {
		if zero {
			bad(name, "must be positive")
		}
	}
	if c.Feed.Interval == 0 {
		bad("changefeed-interval", "must be between 10ms and 1h")
	}
	if c.MemoryReturnGarbage < 0 || (c.MemoryReturnGarbage > 0 && c.MemoryReturnGarbage < 1<<20) {
		bad("memory-return-garbage", "must be 0 (off) or at least 1 MiB (1048576)")
	}
	for _, m := range c.decisionLogMasks() {
		if _, err := decisionlog.ParseMask(m); err != nil {
			bad("decision-log-mask", "%v", err)
		}
	}
	if _, err := c.trustedProxies(); err != nil {
		bad("trusted-proxies", "%v", err)
	}
	if c.OPAConfigFile != "" && c.PolicyDir != "" {
		bad("opa-config-file", "and policy-dir are exclusive: the policy comes from one or the other")
	}
	if c.OPABundleMaxBytes <= 0 {
		bad("opa-bundle-max-bytes", "must be positive")
	}
	if c.PolicyCandidateBundle != "" && c.OPAConfigFile == "" {
		bad("policy-candidate-bundle", "names a bundle of opa-config-file, which is not set")
	}
	if c.PolicyCandidateBundle != "" && c.PolicyCandidateDir != "" {
		bad("policy-candidate-bundle", "and policy-candidate-dir are exclusive")
	}
	if !(c.PolicyCandidateSample >= 0 && c.PolicyCandidateSample <= 1) { // refuses NaN too
		bad("policy-candidate-sample", "must be between 0 and 1")
	}
	if c.DecisionLogMaxDenied < 0 {
		bad("decision-log-max-denied", "must not be negative")
	}
	switch c.Upstream {
	case "memory":
		if c.LDAPDomainsFile != "" {
			bad("ldap-domains-file", "is only used with the ldap upstream")
		}
		if c.TokensFile == "" && c.MemoryLDIF != "" {
			bad("tokens-file", "is required unless the embedded demo directory is served")
		}
	case "ldap":
		if c.TokensFile == "" {
			bad("tokens-file", "is required with the ldap upstream")
		}
		errs = append(errs, adapterErrors(c.LDAP.Validate(), "LDAP")...)
		if c.LDAPDomainsFile != "" {
			_, err := loadDomains(c.LDAPDomainsFile, c.LDAP)
			errs = append(errs, fielderr.List(err)...)
		}
	default:
		bad("upstream", "must be memory or ldap")
	}
	if c.servesDemoCredentials() && !c.Demo && !isLoopback(c.Listen) {
		bad("demo", "is not true, and listen %q is not a loopback address: the embedded demo's tokens and passwords are public, so anyone who can reach this address could use them. "+
			"Listen on 127.0.0.1 (or [::1], localhost) to try the demo; serve your own directory and tokens (tokens-file with memory-ldif, or upstream ldap; with only a tokens file, signin false closes the demo passwords); "+
			"or set demo (DIRGATE_DEMO=true) to serve the demo on this address anyway", c.Listen)
	}
	c.validateSecret(bad)
	errs = append(errs, adapterErrors(c.Throttle.Validate(), "Throttle")...)
	errs = append(errs, adapterErrors(c.Session.Validate(), "Session")...)
	errs = append(errs, adapterErrors(c.Redis.Validate(), "Redis")...)
	errs = append(errs, adapterErrors(c.RedisWait.Validate(), "RedisWait")...)
	errs = append(errs, adapterErrors(c.Cache.Validate(), "Cache")...)
	errs = append(errs, adapterErrors(c.Feed.Validate(), "Feed")...)
	errs = append(errs, adapterErrors(c.Breaker.Validate(), "Breaker")...)
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid configuration:\n%w", err)
	}
	return nil
}

// validateSecret reads the secret file, if set, and requires it with Redis: without
// it, whoever can write to Redis chooses the account a token resolves to
// (docs/auth.md, "What Redis holds"). The cache, the write journal, the change feed
// and sign-in share it (wire.go gives it to each).
func (c *Config) validateSecret(bad func(setting, format string, args ...any)) {
	if c.SecretFile == "" {
		if c.Redis.Configured() {
			bad("secret-file", "is required with Redis (%s): it keys the HMACs that keep a Redis writer from changing cached entries, including the account a token resolves to", envName("redis-addr"))
		}
		return
	}
	secret, err := session.ReadSecret(c.SecretFile)
	if err != nil {
		bad("secret-file", "%v", err)
		return
	}
	if isPublishedSecret(secret) {
		bad("secret-file", "%s holds a secret published with dirgate's source, known to anyone: write a random one (e.g. head -c 32 /dev/urandom | base64)", c.SecretFile)
	}
}

// trustedProxies parses the trusted-proxies setting.
func (c *Config) trustedProxies() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range strings.Split(c.TrustedProxies, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR such as 10.0.0.0/8", s)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// commaList is a setting of comma-separated items (ldap-domain-suffixes,
// redis-addr) bound to an adapter's []string: spaces around items and empty items
// are dropped, and a later value replaces an earlier one, as with every setting.
type commaList []string

func (l *commaList) String() string { return strings.Join(*l, ",") }

func (l *commaList) Set(v string) error {
	*l = nil
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// adapterErrors returns the problems an adapter's Validate reported, those with a
// field (fielderr) worded under the names of the settings bound to the fields of
// the adapter's Config, embedded in Config as the field adapter.
func adapterErrors(err error, adapter string) []error {
	var out []error
	names := fieldSettings(adapter)
	name := func(field string) string {
		if s, ok := names[field]; ok {
			return fmt.Sprintf("%s (%s)", s, envName(s))
		}
		return adapter + "." + field
	}
	for _, e := range fielderr.List(err) {
		if fe, ok := e.(*fielderr.Error); ok {
			e = rendered{fe.Render(name), fe}
		}
		out = append(out, e)
	}
	return out
}

// rendered is an adapter's error worded under the settings' names.
type rendered struct {
	text string
	err  *fielderr.Error
}

func (r rendered) Error() string { return r.text }
func (r rendered) Unwrap() error { return r.err }

// fieldSettings maps the fields of the adapter's Config embedded in Config as the
// field adapter to the settings bound to them (settings), found by the address
// each flag writes to.
func fieldSettings(adapter string) map[string]string {
	var z Config
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	z.settings(fs)
	bound := map[uintptr]string{}
	fs.VisitAll(func(f *flag.Flag) { bound[reflect.ValueOf(f.Value).Pointer()] = f.Name })
	v := reflect.ValueOf(&z).Elem().FieldByName(adapter)
	names := map[string]string{}
	for i := range v.NumField() {
		addr := v.Field(i).Addr().Pointer()
		if v.Field(i).Kind() == reflect.Pointer {
			addr = v.Field(i).Pointer() // settings points it at the setting's value
		}
		if name, ok := bound[addr]; ok {
			names[v.Type().Field(i).Name] = name
		}
	}
	return names
}

// decisionLogMasks splits the mask setting into its JSON pointers.
func (c *Config) decisionLogMasks() []string {
	var out []string
	for _, m := range strings.Split(c.DecisionLogMask, ",") {
		if m = strings.TrimSpace(m); m != "" {
			out = append(out, m)
		}
	}
	return out
}

// servesDemoCredentials reports whether well-known credentials would be accepted:
// the embedded demo's tokens (no tokens file) or its passwords (sign-in on the
// embedded demo directory, whatever the tokens file).
func (c *Config) servesDemoCredentials() bool {
	return c.Upstream == "memory" && c.MemoryLDIF == "" && (c.TokensFile == "" || c.SignIn)
}

// IsDemo reports whether the embedded demo directory and its tokens are served.
func (c *Config) IsDemo() bool {
	return c.Upstream == "memory" && c.MemoryLDIF == "" && c.TokensFile == ""
}

func (c *Config) slogLevel() slog.Level {
	var l slog.Level
	_ = l.UnmarshalText([]byte(c.LogLevel))
	return l
}

func usage(fs *flag.FlagSet, w io.Writer) {
	fmt.Fprintf(w, `dirgate: a gateway that serves the group-membership API in front of Active Directory.

Usage:
  dirgate [settings]     serve (the default)
  dirgate version        print the version
  dirgate policy test DIR             run the Rego tests of a policy directory
  dirgate policy eval --input FILE DIR  decide one input with the gateway's engine (docs/policy.md)
  dirgate policy diff --subject ID --group ID OLD_DIR NEW_DIR
                         compare two policies on a caller and a group of the configured directory

Every setting is also an environment variable (DIRGATE_<NAME>) and a key of the
YAML file given by --config. Precedence: flag, environment, file, default.

Settings:
`)
	fs.VisitAll(func(f *flag.Flag) {
		def := ""
		if f.DefValue != "" {
			def = fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintf(w, "  --%s  [%s]%s\n      %s\n", f.Name, envName(f.Name), def, f.Usage)
	})
}
