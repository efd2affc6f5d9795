package writejournal

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestConfigValidate: a journal needs a client and a secret of the cache's length,
// and a prefix that keeps its keys in the group's Cluster slot; every problem is
// reported at once.
func TestConfigValidate(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer client.Close()
	if _, err := (Config{Redis: client, Secret: testSecret}).Open(); err != nil {
		t.Errorf("a valid configuration: %v", err)
	}
	err := Config{Secret: testSecret[:MinSecretLength-1], KeyPrefix: "dg{x}:", Timeout: -1}.Validate()
	for _, want := range []string{"Redis client is required", "secret of at least 32 bytes", "key prefix", "timeout"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
}
