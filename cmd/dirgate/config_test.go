package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestConfigPrecedence(t *testing.T) {
	file := filepath.Join(t.TempDir(), "dirgate.yaml")
	os.WriteFile(file, []byte("listen: 127.0.0.1:7000\nbase-path: /fromfile\nlog-level: warn\nldap-pool-size: 9\n"), 0o600)
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want func(*Config) bool
	}{
		// Defaults apply when nothing is set: the README's "no arguments serves the demo".
		{name: "defaults", want: func(c *Config) bool {
			return c.Listen == "127.0.0.1:8080" && c.BasePath == "/restApi" && c.Upstream == "memory" && c.IsDemo()
		}},
		// The file beats defaults.
		{name: "file", args: []string{"--config", file}, want: func(c *Config) bool {
			return c.Listen == "127.0.0.1:7000" && c.LogLevel == "warn" && c.LDAP.PoolSize == 9
		}},
		// DIRGATE_CONFIG names the file too.
		{name: "file from env", env: map[string]string{"DIRGATE_CONFIG": file}, want: func(c *Config) bool { return c.BasePath == "/fromfile" }},
		// The environment beats the file.
		{name: "env beats file", args: []string{"--config", file}, env: map[string]string{"DIRGATE_LISTEN": "127.0.0.1:7001"},
			want: func(c *Config) bool { return c.Listen == "127.0.0.1:7001" && c.BasePath == "/fromfile" }},
		// A flag beats the environment.
		{name: "flag beats env", args: []string{"--listen", "127.0.0.1:7002"}, env: map[string]string{"DIRGATE_LISTEN": "127.0.0.1:7001"},
			want: func(c *Config) bool { return c.Listen == "127.0.0.1:7002" }},
		// Multi-word settings map to underscored variables.
		{name: "env names", env: map[string]string{"DIRGATE_REQUEST_TIMEOUT": "5s", "DIRGATE_BASE_PATH": ""},
			want: func(c *Config) bool { return c.RequestTimeout == 5*time.Second && c.BasePath == "/restApi" }},
		// Log lines are batched for 20 ms unless told otherwise; 0 writes each at once.
		{name: "log flush", want: func(c *Config) bool { return c.LogFlush == 20*time.Millisecond }},
		{name: "log flush off", env: map[string]string{"DIRGATE_LOG_FLUSH": "0"}, want: func(c *Config) bool { return c.LogFlush == 0 }},
		// An empty base path serves /api/... directly.
		{name: "empty base path", args: []string{"--base-path", ""}, want: func(c *Config) bool { return c.BasePath == "" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := LoadConfig(tt.args, env(tt.env), &bytes.Buffer{})
			if err != nil {
				t.Fatal(err)
			}
			if !tt.want(c) {
				t.Fatalf("unexpected config: %+v", c)
			}
		})
	}
}

func TestConfigReportsEveryProblem(t *testing.T) {
	_, err := LoadConfig([]string{"--upstream", "ldap", "--log-level", "loud", "--listen", "nope", "--ldap-pool-size", "0", "--log-flush", "2s", "--memory-return-garbage", "4096"},
		env(map[string]string{"DIRGATE_BASE_PATH": "noslash"}), &bytes.Buffer{})
	if err == nil {
		t.Fatal("invalid configuration accepted")
	}
	for _, want := range []string{"listen (DIRGATE_LISTEN)", "base-path (DIRGATE_BASE_PATH)", "log-level (DIRGATE_LOG_LEVEL)",
		"tokens-file (DIRGATE_TOKENS_FILE): is required with the ldap upstream", "ldap-url (DIRGATE_LDAP_URL)",
		"ldap-bind-dn", "ldap-password-file", "ldap-base-dn", "ldap-pool-size", "log-flush (DIRGATE_LOG_FLUSH): must be between 0 and 1s",
		"memory-return-garbage (DIRGATE_MEMORY_RETURN_GARBAGE): must be 0 (off) or at least 1 MiB"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
}

func TestConfigRejectsUnknownAndMalformed(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(file, []byte("lisen: x\nrequest-timeout: soon\n"), 0o600)
	_, err := LoadConfig([]string{"--config", file}, env(nil), &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), `unknown setting "lisen"`) || !strings.Contains(err.Error(), "request-timeout") {
		t.Fatalf("err = %v", err)
	}
	_, err = LoadConfig(nil, env(map[string]string{"DIRGATE_LDAP_POOL_SIZE": "many"}), &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "DIRGATE_LDAP_POOL_SIZE") {
		t.Fatalf("err = %v", err)
	}
	_, err = LoadConfig([]string{"extra"}, env(nil), &bytes.Buffer{})
	if err == nil {
		t.Fatal("stray argument accepted")
	}
}

