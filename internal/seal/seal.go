// Package seal authenticates values kept in a store that others can write to
// (Redis): every HMAC dirgate computes over such a value, or over a name that must
// not be guessable, is computed and checked here, under keys derived from the
// secret (DIRGATE_SECRET_FILE), one key per use (docs/cache.md, "Entries in Redis
// are authenticated"; docs/auth.md, "What Redis holds"). A writer without the
// secret can then neither change a value nor move one under another key.
//
// The stored formats differ by user, and each is kept byte for byte: values live in
// Redis across a rolling upgrade (a session for DIRGATE_SESSION_TTL, a token for
// DIRGATE_TOKEN_TTL, the change feed's claim for its lease), so a replica of this
// version must read what one of the previous wrote, and the reverse:
//
//   - Sealer.Seal: Tag, the raw HMAC, the value (cache entries, remembered
//     membership writes, the change feed's position);
//   - Sealer.SealHex: the value, "|", the HMAC in hex (the change feed's claim),
//     and Sealer.HexMAC for an HMAC stored beside its fields (the change feed's
//     events);
//   - TextSealer.Seal: "v1.", the HMAC in base64url, ".", the value (sign-in's
//     session and token records);
//   - Key.Joined in hex: sign-in's record names (a keyed hash of a session id or
//     token).
//
// Sealer binds the value to its key by the key's length; TextSealer and Joined by
// a NUL between the parts, which is unambiguous because their keys hold no NUL.
package seal

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"strings"
)

// Key is an HMAC-SHA256 key of one use of the secret.
type Key struct {
	k []byte
}

// Derive gives one use of the secret, named by label, a key of its own: the
// HMAC of label under the secret.
func Derive(secret []byte, label string) Key {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(label))
	return Key{k: m.Sum(nil)}
}

// Bound is the HMAC of blob stored under key, the key's length first, so that no
// key/blob split collides with another.
func (k Key) Bound(key, blob string) []byte {
	m := hmac.New(sha256.New, k.k)
	var n [binary.MaxVarintLen64]byte
	m.Write(n[:binary.PutUvarint(n[:], uint64(len(key)))])
	m.Write([]byte(key))
	m.Write([]byte(blob))
	return m.Sum(nil)
}

// Joined is the HMAC of parts with a NUL between each two: unambiguous as long as
// no part but the last holds a NUL.
func (k Key) Joined(parts ...string) []byte {
	m := hmac.New(sha256.New, k.k)
	for i, p := range parts {
		if i > 0 {
			m.Write([]byte{0})
		}
		m.Write([]byte(p))
	}
	return m.Sum(nil)
}

// Sealer seals and opens values under one secret, each bound to its key (Bound).
type Sealer struct {
	key Key
}

// Tag starts every value Seal returns, so that a value from an older dirgate, or
// from anything else, is refused at once.
const Tag = "h1"

// Overhead is what Seal adds to a value.
const Overhead = len(Tag) + sha256.Size

// The reasons a value is refused.
var (
	ErrNotSealed = errors.New("not sealed")
	ErrMismatch  = errors.New("HMAC mismatch (written without the secret?)")
)

// New derives the sealing key from secret. Every replica must have the same secret.
func New(secret []byte) *Sealer {
	return &Sealer{key: Derive(secret, "dirgate cache entries v1")}
}

// MAC is the HMAC of blob stored under key.
func (s *Sealer) MAC(key, blob string) []byte {
	return s.key.Bound(key, blob)
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

// HexMAC is MAC in hex, for an HMAC stored beside what it covers.
func (s *Sealer) HexMAC(key, blob string) string {
	return hex.EncodeToString(s.MAC(key, blob))
}

// VerifyHex checks an HMAC that HexMAC gave for blob under key.
func (s *Sealer) VerifyHex(key, blob, mac string) error {
	b, err := hex.DecodeString(mac)
	if err != nil {
		return ErrNotSealed
	}
	if !hmac.Equal(b, s.MAC(key, blob)) {
		return ErrMismatch
	}
	return nil
}

// SealHex returns blob, "|" and its HexMAC: a value that stays readable text, for
// blobs whose start a Redis script recognises (the change feed's claim).
func (s *Sealer) SealHex(key, blob string) string {
	return blob + "|" + s.HexMAC(key, blob)
}

// OpenHex checks a value SealHex returned and returns its blob.
func (s *Sealer) OpenHex(key, v string) (string, error) {
	i := strings.LastIndexByte(v, '|')
	if i < 0 {
		return "", ErrNotSealed
	}
	if err := s.VerifyHex(key, v[:i], v[i+1:]); err != nil {
		return "", err
	}
	return v[:i], nil
}

// TextSealer seals values as text: "v1.", the HMAC in base64url, ".", the value,
// the HMAC over the key, a NUL and the value (Joined). Keys must hold no NUL.
type TextSealer struct {
	key Key
}

// textVersion starts every value TextSealer.Seal returns.
const textVersion = "v1"

// NewText derives the key of a TextSealer from secret under label.
func NewText(secret []byte, label string) *TextSealer {
	return &TextSealer{key: Derive(secret, label)}
}

// Seal returns the value to store for blob under key.
func (s *TextSealer) Seal(key, blob string) string {
	return textVersion + "." + base64.RawURLEncoding.EncodeToString(s.key.Joined(key, blob)) + "." + blob
}

// Open checks a stored value and returns its blob.
func (s *TextSealer) Open(key, v string) (string, error) {
	ver, rest, ok1 := strings.Cut(v, ".")
	sum, blob, ok2 := strings.Cut(rest, ".")
	mac, err := base64.RawURLEncoding.DecodeString(sum)
	if !ok1 || !ok2 || ver != textVersion || err != nil {
		return "", ErrNotSealed
	}
	if !hmac.Equal(mac, s.key.Joined(key, blob)) {
		return "", ErrMismatch
	}
	return blob, nil
}
