package proxy

import (
	"testing"
	"time"
)

func TestRetryAfterSeconds(t *testing.T) {
	tests := []struct {
		name string
		d    time.Duration
		want int
	}{
		// Rounded up: waiting the advertised time must be enough.
		{"fraction", 1500 * time.Millisecond, 2},
		{"whole", 40 * time.Second, 40},
		// Never 0, which would invite an immediate retry.
		{"tiny", time.Millisecond, 1},
	}
	for _, tt := range tests {
		if got := retryAfterSeconds(tt.d); got != tt.want {
			t.Errorf("%s: retryAfterSeconds(%v) = %d, want %d", tt.name, tt.d, got, tt.want)
		}
	}
}

// APIRoute matches exactly what the handler serves, so telemetry never names a path
// the handler answers 404 by the API's route.
func TestAPIRoute(t *testing.T) {
	tests := []struct {
		base, path string
		want       bool
	}{
		{"", "/restapi/API/directoryObjects/groupmembers/", true},
		{"/", "/api/directoryObjects/groupMembers", true},
		// U+017F folds to "s" in Unicode, not in the handler.
		{"", "/restApi/api/directoryObjects/groupMember\u017f", false},
		{"", "/restApi/api/directoryObjects/groupMembers//", false},
	}
	for _, tt := range tests {
		if _, got := APIRoute(tt.base, tt.path); got != tt.want {
			t.Errorf("APIRoute(%q, %q) = %v, want %v", tt.base, tt.path, got, tt.want)
		}
	}
}
