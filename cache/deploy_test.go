package cache

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/redisconn"
	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/test/harness/redistest"
)

// TestDeployments: the settings reach each kind of Redis deployment. Entries one
// instance fills are hits on another, so the store is really in use; a deployment
// the cache cannot use (a CA that did not sign the server's certificate) is bypassed
// without an error.
//
// The deployments that must be used get a timeout of a second: a TLS handshake
// under the race detector on a loaded machine outlasted the default 100 ms, and
// the cache rightly bypassed Redis (seen in CI at a load average of 16).
func TestDeployments(t *testing.T) {
	const loadedTimeout = time.Second
	password := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(password, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cfg  func(t *testing.T) Config
		want []dirgate.CacheStatus // first instance twice, then the second instance
	}{
		{"TLS with password", func(t *testing.T) Config {
			files := redistest.NewTLSFiles(t)
			srv := redistest.StartTLS(t, files, "--requirepass", "s3cret")
			return Config{Secret: sealSecret, Timeout: loadedTimeout, Redis: redisClient(t, redisconn.Config{Addrs: []string{srv.Addr()}, TLSCAFile: files.CA, PasswordFile: password})}
		}, []dirgate.CacheStatus{dirgate.CacheMiss, dirgate.CacheHit, dirgate.CacheHit}},
		{"Sentinel", func(t *testing.T) Config {
			s := redistest.StartSentinel(t, redistest.Start(t), "dirgate")
			return Config{Secret: sealSecret, Timeout: loadedTimeout, Redis: redisClient(t, redisconn.Config{Addrs: []string{s.Addr()}, Mode: redisconn.ModeSentinel, MasterName: "dirgate"})}
		}, []dirgate.CacheStatus{dirgate.CacheMiss, dirgate.CacheHit, dirgate.CacheHit}},
		// The certificate check fails: every request is served from the directory.
		{"TLS with the wrong CA", func(t *testing.T) Config {
			srv := redistest.StartTLS(t, redistest.NewTLSFiles(t))
			return Config{Secret: sealSecret, Redis: redisClient(t, redisconn.Config{Addrs: []string{srv.Addr()}, TLSCAFile: redistest.NewTLSFiles(t).CA})}
		}, []dirgate.CacheStatus{dirgate.CacheBypass, dirgate.CacheBypass, dirgate.CacheBypass}},
		// The password is required and missing.
		{"password missing", func(t *testing.T) Config {
			srv := redistest.Start(t, "--requirepass", "s3cret")
			return Config{Secret: sealSecret, Redis: redisClient(t, redisconn.Config{Addrs: []string{srv.Addr()}})}
		}, []dirgate.CacheStatus{dirgate.CacheBypass, dirgate.CacheBypass, dirgate.CacheBypass}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := demo(t)
			cfg := tc.cfg(t)
			a, b := newInstance(t, dir, cfg), newInstance(t, dir, cfg)
			opts := dirgate.ListOptions{IncludeIndirect: true}
			want := truth(t, dir, fixture.HelpDeskDN, opts)
			for i, in := range []instance{a, a, b} {
				got, st := in.list(t, fixture.HelpDeskDN, opts)
				if st != tc.want[i] || !sameListing(got, want) {
					t.Errorf("request %d: status %q (want %q), listing equals the directory's: %v", i, st, tc.want[i], sameListing(got, want))
				}
			}
		})
	}
}
