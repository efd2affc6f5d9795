package cache

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

// sealer authenticates the entries the cache keeps in Redis (docs/cache.md,
// "Entries are authenticated"): each stored value is prefixed with an HMAC-SHA256
// over its key and its bytes, under a key derived from Config.Secret. Someone able
// to write to Redis can then neither change a listing nor move one under another
// group's key; they can still delete entries or put back an older authentic value
// of the same key (within its TTL, and only while its version tokens still match).
// Values are verified once, when read from Redis; hits from the in-process first
// level are not verified again, so the hot path does not pay for it.
type sealer struct {
	key []byte
}

// sealTag starts every sealed value, so that a value from an older dirgate, or
// from anything else, is refused at once.
const sealTag = "h1"

// sealOverhead is what sealing adds to a value.
const sealOverhead = len(sealTag) + sha256.Size

func newSealer(secret []byte) *sealer {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("dirgate cache entries v1"))
	return &sealer{key: m.Sum(nil)}
}

func (s *sealer) mac(key, blob string) []byte {
	m := hmac.New(sha256.New, s.key)
	var n [binary.MaxVarintLen64]byte
	m.Write(n[:binary.PutUvarint(n[:], uint64(len(key)))])
	m.Write([]byte(key))
	m.Write([]byte(blob))
	return m.Sum(nil)
}

// seal returns the value to store for blob under key.
func (s *sealer) seal(key, blob string) string {
	return sealTag + string(s.mac(key, blob)) + blob
}

// open checks a stored value and returns its blob.
func (s *sealer) open(key, v string) (string, error) {
	n := sealOverhead
	if len(v) < n || v[:len(sealTag)] != sealTag {
		return "", fmt.Errorf("%w: not sealed", errCorrupt)
	}
	blob := v[n:]
	if !hmac.Equal([]byte(v[len(sealTag):n]), s.mac(key, blob)) {
		return "", fmt.Errorf("%w: HMAC mismatch (written without the secret?)", errCorrupt)
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
