package dirgate

import "testing"

// TestCacheStatusWorse: the most degraded status wins, so a listing resolved through
// a stale or bypassed lookup says so.
func TestCacheStatusWorse(t *testing.T) {
	tests := []struct {
		name string
		set  []CacheStatus
		want CacheStatus
	}{
		{"nothing reported", nil, ""},
		{"one status", []CacheStatus{CacheMiss}, CacheMiss},
		{"stale lookup, hit listing", []CacheStatus{CacheStale, CacheHit}, CacheStale},
		{"bypassed lookup, hit", []CacheStatus{CacheBypass, CacheHit}, CacheBypass},
		{"hit then miss", []CacheStatus{CacheHit, CacheMiss}, CacheMiss},
		{"nothing then hit", []CacheStatus{"", CacheHit}, CacheHit},
	}
	for _, tc := range tests {
		var got CacheStatus
		for _, s := range tc.set {
			got = got.Worse(s)
		}
		if got != tc.want {
			t.Errorf("%s: status %q, want %q", tc.name, got, tc.want)
		}
	}
}