func TestHelpDocumentsEverySetting(t *testing.T) {
	var out bytes.Buffer
	_, err := LoadConfig([]string{"--help"}, env(nil), &out)
	if err != flag.ErrHelp {
		t.Fatalf("err = %v", err)
	}
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	(&Config{}).settings(fs)
	fs.VisitAll(func(f *flag.Flag) {
		if !strings.Contains(out.String(), "--"+f.Name+"  ["+envName(f.Name)+"]") {
			t.Errorf("--help does not document %s", f.Name)
		}
	})
}

// docs/settings.md must list every setting in a row of its own: its variable, then
// its flag.
func TestSettingsDocListsEverySetting(t *testing.T) {
	doc, err := os.ReadFile("../../docs/settings.md")
	if err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	(&Config{}).settings(fs)
	fs.VisitAll(func(f *flag.Flag) {
		if !bytes.Contains(doc, []byte("| `"+envName(f.Name)+"` | `--"+f.Name+"` |")) {
			t.Errorf("docs/settings.md has no row for %s (--%s)", envName(f.Name), f.Name)
		}
	})
}

// TestConfigCandidateSampleRange: the sample is a fraction; NaN, infinities and
// values outside [0, 1] are refused.
func TestConfigCandidateSampleRange(t *testing.T) {
	for _, v := range []string{"NaN", "nan", "Inf", "-Inf", "+Inf", "-0.1", "1.5"} {
		_, err := LoadConfig([]string{"--policy-candidate-sample", v}, env(nil), &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "policy-candidate-sample") {
			t.Errorf("sample %s: err = %v", v, err)
		}
	}
	for _, v := range []string{"0", "0.25", "1"} {
		if _, err := LoadConfig([]string{"--policy-candidate-sample", v}, env(nil), &bytes.Buffer{}); err != nil {
			t.Errorf("sample %s: %v", v, err)
		}
	}
}

