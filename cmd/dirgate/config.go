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
	"sort"
	"strings"
	"time"

	"github.com/dirgate/dirgate/auth/session"
	"github.com/dirgate/dirgate/cache"
	"github.com/dirgate/dirgate/opaconfig"
	"github.com/dirgate/dirgate/policy/decisionlog"
	"github.com/dirgate/dirgate/throttle"
	"github.com/dirgate/dirgate/upstream/ldap"
	"gopkg.in/yaml.v3"
)

// Config holds every setting. Each is a flag (--listen), an environment variable
// (DIRGATE_LISTEN) and a key of the optional YAML file (listen:); a flag beats the
// environment, which beats the file, which beats the default.
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

	AuthMaxFailures   int
	AuthFailureWindow time.Duration
	TrustedProxies    string

	SignInMaxConcurrent          int
	SignInMaxConcurrentPerClient int

	Demo bool

	SignIn     bool
	SecretFile string
	SessionTTL time.Duration
	TokenTTL   time.Duration

	LDAPURL               string
	LDAPDomain            string
	LDAPSite              string
	LDAPDomainSuffixes    string
	LDAPBindDN            string
	LDAPPasswordFile      string
	LDAPBaseDN            string
	LDAPCAFile            string
	LDAPPoolSize          int
	LDAPTimeout           time.Duration
	LDAPDialTimeout       time.Duration
	LDAPAttemptTimeout    time.Duration
	LDAPHealthInterval    time.Duration
	LDAPWriteOverlay      time.Duration
	LDAPDiscoveryInterval time.Duration
	LDAPIdleTimeout       time.Duration
	LDAPPageSize          int
	LDAPInChain           bool

	RedisAddr                 string
	RedisMode                 string
	RedisMasterName           string
	RedisUsername             string
	RedisPasswordFile         string
	RedisSentinelPasswordFile string
	RedisDB                   int
	RedisTLS                  bool
	RedisTLSCAFile            string
	RedisTLSCertFile          string
	RedisTLSKeyFile           string
	RedisTLSServerName        string
	RedisKeyPrefix            string
	RedisTimeout              time.Duration
	RedisRetryInterval        time.Duration
	RedisWaitReplicas         int
	RedisWaitTimeout          time.Duration
	CacheTTL                  time.Duration
	CacheTTLJitter            float64
	CacheMaxStale             time.Duration
	CacheLease                time.Duration
	CacheFillWait             time.Duration
	CacheMaxBytes             int64
	MemoryReturnGarbage       int64
	ChangeFeed                bool
	ChangeFeedInterval        time.Duration

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

	BreakerFailures     int
	BreakerOpenTimeout  time.Duration
	BreakerHalfOpenReqs int
}

