package cache

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestConfigValidate: each setting that cannot work is reported, all at once, naming
// the setting.
func TestConfigValidate(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(secret, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cfg  Config
		want []string // substrings of the error; none means valid
	}{
		{"in-process defaults", Config{}, nil},
		{"single server", Config{Secret: sealSecret, Redis: RedisConfig{Addrs: []string{"127.0.0.1:6380"}, PasswordFile: secret}}, nil},
		// Several addresses without a mode mean a cluster.
		{"cluster by addresses", Config{Secret: sealSecret, Redis: RedisConfig{Addrs: []string{"a:1", "b:2"}}}, nil},
		{"sentinel", Config{Secret: sealSecret, Redis: RedisConfig{Addrs: []string{"a:26379"}, Mode: ModeSentinel, MasterName: "m"}}, nil},
		{"sentinel without master", Config{Secret: sealSecret, Redis: RedisConfig{Addrs: []string{"a:26379"}, Mode: ModeSentinel}}, []string{"master name"}},
		{"master name outside sentinel", Config{Secret: sealSecret, Redis: RedisConfig{Addrs: []string{"a:1"}, MasterName: "m"}}, []string{"only used in mode sentinel"}},
		{"unknown mode", Config{Secret: sealSecret, Redis: RedisConfig{Addrs: []string{"a:1"}, Mode: "ring"}}, []string{"mode \"ring\""}},
		{"single with two addresses", Config{Secret: sealSecret, Redis: RedisConfig{Addrs: []string{"a:1", "b:2"}, Mode: ModeSingle}}, []string{"one address"}},
		{"cluster database", Config{Secret: sealSecret, Redis: RedisConfig{Addrs: []string{"a:1"}, Mode: ModeCluster, DB: 2}}, []string{"database 0"}},
		{"address without port", Config{Secret: sealSecret, Redis: RedisConfig{Addrs: []string{"redis"}}}, []string{"host:port"}},
		{"missing password file", Config{Secret: sealSecret, Redis: RedisConfig{Addrs: []string{"a:1"}, PasswordFile: "/nonexistent"}}, []string{"nonexistent"}},
		{"certificate without key", Config{Secret: sealSecret, Redis: RedisConfig{Addrs: []string{"a:1"}, TLSCertFile: secret}}, []string{"certificate and key"}},
		// The prefix goes into every key: braces would change Cluster slots, spaces and
		// control characters have no place in a key.
		{"prefix with braces", Config{Redis: RedisConfig{KeyPrefix: "{x}"}}, []string{"key prefix"}},
		{"prefix with space", Config{Redis: RedisConfig{KeyPrefix: "a b"}}, []string{"key prefix"}},
		// Whoever writes to Redis would otherwise choose what a token resolves to.
		{"redis without a secret", Config{Redis: RedisConfig{Addrs: []string{"a:1"}}}, []string{"secret of at least 32 bytes", "DIRGATE_SECRET_FILE"}},
		{"redis with a short secret", Config{Secret: []byte("short"), Redis: RedisConfig{Addrs: []string{"a:1"}}}, []string{"secret of at least 32 bytes"}},
		{"durations", Config{TTL: -time.Second, MaxStale: -1, TTLJitter: 1}, []string{"TTL must", "max stale", "jitter"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Errorf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate accepted it")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestRedisOptions: the password file is read without its newline, and retries are
// off so that a failure is a bypass, not a wait.
func TestRedisOptions(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(secret, []byte("s3cret\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err := Config{Redis: RedisConfig{Addrs: []string{"a:1"}, PasswordFile: secret, TLS: true}}.withDefaults().Redis.options(50 * time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if o.Password != "s3cret" || o.MaxRetries != -1 || o.ReadTimeout != 50*time.Millisecond || o.TLSConfig == nil || o.IsClusterMode {
		t.Errorf("options: password %q retries %d read timeout %v TLS %v cluster %v", o.Password, o.MaxRetries, o.ReadTimeout, o.TLSConfig != nil, o.IsClusterMode)
	}
}
