package ldap

import (
	"context"
	"crypto/tls"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func validConfig() Config {
	return Config{
		URL: "ldaps://127.0.0.1", BindDN: "CN=svc,CN=Users,DC=corp,DC=example,DC=com",
		PasswordFile: "/run/secrets/ldap", BaseDN: "DC=corp,DC=example,DC=com",
	}
}

func TestValidate(t *testing.T) {
	if err := validConfig().Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	// Every problem is reported at once, each naming its field.
	err := Config{URL: "http://x", BindDN: "not a dn", PoolSize: -1, PageSize: maxPageSize + 1, RequestTimeout: -time.Second}.Validate()
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, want := range []string{"URL: item 1 of 1", "BindDN: is not a DN", "BaseDN: is required",
		"PasswordFile: is required", "PoolSize: must be positive", "PageSize: must be between 1 and 100000", "RequestTimeout: must be positive"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %s:\n%v", want, err)
		}
	}
}

// TestValidateDCs: the DCs are listed (URL) or discovered (Domain, Site), never
// both, and the per-DC timings are bounded.
func TestValidateDCs(t *testing.T) {
	with := func(f func(*Config)) Config { c := validConfig(); f(&c); return c }
	valid := map[string]Config{
		"list":        with(func(c *Config) { c.URL = "ldaps://dc1.corp.example.com, ldap://dc2.corp.example.com" }),
		"domain":      with(func(c *Config) { c.URL, c.Domain, c.CAFile = "", "corp.example.com", "ca.pem" }),
		"domain fqdn": with(func(c *Config) { c.URL, c.Domain, c.CAFile = "", "corp.example.com.", "ca.pem" }),
		"domain and site": with(func(c *Config) {
			c.URL, c.Domain, c.Site, c.CAFile = "", "corp.example.com", "Default-First-Site-Name", "ca.pem"
		}),
		"domain suffixes": with(func(c *Config) {
			c.URL, c.Domain, c.CAFile, c.DomainSuffixes = "", "corp.example.com", "ca.pem", []string{"dcs.example.net", "Other.Example.ORG."}
		}),
		"attempt = request": with(func(c *Config) { c.AttemptTimeout, c.RequestTimeout = time.Second, time.Second }),
		// The default attempt timeout shrinks to a shorter request timeout.
		"short request": with(func(c *Config) { c.RequestTimeout = time.Second }),
		"intervals":     with(func(c *Config) { c.HealthInterval, c.DiscoveryInterval = time.Second, time.Minute }),
	}
	for name, c := range valid {
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	invalid := []struct {
		name string
		c    Config
		want []string
	}{
		{"neither", with(func(c *Config) { c.URL = "" }), []string{"URL: is required with the ldap upstream, unless Domain is set"}},
		{"both", with(func(c *Config) { c.Domain = "corp.example.com" }), []string{"Domain: must not be set with URL"}},
		{"site without domain", with(func(c *Config) { c.Site = "hq" }), []string{"Site: is only used with Domain"}},
		{"bad domain", with(func(c *Config) { c.URL, c.Domain = "", "corp example.com" }), []string{`Domain: domain "corp example.com"`}},
		{"bad site", with(func(c *Config) { c.URL, c.Domain, c.Site = "", "corp.example.com", "h.q" }), []string{`Site: site "h.q"`}},
		// A DC found in DNS is verified against the operator's CAs, never the
		// system's: a public certificate for any name DNS chooses would pass.
		{"domain without CA file", with(func(c *Config) { c.URL, c.Domain = "", "corp.example.com" }), []string{
			"CAFile: is required with Domain"}},
		{"suffixes without domain", with(func(c *Config) { c.DomainSuffixes = []string{"example.net"} }), []string{
			"DomainSuffixes: is only used with Domain"}},
		{"bad suffix", with(func(c *Config) {
			c.URL, c.Domain, c.CAFile, c.DomainSuffixes = "", "corp.example.com", "ca.pem", []string{"ok.example.net", ".example.net", "a b"}
		}), []string{`DomainSuffixes: suffix ".example.net"`, `DomainSuffixes: suffix "a b"`}},
		// Each bad item of the list is reported on its own, under the setting.
		{"bad items", with(func(c *Config) { c.URL = "ftp://a ldaps://b ldaps://B" }), []string{
			`URL: item 1 of 3 ("ftp://a")`, `URL: item 3 of 3 ("ldaps://B"): the same server as item 2`}},
		{"negative", with(func(c *Config) { c.AttemptTimeout, c.HealthInterval, c.DiscoveryInterval = -1, -1, -1 }), []string{
			"AttemptTimeout: must be positive", "HealthInterval: must be positive", "DiscoveryInterval: must be positive"}},
		{"attempt above request", with(func(c *Config) { c.AttemptTimeout, c.RequestTimeout = 2*time.Second, time.Second }), []string{
			"AttemptTimeout: must not exceed RequestTimeout, 1s"}},
		{"attempt above default request", with(func(c *Config) { c.AttemptTimeout = DefaultRequestTimeout + time.Second }), []string{
			"AttemptTimeout: must not exceed RequestTimeout, 10s"}},
	}
	for _, tt := range invalid {
		err := tt.c.Validate()
		if err == nil {
			t.Errorf("%s: accepted", tt.name)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error does not mention %q:\n%v", tt.name, w, err)
			}
		}
	}
}

