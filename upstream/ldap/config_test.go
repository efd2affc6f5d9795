package ldap

import (
	"context"
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
	// Every problem is reported at once, each naming its setting.
	err := Config{URL: "http://x", BindDN: "not a dn", PoolSize: -1, PageSize: maxPageSize + 1, RequestTimeout: -time.Second}.Validate()
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, want := range []string{"DIRGATE_LDAP_URL", "DIRGATE_LDAP_BIND_DN", "DIRGATE_LDAP_BASE_DN",
		"DIRGATE_LDAP_PASSWORD_FILE", "DIRGATE_LDAP_POOL_SIZE", "DIRGATE_LDAP_PAGE_SIZE", "DIRGATE_LDAP_TIMEOUT"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %s:\n%v", want, err)
		}
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
	roots, err := readRoots("")
	if err != nil || roots != nil {
		t.Errorf("system roots = %v, %v", roots, err)
	}
	bad := filepath.Join(dir, "bad.pem")
	_ = os.WriteFile(bad, []byte("not pem"), 0o600)
	if _, err := readRoots(bad); err == nil {
		t.Error("CA file without certificates accepted")
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
