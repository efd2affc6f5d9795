package cache

import (
	"strings"
	"testing"
	"time"

	"github.com/dirgate/dirgate/redisconn"
)

// TestConfigValidate: each setting that cannot work is reported, all at once, naming
// the setting.
func TestConfigValidate(t *testing.T) {
	client := redisClient(t, redisconn.Config{Addrs: []string{"a:1"}}) // never dialled
	tests := []struct {
		name string
		cfg  Config
		want []string // substrings of the error; none means valid
	}{
		{"in-process defaults", Config{}, nil},
		{"redis with a secret", Config{Secret: sealSecret, Redis: client}, nil},
		// Redis settings are checked by redisconn (redisconn/redisconn_test.go).
		// The prefix goes into every key: braces would change Cluster slots, spaces and
		// control characters have no place in a key.
		{"prefix with braces", Config{KeyPrefix: "{x}"}, []string{"key prefix"}},
		{"prefix with space", Config{KeyPrefix: "a b"}, []string{"key prefix"}},
		// Whoever writes to Redis would otherwise choose what a token resolves to.
		{"redis without a secret", Config{Redis: client}, []string{"secret of at least 32 bytes", "DIRGATE_SECRET_FILE"}},
		{"redis with a short secret", Config{Secret: []byte("short"), Redis: client}, []string{"secret of at least 32 bytes"}},
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