func TestDefaults(t *testing.T) {
	d := Config{}.withDefaults()
	if d.DialTimeout != 2*time.Second || d.AttemptTimeout != 1500*time.Millisecond ||
		d.HealthInterval != 30*time.Second || d.DiscoveryInterval != 5*time.Minute {
		t.Errorf("defaults = %+v", d)
	}
	if d := (Config{RequestTimeout: time.Second}).withDefaults(); d.AttemptTimeout != time.Second {
		t.Errorf("attempt timeout %v with a 1s request timeout", d.AttemptTimeout)
	}
}

func TestParseURL(t *testing.T) {
	tests := []struct {
		name, in     string
		wantAddr     string
		wantImplicit bool
		wantErr      bool
	}{
		// Default ports per scheme.
		{"ldaps default", "ldaps://dc.corp.example.com", "dc.corp.example.com:636", true, false},
		{"ldap default (StartTLS)", "ldap://dc.corp.example.com", "dc.corp.example.com:389", false, false},
		{"explicit port", "ldaps://127.0.0.1:1636", "127.0.0.1:1636", true, false},
		{"ipv6", "ldaps://[::1]:636/", "[::1]:636", true, false},
		{"scheme case", "LDAPS://dc", "dc:636", true, false},
		// Anything beyond scheme://host:port would be silently ignored: refuse it.
		{"base DN in URL", "ldap://dc/DC=corp", "", false, true},
		{"credentials", "ldaps://u:p@dc", "", false, true},
		{"query", "ldaps://dc?x", "", false, true},
		{"other scheme", "ldapi:///var/run/ldapi", "", false, true},
		{"no host", "ldaps://", "", false, true},
		{"port out of range", "ldaps://dc:65536", "", false, true},
		{"port zero", "ldaps://dc:0", "", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr, implicit, err := parseURL(tt.in)
			if (err != nil) != tt.wantErr || addr != tt.wantAddr || implicit != tt.wantImplicit {
				t.Errorf("parseURL(%q) = %q, %v, %v; want %q, %v, err %v", tt.in, addr, implicit, err, tt.wantAddr, tt.wantImplicit, tt.wantErr)
			}
		})
	}
}

func TestReadPassword(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, content, want string
		wantErr             bool
	}{
		// One trailing newline, as editors and echo write it, is not part of it.
		{"newline", "s3cret\n", "s3cret", false},
		{"crlf", "s3cret\r\n", "s3cret", false},
		{"none", "s3cret", "s3cret", false},
		// Inner and leading whitespace is part of a password.
		{"spaces", " s3 cret \n", " s3 cret ", false},
		// Empty would turn the bind into an unauthenticated one.
		{"empty", "\n", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(dir, tt.name)
			if err := os.WriteFile(p, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := readPassword(p)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("readPassword = %q, %v; want %q, err %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
	if _, err := readPassword(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestTLSConfig(t *testing.T) {
	dir := t.TempDir()
	roots, err := loadRoots("")
	if err != nil || roots != nil {
		t.Errorf("system roots = %v, %v", roots, err)
	}
	bad := filepath.Join(dir, "bad.pem")
	_ = os.WriteFile(bad, []byte("not pem"), 0o600)
	if _, err := loadRoots(bad); err == nil {
		t.Error("CA file without certificates accepted")
	}
	if _, err := loadRoots(filepath.Join(dir, "missing.pem")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing CA file: %v", err)
	}
	// Several DCs share one pool of roots, each verified under its own name.
	ca := filepath.Join(dir, "ca.pem")
	writeCA(t, ca) // integration_test.go
	roots, err = loadRoots(ca)
	if err != nil || roots == nil {
		t.Fatalf("loadRoots = %v, %v", roots, err)
	}
	a, b := tlsConfigFor(roots, "dc1.corp.example.com"), tlsConfigFor(roots, "dc2.corp.example.com")
	if a.RootCAs != roots || b.RootCAs != roots || a.ServerName != "dc1.corp.example.com" || b.ServerName != "dc2.corp.example.com" ||
		a.InsecureSkipVerify || a.MinVersion != tls.VersionTLS12 {
		t.Errorf("configs %+v, %+v", a, b)
	}
}

// TestOpenFailures: Open reports configuration and file problems before dialling.
func TestOpenFailures(t *testing.T) {
	c := validConfig()
	c.PasswordFile = filepath.Join(t.TempDir(), "missing")
	if _, err := c.Open(context.Background()); err == nil || !strings.Contains(err.Error(), "password") {
		t.Errorf("missing password file: %v", err)
	}
	if _, err := (Config{}).Open(context.Background()); err == nil {
		t.Error("empty config opened")
	}
}
