package throttle

import (
	"strings"
	"testing"
	"time"
)

// TestValidate: zero fields take the defaults; negative ones, and more failures
// than the in-process tallies are sized for, are refused, each naming its field.
func TestValidate(t *testing.T) {
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("zero config: %v", err)
	}
	err := Config{MaxFailures: 10_001, Window: -time.Second, MaxSignIns: -1, MaxSignInsPerClient: -1, Delay: -1}.Validate()
	for _, want := range []string{"MaxFailures: must be between 1 and 10000, got 10001", "Window: must be positive",
		"MaxSignIns: must be positive", "MaxSignInsPerClient: must be positive", "Delay: must not be negative"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
	if _, err := New(Config{MaxFailures: -1}); err == nil || !strings.Contains(err.Error(), "throttle: MaxFailures: must be positive") {
		t.Errorf("New: %v", err)
	}
}