// TestConfigRedisNeedsTheSecret: Redis without DIRGATE_SECRET_FILE, or with one too
// short or published (known to anyone), is a configuration error reported with the others, not a warning: whoever
// can write to Redis would otherwise choose the account a token resolves to.
func TestConfigRedisNeedsTheSecret(t *testing.T) {
	dir := t.TempDir()
	short, long := filepath.Join(dir, "short"), filepath.Join(dir, "long")
	os.WriteFile(short, []byte("too short\n"), 0o600)
	os.WriteFile(long, []byte("a secret of thirty-two bytes or more\n"), 0o600)
	// The compose try-out's example, once committed to the repository: public.
	published := filepath.Join(dir, "published")
	os.WriteFile(published, []byte("  compose try-out only: a committed, public secret; never reuse it\n"), 0o600)
	for _, tc := range []struct {
		name string
		env  map[string]string
		want []string // substrings of the error; none means valid
	}{
		{"without a secret file", map[string]string{"DIRGATE_REDIS_ADDR": "127.0.0.1:1", "DIRGATE_LOG_LEVEL": "loud"},
			[]string{"secret-file (DIRGATE_SECRET_FILE): is required with Redis (DIRGATE_REDIS_ADDR)", "log-level (DIRGATE_LOG_LEVEL)"}},
		{"with a short one", map[string]string{"DIRGATE_REDIS_ADDR": "127.0.0.1:1", "DIRGATE_SECRET_FILE": short},
			[]string{"secret-file (DIRGATE_SECRET_FILE)", "at least 32 are required"}},
		{"with a missing one", map[string]string{"DIRGATE_REDIS_ADDR": "127.0.0.1:1", "DIRGATE_SECRET_FILE": filepath.Join(dir, "none")},
			[]string{"secret-file (DIRGATE_SECRET_FILE)", "no such file"}},
		{"with a published one", map[string]string{"DIRGATE_REDIS_ADDR": "127.0.0.1:1", "DIRGATE_SECRET_FILE": published},
			[]string{"secret-file (DIRGATE_SECRET_FILE)", "published with dirgate's source"}},
		{"with a published one in process", map[string]string{"DIRGATE_SECRET_FILE": published},
			[]string{"secret-file (DIRGATE_SECRET_FILE)", "published with dirgate's source"}},
		{"with one", map[string]string{"DIRGATE_REDIS_ADDR": "127.0.0.1:1", "DIRGATE_SECRET_FILE": long}, nil},
		{"in process without one", map[string]string{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadConfig(nil, env(tc.env), &bytes.Buffer{})
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
			if strings.Contains(err.Error(), "cache: Redis needs a secret") {
				t.Errorf("the secret is reported twice (by the cache too):\n%v", err)
			}
		})
	}
}

