package cache

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/dirgate/dirgate/redisconn"
)

// TestConfigValidate: each field that cannot work is reported, all at once, naming
// the field.
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
		{"prefix with braces", Config{KeyPrefix: "{x}"}, []string{"KeyPrefix: \"{x}\" must be"}},
		{"prefix with space", Config{KeyPrefix: "a b"}, []string{"KeyPrefix: "}},
		// Whoever writes to Redis would otherwise choose what a token resolves to.
		{"redis without a secret", Config{Redis: client}, []string{"Secret: must hold at least 32 bytes with Redis"}},
		{"redis with a short secret", Config{Secret: []byte("short"), Redis: client}, []string{"Secret: must hold at least 32 bytes"}},
		{"durations", Config{TTL: -time.Second, MaxStale: -1, TTLJitter: new(1.0)}, []string{"TTL: must be positive", "MaxStale: must not be negative", "TTLJitter: must be between 0 and 0.99"}},
		// 0 is a value of these three (none, off, never wait); nil is the default.
		{"zeros", Config{TTLJitter: new(0.0), Lease: new(time.Duration(0)), FillWait: new(time.Duration(0))}, nil},
		{"jitter NaN", Config{TTLJitter: new(math.NaN())}, []string{"TTLJitter: must be between 0 and 0.99"}},
		{"lease", Config{Lease: new(10 * time.Millisecond)}, []string{"Lease: must be between 20ms and 1m (0: off)"}},
		{"negative lease", Config{Lease: new(-time.Second)}, []string{"Lease: must be between 20ms and 1m (0: off)"}},
		{"fill wait", Config{FillWait: new(-time.Second)}, []string{"FillWait: must be between 0 (never wait) and 1m"}},
		{"negative redis timings", Config{Timeout: -1, RetryInterval: -1, MaxBytes: -1}, []string{"Timeout: must be positive", "RetryInterval: must be positive", "MaxBytes: must be positive"}},
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
