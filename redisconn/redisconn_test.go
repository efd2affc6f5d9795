package redisconn

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestValidate: each setting that cannot work is reported, all at once, naming its
// field.
func TestValidate(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(secret, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cfg  Config
		want []string // substrings of the error; none means valid
	}{
		{"in process", Config{}, nil},
		{"single server", Config{Addrs: []string{"127.0.0.1:6380"}, PasswordFile: secret}, nil},
		// Several addresses without a mode mean a cluster.
		{"cluster by addresses", Config{Addrs: []string{"a:1", "b:2"}}, nil},
		{"sentinel", Config{Addrs: []string{"a:26379"}, Mode: ModeSentinel, MasterName: "m"}, nil},
		{"sentinel without master", Config{Addrs: []string{"a:26379"}, Mode: ModeSentinel}, []string{"MasterName: is required in mode sentinel"}},
		{"master name outside sentinel", Config{Addrs: []string{"a:1"}, MasterName: "m"}, []string{"MasterName: is only used in mode sentinel"}},
		{"unknown mode", Config{Addrs: []string{"a:1"}, Mode: "ring"}, []string{"Mode: \"ring\""}},
		{"single with two addresses", Config{Addrs: []string{"a:1", "b:2"}, Mode: ModeSingle}, []string{"Mode: single takes one address"}},
		{"cluster database", Config{Addrs: []string{"a:1"}, Mode: ModeCluster, DB: 2}, []string{"DB: must be 0"}},
		{"address without port", Config{Addrs: []string{"redis"}}, []string{"Addrs: address \"redis\" must be host:port"}},
		{"missing password file", Config{Addrs: []string{"a:1"}, PasswordFile: "/nonexistent"}, []string{"PasswordFile: ", "nonexistent"}},
		{"certificate without key", Config{Addrs: []string{"a:1"}, TLSCertFile: secret}, []string{"TLSCertFile: and TLSKeyFile must be set together"}},
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

// TestOptions: the password file is read without its newline, and retries are off
// so that a failure is a bypass, not a wait.
func TestOptions(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(secret, []byte("s3cret\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err := Config{Addrs: []string{"a:1"}, PasswordFile: secret, TLS: true}.WithDefaults().options(50 * time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if o.Password != "s3cret" || o.MaxRetries != -1 || o.ReadTimeout != 50*time.Millisecond || o.TLSConfig == nil || o.IsClusterMode {
		t.Errorf("options: password %q retries %d read timeout %v TLS %v cluster %v", o.Password, o.MaxRetries, o.ReadTimeout, o.TLSConfig != nil, o.IsClusterMode)
	}
}