// TestConfigLDAPDomainControllers: the domain controllers are listed (ldap-url)
// or discovered (ldap-domain, ldap-site), never both, and the per-DC timings are
// read like the other LDAP settings.
func TestConfigLDAPDomainControllers(t *testing.T) {
	base := map[string]string{"DIRGATE_UPSTREAM": "ldap", "DIRGATE_TOKENS_FILE": "tokens.yaml",
		"DIRGATE_LDAP_BIND_DN": "CN=svc,DC=corp", "DIRGATE_LDAP_PASSWORD_FILE": "pw", "DIRGATE_LDAP_BASE_DN": "DC=corp"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	c, err := LoadConfig(nil, env(with("DIRGATE_LDAP_URL", "ldaps://dc1 ldaps://dc2")), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	// With the defaults a dead DC costs at most 2s to connect.
	if c.LDAP.URL != "ldaps://dc1 ldaps://dc2" || c.LDAP.DialTimeout != 2*time.Second || c.LDAP.AttemptTimeout != 1500*time.Millisecond ||
		c.LDAP.HealthInterval != 30*time.Second || c.LDAP.DiscoveryInterval != 5*time.Minute {
		t.Errorf("defaults: %+v", c)
	}
	c, err = LoadConfig([]string{"--ldap-site", "hq"}, env(with("DIRGATE_LDAP_DOMAIN", "corp.example.com", "DIRGATE_LDAP_CA_FILE", "ca.pem",
		"DIRGATE_LDAP_DOMAIN_SUFFIXES", " dcs.example.net, ,Other.example.org. ",
		"DIRGATE_LDAP_ATTEMPT_TIMEOUT", "700ms", "DIRGATE_LDAP_HEALTH_INTERVAL", "10s", "DIRGATE_LDAP_DISCOVERY_INTERVAL", "1m")), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if c.LDAP.Domain != "corp.example.com" || c.LDAP.Site != "hq" || c.LDAP.AttemptTimeout != 700*time.Millisecond ||
		c.LDAP.HealthInterval != 10*time.Second || c.LDAP.DiscoveryInterval != time.Minute ||
		!slices.Equal(c.LDAP.DomainSuffixes, []string{"dcs.example.net", "Other.example.org."}) {
		t.Errorf("from the environment and flags: %+v", c)
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"neither", with(), "ldap-url (DIRGATE_LDAP_URL): is required with the ldap upstream, unless ldap-domain (DIRGATE_LDAP_DOMAIN) is set"},
		{"both", with("DIRGATE_LDAP_URL", "ldaps://dc1", "DIRGATE_LDAP_DOMAIN", "corp.example.com"),
			"ldap-domain (DIRGATE_LDAP_DOMAIN): must not be set with ldap-url (DIRGATE_LDAP_URL)"},
		{"site without domain", with("DIRGATE_LDAP_URL", "ldaps://dc1", "DIRGATE_LDAP_SITE", "hq"),
			"ldap-site (DIRGATE_LDAP_SITE): is only used with ldap-domain"},
		// DNS chooses the host that gets the service account's password: only the
		// operator's CAs may vouch for it.
		{"domain without CA file", with("DIRGATE_LDAP_DOMAIN", "corp.example.com"),
			"ldap-ca-file (DIRGATE_LDAP_CA_FILE): is required with ldap-domain (DIRGATE_LDAP_DOMAIN)"},
		{"suffixes without domain", with("DIRGATE_LDAP_URL", "ldaps://dc1", "DIRGATE_LDAP_DOMAIN_SUFFIXES", "example.net"),
			"ldap-domain-suffixes (DIRGATE_LDAP_DOMAIN_SUFFIXES): is only used with ldap-domain"},
		{"bad suffix", with("DIRGATE_LDAP_DOMAIN", "corp.example.com", "DIRGATE_LDAP_CA_FILE", "ca.pem", "DIRGATE_LDAP_DOMAIN_SUFFIXES", "example.net,ex ample.org"),
			`ldap-domain-suffixes (DIRGATE_LDAP_DOMAIN_SUFFIXES): suffix "ex ample.org"`},
		{"attempt above timeout", with("DIRGATE_LDAP_URL", "ldaps://dc1", "DIRGATE_LDAP_ATTEMPT_TIMEOUT", "3s", "DIRGATE_LDAP_TIMEOUT", "2s"),
			"ldap-attempt-timeout (DIRGATE_LDAP_ATTEMPT_TIMEOUT): must not exceed ldap-timeout (DIRGATE_LDAP_TIMEOUT), 2s"},
		{"zero attempt", with("DIRGATE_LDAP_URL", "ldaps://dc1", "DIRGATE_LDAP_ATTEMPT_TIMEOUT", "0s"), "ldap-attempt-timeout (DIRGATE_LDAP_ATTEMPT_TIMEOUT): must be positive"},
		{"zero health", with("DIRGATE_LDAP_URL", "ldaps://dc1", "DIRGATE_LDAP_HEALTH_INTERVAL", "0s"), "ldap-health-interval (DIRGATE_LDAP_HEALTH_INTERVAL): must be positive"},
		{"zero discovery", with("DIRGATE_LDAP_URL", "ldaps://dc1", "DIRGATE_LDAP_DISCOVERY_INTERVAL", "0s"), "ldap-discovery-interval (DIRGATE_LDAP_DISCOVERY_INTERVAL): must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadConfig(nil, env(tc.env), &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v; want it to mention %q", err, tc.want)
			}
		})
	}
}

// TestConfigOPAConfigFile: the policy comes from the bundles or from a directory,
// never both; a candidate bundle needs the file, and excludes a candidate
// directory.
func TestConfigOPAConfigFile(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // in the error; "" for none
	}{
		{[]string{"--opa-config-file", "opa.yaml"}, ""},
		{[]string{"--opa-config-file", "opa.yaml", "--policy-candidate-bundle", "next"}, ""},
		{[]string{"--opa-config-file", "opa.yaml", "--policy-dir", "p"}, "opa-config-file"},
		{[]string{"--policy-candidate-bundle", "next"}, "policy-candidate-bundle"},
		{[]string{"--opa-config-file", "opa.yaml", "--policy-candidate-bundle", "next", "--policy-candidate-dir", "c"}, "policy-candidate-bundle"},
	} {
		_, err := LoadConfig(c.args, env(nil), &bytes.Buffer{})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: %v", c.args, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v: err = %v, want it to name %s", c.args, err, c.want)
		}
	}
}

