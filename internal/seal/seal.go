// Package seal authenticates values kept in a store that others can write to
// (Redis): each value is prefixed with an HMAC-SHA256 over its key and its bytes,
// under a key derived from a secret, so that a writer without the secret can
// neither change a value nor move one under another key (docs/cache.md, "Entries
// in Redis are authenticated"). The cache, the change feed and the write journal
// seal with it, under one key derived from the secret.
package seal

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
)

// Sealer seals and opens values under one secret.
type Sealer struct {
	key []byte
}

// Tag starts every sealed value, so that a value from an older dirgate, or from
// anything else, is refused at once.
const Tag = "h1"

// Overhead is what sealing adds to a value.
const Overhead = len(Tag) + sha256.Size

// The reasons Open refuses a value.
var (
	ErrNotSealed = errors.New("not sealed")
	ErrMismatch  = errors.New("HMAC mismatch (written without the secret?)")
)

// New derives the sealing key from secret. Every replica must have the same secret.
func New(secret []byte) *Sealer {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("dirgate cache entries v1"))
	return &Sealer{key: m.Sum(nil)}
}

// MAC is the HMAC of blob stored under key (the key's length first, so that no
// key/blob split collides with another).
func (s *Sealer) MAC(key, blob string) []byte {
	m := hmac.New(sha256.New, s.key)
	var n [binary.MaxVarintLen64]byte
	m.Write(n[:binary.PutUvarint(n[:], uint64(len(key)))])
	m.Write([]byte(key))
	m.Write([]byte(blob))
	return m.Sum(nil)
}

// Seal returns the value to store for blob under key.
func (s *Sealer) Seal(key, blob string) string {
	return Tag + string(s.MAC(key, blob)) + blob
}

// Open checks a stored value and returns its blob.
func (s *Sealer) Open(key, v string) (string, error) {
	n := Overhead
	if len(v) < n || v[:len(Tag)] != Tag {
		return "", ErrNotSealed
	}
	blob := v[n:]
	if !hmac.Equal([]byte(v[len(Tag):n]), s.MAC(key, blob)) {
		return "", ErrMismatch
	}
	return blob, nil
}
