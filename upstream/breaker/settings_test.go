package breaker

import (
	"strings"
	"testing"
	"time"
)

// TestSettingsValidate: zero fields take the defaults; negative ones are refused,
// each naming its field.
func TestSettingsValidate(t *testing.T) {
	if err := (Settings{}).Validate(); err != nil {
		t.Fatalf("zero settings: %v", err)
	}
	err := Settings{FailureThreshold: -1, OpenTimeout: -time.Second, HalfOpenMaxRequests: -1}.Validate()
	for _, want := range []string{"FailureThreshold: must be positive", "OpenTimeout: must be positive", "HalfOpenMaxRequests: must be positive"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
}
