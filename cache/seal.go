package cache

import (
	"fmt"

	"github.com/dirgate/dirgate/internal/seal"
)

// sealer authenticates the entries the cache keeps in Redis (docs/cache.md, "Entries
// in Redis are authenticated"): each stored value is prefixed with an HMAC-SHA256
// over its key and its bytes (internal/seal), under a key derived from Config.Secret.
// Someone able to write to Redis can then neither change a listing nor move one under
// another group's key; they can still delete entries or put back an older authentic
// value of the same key (within its TTL, and only while its version tokens still
// match). Values are verified once, when read from Redis; hits from the in-process
// first level are not verified again, so the hot path does not pay for it.
type sealer struct{ s *seal.Sealer }

// sealTag starts every sealed value; sealOverhead is what sealing adds to a value.
const (
	sealTag      = seal.Tag
	sealOverhead = seal.Overhead
)

func newSealer(secret []byte) *sealer { return &sealer{seal.New(secret)} }

func (s *sealer) mac(key, blob string) []byte { return s.s.MAC(key, blob) }

// seal returns the value to store for blob under key.
func (s *sealer) seal(key, blob string) string { return s.s.Seal(key, blob) }

// open checks a stored value and returns its blob.
func (s *sealer) open(key, v string) (string, error) {
	blob, err := s.s.Open(key, v)
	if err != nil {
		return "", fmt.Errorf("%w: %w", errCorrupt, err)
	}
	return blob, nil
}

// sealerFor returns the sealer of a Redis-backed cache (Validate requires its
// secret); the in-process store needs none (nothing else writes to it).
func sealerFor(c Config) *sealer {
	if c.Redis == nil {
		return nil
	}
	return newSealer(c.Secret)
}