// TestConfigMetricsListen: metrics are served on an address of their own, off
// turns them off, and an address that is not host:port, or is the API's own, is
// refused.
func TestConfigMetricsListen(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  map[string]string
		want string // in the error; "" for none
	}{
		{nil, nil, ""},
		{[]string{"--metrics-listen", "off"}, nil, ""},
		{[]string{"--metrics-listen", "0.0.0.0:9464", "--listen", "0.0.0.0:8080", "--memory-ldif", "x.ldif", "--tokens-file", "t.yaml"}, nil, ""},
		{[]string{"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"}, nil, ""},
		{nil, map[string]string{"DIRGATE_METRICS_LISTEN": "9464"}, "DIRGATE_METRICS_LISTEN"},
		{[]string{"--metrics-listen", "127.0.0.1:8080"}, nil, "must differ from listen"},
	} {
		cfg, err := LoadConfig(c.args, env(c.env), &bytes.Buffer{})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v %v: %v", c.args, c.env, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v %v: %v, want an error naming %s", c.args, c.env, err, c.want)
		case c.args == nil && c.env == nil && cfg.MetricsListen != "127.0.0.1:9464":
			t.Errorf("default metrics-listen %q", cfg.MetricsListen)
		}
	}
}

// TestConfigAdapterErrors: the adapters validate their own settings, and their
// errors are worded under the settings' names; 0 is a value of the settings whose
// help says so, and refused where it would silently mean the adapter's default.
func TestConfigAdapterErrors(t *testing.T) {
	long := filepath.Join(t.TempDir(), "long")
	os.WriteFile(long, []byte("a secret of thirty-two bytes or more\n"), 0o600)
	for _, tc := range []struct {
		args []string
		want []string // lines of the error; none means valid
	}{
		{[]string{"--cache-ttl-jitter", "0", "--cache-lease", "0", "--cache-fill-wait", "0", "--redis-wait-replicas", "0", "--cache-max-stale", "0"}, nil},
		// The settings of parts not used are not checked (docs/settings.md).
		{[]string{"--ldap-url", "ftp://x", "--ldap-timeout", "-1s", "--redis-mode", "ring"}, nil},
		{[]string{"--cache-lease", "5ms", "--cache-fill-wait", "-1s", "--cache-ttl-jitter", "1", "--cache-ttl", "-1s"}, []string{
			"cache-lease (DIRGATE_CACHE_LEASE): must be between 20ms and 1m (0: off)",
			"cache-fill-wait (DIRGATE_CACHE_FILL_WAIT): must be between 0 (never wait) and 1m",
			"cache-ttl-jitter (DIRGATE_CACHE_TTL_JITTER): must be between 0 and 0.99",
			"cache-ttl (DIRGATE_CACHE_TTL): must be positive"}},
		// NaN compares false with every bound.
		{[]string{"--cache-ttl-jitter", "NaN"}, []string{"cache-ttl-jitter (DIRGATE_CACHE_TTL_JITTER): must be between 0 and 0.99"}},
		{[]string{"--cache-ttl", "0", "--redis-timeout", "0", "--breaker-failures", "0", "--session-ttl", "0", "--changefeed-interval", "0"}, []string{
			"cache-ttl (DIRGATE_CACHE_TTL): must be positive", "redis-timeout (DIRGATE_REDIS_TIMEOUT): must be positive",
			"breaker-failures (DIRGATE_BREAKER_FAILURES): must be positive", "session-ttl (DIRGATE_SESSION_TTL): must be positive",
			"changefeed-interval (DIRGATE_CHANGEFEED_INTERVAL): must be between 10ms and 1h"}},
		{[]string{"--breaker-half-open-requests", "-1", "--auth-max-failures", "20000", "--token-ttl", "-1s", "--redis-wait-replicas", "17", "--changefeed-interval", "2h"}, []string{
			"breaker-half-open-requests (DIRGATE_BREAKER_HALF_OPEN_REQUESTS): must be positive",
			"auth-max-failures (DIRGATE_AUTH_MAX_FAILURES): must be between 1 and 10000, got 20000",
			"token-ttl (DIRGATE_TOKEN_TTL): must be positive",
			"redis-wait-replicas (DIRGATE_REDIS_WAIT_REPLICAS): must be between 0 and 16",
			"changefeed-interval (DIRGATE_CHANGEFEED_INTERVAL): must be between 10ms and 1h"}},
		{[]string{"--secret-file", long, "--redis-addr", " a:1, redis ,", "--redis-mode", "sentinel", "--redis-tls-cert-file", long, "--redis-key-prefix", "a{b"}, []string{
			`redis-addr (DIRGATE_REDIS_ADDR): address "redis" must be host:port`,
			"redis-master-name (DIRGATE_REDIS_MASTER_NAME): is required in mode sentinel",
			"redis-tls-cert-file (DIRGATE_REDIS_TLS_CERT_FILE): and redis-tls-key-file (DIRGATE_REDIS_TLS_KEY_FILE) must be set together",
			`redis-key-prefix (DIRGATE_REDIS_KEY_PREFIX): "a{b" must be 1 to 64 letters, digits or :_.-`}},
	} {
		cfg, err := LoadConfig(tc.args, env(nil), &bytes.Buffer{})
		if len(tc.want) == 0 {
			if err != nil {
				t.Errorf("%v: %v", tc.args, err)
			} else if tc.args[0] == "--cache-ttl-jitter" && (*cfg.Cache.Lease != 0 || *cfg.Cache.FillWait != 0 || *cfg.Cache.TTLJitter != 0 || cfg.RedisWait.Replicas != 0) {
				t.Errorf("%v: the zeros did not reach the adapters: %+v %+v", tc.args, cfg.Cache, cfg.RedisWait)
			}
			continue
		}
		if err == nil {
			t.Errorf("%v: accepted", tc.args)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), "\n"+w) {
				t.Errorf("%v: error has no line %q:\n%v", tc.args, w, err)
			}
		}
	}
	// The defaults reach the adapters as the settings' defaults.
	cfg, err := LoadConfig(nil, env(nil), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if *cfg.Cache.Lease != time.Second || *cfg.Cache.FillWait != 2*time.Second || *cfg.Cache.TTLJitter != 0.1 || cfg.Redis.Configured() {
		t.Errorf("defaults: %+v", cfg.Cache)
	}
}

// TestAdapterFieldsNameTheirSettings: every setting is bound either to a field of
// Config itself or to a field of an adapter's Config that fieldSettings finds, so
// that the adapter's errors are worded under the setting's name.
func TestAdapterFieldsNameTheirSettings(t *testing.T) {
	var c Config
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	c.settings(fs)
	named := map[string]bool{}
	v := reflect.ValueOf(&c).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		if f.Kind() == reflect.Struct {
			for _, s := range fieldSettings(v.Type().Field(i).Name) {
				named[s] = true
			}
			continue
		}
		fs.VisitAll(func(fl *flag.Flag) {
			if reflect.ValueOf(fl.Value).Pointer() == f.Addr().Pointer() {
				named[fl.Name] = true
			}
		})
	}
	fs.VisitAll(func(fl *flag.Flag) {
		if !named[fl.Name] {
			t.Errorf("--%s is bound to no field fieldSettings or Config names", fl.Name)
		}
	})
}
