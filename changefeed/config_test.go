package changefeed

import (
	"testing"
	"time"
)

// TestConfigValidate: a zero Interval takes the default; others lie between
// MinInterval and MaxInterval.
func TestConfigValidate(t *testing.T) {
	for d, ok := range map[time.Duration]bool{0: true, MinInterval: true, MaxInterval: true,
		MinInterval - 1: false, MaxInterval + 1: false, -time.Second: false} {
		err := Config{Interval: d}.Validate()
		if (err == nil) != ok {
			t.Errorf("Interval %v: %v", d, err)
		}
		if err != nil && err.Error() != "Interval: must be between 10ms and 1h" {
			t.Errorf("Interval %v: %v", d, err)
		}
	}
}