// settings binds every setting to its Config field, with its help text.
// docs/settings.md is this list (TestSettingsDocListsEverySetting keeps them in step).
func (c *Config) settings(fs *flag.FlagSet) {
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
	fs.IntVar(&c.AuthMaxFailures, "auth-max-failures", 10, "failed authentications from one address (sign-in: one address and account name) within the window before a further failure gets 429; valid tokens are always served")
	fs.DurationVar(&c.AuthFailureWindow, "auth-failure-window", time.Minute, "window over which failed authentications are counted")
	fs.BoolVar(&c.SignIn, "signin", true, "serve the sign-in flow (POST {base}/api/authSessions/create, {base}/api/auth; docs/auth.md)")
	fs.StringVar(&c.SecretFile, "secret-file", "", "file of at least 32 bytes keying the HMACs of everything dirgate keeps in Redis (cache entries, change feed, sessions, tokens); the same on every replica; required with Redis")
	fs.DurationVar(&c.SessionTTL, "session-ttl", 10*time.Minute, "lifetime of a sign-in session (its id is exchanged once for a token)")
	fs.DurationVar(&c.TokenTTL, "token-ttl", 30*time.Minute, "lifetime of a signed-in token (no renewal: sign in again)")
	fs.IntVar(&c.SignInMaxConcurrent, "signin-max-concurrent", throttle.DefaultMaxSignIns, "password checks in progress at once, from all addresses together; the excess gets 429 (each holds a bind against the directory)")
	fs.IntVar(&c.SignInMaxConcurrentPerClient, "signin-max-concurrent-per-client", throttle.DefaultMaxSignInsPerClient, "password checks in progress at once from one client address; the excess gets 429")
	fs.StringVar(&c.TrustedProxies, "trusted-proxies", "", "comma-separated CIDRs of proxies (ingress) whose X-Forwarded-For names the client for the failed-authentication throttle")

	fs.StringVar(&c.LDAPURL, "ldap-url", "", "domain controllers in order of preference, separated by spaces or commas: ldaps://host:636, or ldap://host:389 which is always upgraded with StartTLS (plain LDAP is never used)")
	fs.StringVar(&c.LDAPDomain, "ldap-domain", "", "AD domain whose domain controllers are found in DNS (SRV _ldap._tcp.dc._msdcs.<domain>, StartTLS on the record's port); instead of ldap-url")
	fs.StringVar(&c.LDAPDomainSuffixes, "ldap-domain-suffixes", "", "comma-separated DNS suffixes besides ldap-domain within which a discovered domain controller's name may lie; SRV targets outside both are never used")
	fs.StringVar(&c.LDAPSite, "ldap-site", "", "AD site whose domain controllers are preferred (SRV _ldap._tcp.<site>._sites.dc._msdcs.<domain> first); only with ldap-domain")
	fs.StringVar(&c.LDAPBindDN, "ldap-bind-dn", "", "service account DN to bind as")
	fs.StringVar(&c.LDAPPasswordFile, "ldap-password-file", "", "file holding the service account's password")
	fs.StringVar(&c.LDAPBaseDN, "ldap-base-dn", "", "naming context searched for members, e.g. DC=corp,DC=example,DC=com")
	fs.StringVar(&c.LDAPCAFile, "ldap-ca-file", "", "PEM file of CA certificates that sign the directory's certificate (default: system roots)")
	fs.IntVar(&c.LDAPPoolSize, "ldap-pool-size", 4, "bound LDAP connections kept open")
	fs.DurationVar(&c.LDAPTimeout, "ldap-timeout", 10*time.Second, "deadline for one upstream call, retry included (also bounded by the request)")
	fs.DurationVar(&c.LDAPDialTimeout, "ldap-dial-timeout", ldap.DefaultDialTimeout, "deadline for connecting to one domain controller, the TLS handshake and the bind")
	fs.DurationVar(&c.LDAPAttemptTimeout, "ldap-attempt-timeout", ldap.DefaultAttemptTimeout, "how long one attempt on one domain controller waits for its first answer before a read is also sent to the next one, or a write or sign-in is given up on it; at most ldap-timeout")
	fs.DurationVar(&c.LDAPHealthInterval, "ldap-health-interval", ldap.DefaultHealthInterval, "how often domain controllers marked down, and preferred ones not in use, are checked again")
	fs.DurationVar(&c.LDAPWriteOverlay, "ldap-write-overlay", ldap.DefaultWriteOverlay, "how long a membership change made through dirgate is laid over listings read from another domain controller that has not received it")
	fs.DurationVar(&c.LDAPDiscoveryInterval, "ldap-discovery-interval", ldap.DefaultDiscoveryInterval, "how often the DNS SRV records of ldap-domain are read again")
	fs.DurationVar(&c.LDAPIdleTimeout, "ldap-idle-timeout", 10*time.Minute, "pooled connections unused for longer are closed and re-dialled")
	fs.IntVar(&c.LDAPPageSize, "ldap-page-size", 1000, "page size of paged searches (AD's MaxPageSize is 1000)")
	fs.BoolVar(&c.LDAPInChain, "ldap-in-chain", false, "expand nested groups with the in-chain matching rule instead of breadth-first reads (slow on Samba)")

	fs.StringVar(&c.RedisAddr, "redis-addr", "", "Redis host:port, comma-separated (Sentinels or Cluster seeds); empty keeps the cache in process")
	fs.StringVar(&c.RedisMode, "redis-mode", "", "single, sentinel or cluster; empty: single for one address, cluster for several")
	fs.StringVar(&c.RedisMasterName, "redis-master-name", "", "Sentinel primary name (redis-mode sentinel)")
	fs.StringVar(&c.RedisUsername, "redis-username", "", "Redis ACL user")
	fs.StringVar(&c.RedisPasswordFile, "redis-password-file", "", "file holding the Redis password")
	fs.StringVar(&c.RedisSentinelPasswordFile, "redis-sentinel-password-file", "", "file holding the Sentinels' password")
	fs.IntVar(&c.RedisDB, "redis-db", 0, "Redis database number (cluster: 0)")
	fs.BoolVar(&c.RedisTLS, "redis-tls", false, "connect to Redis with TLS (implied by the TLS files)")
	fs.StringVar(&c.RedisTLSCAFile, "redis-tls-ca-file", "", "PEM CAs for Redis's certificate (default: system roots)")
	fs.StringVar(&c.RedisTLSCertFile, "redis-tls-cert-file", "", "client certificate for Redis")
	fs.StringVar(&c.RedisTLSKeyFile, "redis-tls-key-file", "", "client certificate key for Redis")
	fs.StringVar(&c.RedisTLSServerName, "redis-tls-server-name", "", "name checked in Redis's certificate (default: the address's host)")
	fs.StringVar(&c.RedisKeyPrefix, "redis-key-prefix", "dirgate:", "prefix of every Redis key")
	fs.DurationVar(&c.RedisTimeout, "redis-timeout", 100*time.Millisecond, "bound of each Redis operation; slower is bypassed")
	fs.DurationVar(&c.RedisRetryInterval, "redis-retry-interval", time.Second, "how long Redis is bypassed after a failure")
	fs.IntVar(&c.RedisWaitReplicas, "redis-wait-replicas", 1, "replicas that must confirm a revocation, an ended session or a session's exchange (at most those the primary has; 0: none)")
	fs.DurationVar(&c.RedisWaitTimeout, "redis-wait-timeout", 250*time.Millisecond, "how long a revocation waits for the replicas' confirmation")
	fs.DurationVar(&c.CacheTTL, "cache-ttl", 5*time.Minute, "how long a cached listing is fresh")
	fs.Float64Var(&c.CacheTTLJitter, "cache-ttl-jitter", 0.1, "each entry's TTL is shortened by a random fraction up to this (0 to 0.99)")
	fs.DurationVar(&c.CacheMaxStale, "cache-max-stale", time.Hour, "oldest listing (and caller principal) served when the directory fails (0: never)")
	fs.DurationVar(&c.CacheLease, "cache-lease", time.Second, "with Redis: how long an instance serves its first level without reading version tokens between lease renewals; about how long a removal waits for an instance that stopped answering (0: read tokens on every request)")
	fs.DurationVar(&c.CacheFillWait, "cache-fill-wait", cache.DefaultFillWait, "with Redis: how long a listing miss waits for another instance already filling that listing (its claim in Redis) before reading the directory itself (0: never wait)")
	fs.Int64Var(&c.CacheMaxBytes, "cache-max-bytes", 256<<20, "bytes of decoded listings kept in process (and of the in-process store); rendered bodies get a further quarter")
	fs.Int64Var(&c.MemoryReturnGarbage, "memory-return-garbage", 64<<20, "bytes allocated since the last collection (and at least a quarter of the live heap) after which dirgate collects and returns free memory to the system, at most every 10s (0: off; docs/operations.md)")
	fs.BoolVar(&c.ChangeFeed, "changefeed", true, "follow changes made in the directory itself (LDAP: one reader per deployment polls uSNChanged; memory: the LDIF file is watched); off: such changes are seen after cache-ttl and principal-ttl")
	fs.DurationVar(&c.ChangeFeedInterval, "changefeed-interval", time.Second, "how often the change feed reads the directory")

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

	fs.IntVar(&c.BreakerFailures, "breaker-failures", 5, "consecutive upstream failures that open the circuit breaker")
	fs.DurationVar(&c.BreakerOpenTimeout, "breaker-open-timeout", 30*time.Second, "how long the breaker stays open before a trial request")
	fs.IntVar(&c.BreakerHalfOpenReqs, "breaker-half-open-requests", 1, "trial requests let through while half-open")
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
		"auth-failure-window": c.AuthFailureWindow, "breaker-open-timeout": c.BreakerOpenTimeout, "ldap-timeout": c.LDAPTimeout,
		"ldap-dial-timeout": c.LDAPDialTimeout, "ldap-idle-timeout": c.LDAPIdleTimeout, "ldap-attempt-timeout": c.LDAPAttemptTimeout,
		"ldap-health-interval": c.LDAPHealthInterval, "ldap-discovery-interval": c.LDAPDiscoveryInterval,
		"ldap-write-overlay": c.LDAPWriteOverlay} {
		if d <= 0 {
			bad(name, "must be positive")
		}
	}
	// Zero would silently mean a package default for these; refuse it instead.
	for name, d := range map[string]time.Duration{"principal-ttl": c.PrincipalTTL, "cache-ttl": c.CacheTTL,
		"redis-timeout": c.RedisTimeout, "redis-retry-interval": c.RedisRetryInterval,
		"session-ttl": c.SessionTTL, "token-ttl": c.TokenTTL} {
		if d <= 0 {
			bad(name, "must be positive")
		}
	}
	if c.RedisWaitReplicas < 0 || c.RedisWaitReplicas > 16 {
		bad("redis-wait-replicas", "must be between 0 and 16")
	}
	if c.RedisWaitTimeout < time.Millisecond || c.RedisWaitTimeout > 5*time.Second {
		bad("redis-wait-timeout", "must be between 1ms and 5s")
	}
	if c.CacheMaxStale < 0 {
		bad("cache-max-stale", "must not be negative (0: never serve stale)")
	}
	if c.CacheMaxBytes <= 0 {
		bad("cache-max-bytes", "must be positive")
	}
	if c.MemoryReturnGarbage < 0 || (c.MemoryReturnGarbage > 0 && c.MemoryReturnGarbage < 1<<20) {
		bad("memory-return-garbage", "must be 0 (off) or at least 1 MiB (1048576)")
	}
	if c.CacheFillWait < 0 || c.CacheFillWait > time.Minute {
		bad("cache-fill-wait", "must be between 0 (never wait) and 1m")
	}
	if c.CacheLease != 0 && (c.CacheLease < 20*time.Millisecond || c.CacheLease > time.Minute) {
		bad("cache-lease", "must be between 20ms and 1m (0: off)")
	}
	if c.ChangeFeedInterval < 10*time.Millisecond || c.ChangeFeedInterval > time.Hour {
		bad("changefeed-interval", "must be between 10ms and 1h")
	}
	if c.CacheTTLJitter < 0 || c.CacheTTLJitter > 0.99 {
		bad("cache-ttl-jitter", "must be between 0 and 0.99")
	}
	for name, n := range map[string]int{"auth-max-failures": c.AuthMaxFailures, "breaker-failures": c.BreakerFailures,
		"breaker-half-open-requests": c.BreakerHalfOpenReqs, "ldap-pool-size": c.LDAPPoolSize, "ldap-page-size": c.LDAPPageSize,
		"signin-max-concurrent": c.SignInMaxConcurrent, "signin-max-concurrent-per-client": c.SignInMaxConcurrentPerClient} {
		if n <= 0 {
			bad(name, "must be positive")
		}
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
		if c.TokensFile == "" && c.MemoryLDIF != "" {
			bad("tokens-file", "is required unless the embedded demo directory is served")
		}
	case "ldap":
		if c.TokensFile == "" {
			bad("tokens-file", "is required with the ldap upstream")
		}
		for name, v := range map[string]string{"ldap-bind-dn": c.LDAPBindDN,
			"ldap-password-file": c.LDAPPasswordFile, "ldap-base-dn": c.LDAPBaseDN} {
			if v == "" {
				bad(name, "is required with the ldap upstream")
			}
		}
		// The domain controllers are listed or discovered, never both.
		switch {
		case c.LDAPURL == "" && c.LDAPDomain == "":
			bad("ldap-url", "is required with the ldap upstream, unless ldap-domain (%s) is set", envName("ldap-domain"))
		case c.LDAPURL != "" && c.LDAPDomain != "":
			bad("ldap-domain", "must not be set with ldap-url (%s): list the domain controllers or discover them, not both", envName("ldap-url"))
		}
		if c.LDAPSite != "" && c.LDAPDomain == "" {
			bad("ldap-site", "is only used with ldap-domain (%s)", envName("ldap-domain"))
		}
		// Whoever answers the SRV query names the host that receives the service
		// account's password: only the operator's CAs may vouch for it.
		if c.LDAPDomain != "" && c.LDAPCAFile == "" {
			bad("ldap-ca-file", "is required with ldap-domain (%s): with the system roots, any host a DNS answer names that holds a public certificate for its name would receive the service account's password", envName("ldap-domain"))
		}
		if c.LDAPDomainSuffixes != "" && c.LDAPDomain == "" {
			bad("ldap-domain-suffixes", "is only used with ldap-domain (%s)", envName("ldap-domain"))
		}
		for _, s := range c.ldapDomainSuffixes() {
			if err := ldap.CheckDomainSuffix(s); err != nil {
				bad("ldap-domain-suffixes", "%v", err)
			}
		}
		if c.LDAPAttemptTimeout > c.LDAPTimeout {
			bad("ldap-attempt-timeout", "must not exceed ldap-timeout (%s), %v", envName("ldap-timeout"), c.LDAPTimeout)
		}
	default:
		bad("upstream", "must be memory or ldap")
	}
	if c.servesDemoCredentials() && !c.Demo && !isLoopback(c.Listen) {
		bad("demo", "is not true, and listen %q is not a loopback address: the embedded demo's tokens and passwords are public, so anyone who can reach this address could use them. "+
			"Listen on 127.0.0.1 (or [::1], localhost) to try the demo; serve your own directory and tokens (tokens-file with memory-ldif, or upstream ldap; with only a tokens file, signin false closes the demo passwords); "+
			"or set demo (DIRGATE_DEMO=true) to serve the demo on this address anyway", c.Listen)
	}
	cc := c.cacheConfig(nil)
	cc.Secret = c.validateSecret(bad)
	if cc.Secret == nil {
		cc.Secret = make([]byte, cache.MinSecretLength) // its absence is reported above
	}
	if err := cc.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.redisConfig(nil).Validate(); err != nil {
		errs = append(errs, err)
	}
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid configuration:\n%w", err)
	}
	return nil
}

// validateSecret reads the secret file, if set, and requires it with Redis: without
// it, whoever can write to Redis chooses the account a token resolves to
// (docs/auth.md, "What Redis holds"). It returns the secret, or nil.
func (c *Config) validateSecret(bad func(setting, format string, args ...any)) []byte {
	if c.SecretFile == "" {
		if c.RedisAddr != "" {
			bad("secret-file", "is required with Redis (%s): it keys the HMACs that keep a Redis writer from changing cached entries, including the account a token resolves to", envName("redis-addr"))
		}
		return nil
	}
	secret, err := session.ReadSecret(c.SecretFile)
	if err != nil {
		bad("secret-file", "%v", err)
		return nil
	}
	if isPublishedSecret(secret) {
		bad("secret-file", "%s holds a secret published with dirgate's source, known to anyone: write a random one (e.g. head -c 32 /dev/urandom | base64)", c.SecretFile)
		return nil
	}
	return secret
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

// ldapDomainSuffixes splits the ldap-domain-suffixes setting.
func (c *Config) ldapDomainSuffixes() []string {
	var out []string
	for _, s := range strings.Split(c.LDAPDomainSuffixes, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
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
