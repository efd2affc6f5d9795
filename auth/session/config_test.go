package session

import (
	"strings"
	"testing"
	"time"
)

// TestConfigValidate: zero lifetimes take the defaults, negative ones are refused;
// a confirmation waits for 0 to 16 replicas, 1ms to 5s. Each problem names its
// field.
func TestConfigValidate(t *testing.T) {
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("zero config: %v", err)
	}
	err := Config{SessionTTL: -1, TokenTTL: -1}.Validate()
	for _, want := range []string{"SessionTTL: must be positive", "TokenTTL: must be positive"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
	for c, ok := range map[Confirmation]bool{{0, time.Millisecond}: true, {16, 5 * time.Second}: true,
		{-1, time.Second}: false, {17, time.Second}: false, {1, 0}: false, {1, 6 * time.Second}: false} {
		if err := c.Validate(); (err == nil) != ok {
			t.Errorf("%+v: %v", c, err)
		}
	}
	err = Confirmation{Replicas: 17}.Validate()
	for _, want := range []string{"Replicas: must be between 0 and 16", "Timeout: must be between 1ms and 5s"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
}
