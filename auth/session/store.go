// Package session keeps the sign-in flow's sessions and tokens (docs/auth.md,
// "Signing in"): in Redis when it is configured, so that every replica honours a
// token and its revocation, and in process otherwise.
//
// Redis is storage, not trust. It holds only keyed hashes of session ids and tokens
// (the key names), never the values, and every record carries an HMAC-SHA256 (internal/seal) under
// a key derived from the secret file, bound to the record's key name: someone able
// to write to Redis can delete records (a denial of service they could cause anyway)
// but can neither mint a token, nor extend or re-target one, nor move a session's
// record under a token's name. Records carry no version: one copied earlier and put
// back under its own key verifies until the expiry sealed in it, which undoes a
// revocation or lets a used session be exchanged again (TestRedisWriterCanReplay).
package session

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/dirgate/dirgate/internal/fielderr"
	"github.com/dirgate/dirgate/internal/seal"
)

// Defaults of the lifetimes (docs/compatibility.md, "The sign-in flow").
const (
	DefaultSessionTTL = 10 * time.Minute
	DefaultTokenTTL   = 30 * time.Minute
)

// TokenPrefix starts every token the store issues, so that the authenticator sends
// only such tokens to the store (and a tokens-file token never costs a Redis read).
const TokenPrefix = "dgt_"

// MinSecretLength is the least number of bytes the secret file must hold.
const MinSecretLength = 32

// ReadSecret reads the secret file: at least MinSecretLength
// bytes, surrounding white space ignored. Every replica must read the same secret.
func ReadSecret(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("session: secret file: %w", err)
	}
	b = []byte(strings.TrimSpace(string(b)))
	if len(b) < MinSecretLength {
		return nil, fmt.Errorf("session: secret file %s holds %d bytes; at least %d are required (e.g. head -c 32 /dev/urandom | base64)", path, len(b), MinSecretLength)
	}
	return b, nil
}

// Backend is where records live: Redis (NewRedisBackend) or this process
// (NewMemoryBackend). Values are opaque to it.
type Backend interface {
	Get(ctx context.Context, key string) (string, bool, error)
	Set(ctx context.Context, key, value string, ttl time.Duration) error
	// GetDel reads and deletes at once: of two replicas exchanging one session, one
	// gets it.
	GetDel(ctx context.Context, key string) (string, bool, error)
	Del(ctx context.Context, keys ...string) error
}

// ownedBackend is a Backend that also bounds each account's records
// (*MemoryBackend): SetOwned is Set naming the account; with limit, a new record
// beyond the account's bound is refused with ErrAccountFull.
type ownedBackend interface {
	SetOwned(ctx context.Context, key, value, owner string, ttl time.Duration, limit bool) error
}

// set stores a record of subject's; limit asks for the account's bound to be
// enforced (a new session), where the backend has one.
func (s *Store) set(ctx context.Context, key, value, subject string, ttl time.Duration, limit bool) error {
	if ob, ok := s.backend.(ownedBackend); ok {
		return ob.SetOwned(ctx, key, value, subject, ttl, limit)
	}
	return s.backend.Set(ctx, key, value, ttl)
}

// Store issues and checks sessions and tokens.
type Store struct {
	backend    Backend
	names      seal.Key         // keys the hashes that name records
	records    *seal.TextSealer // seals the records
	sessionTTL time.Duration
	tokenTTL   time.Duration
	log        *slog.Logger
	now        func() time.Time

	// own are this store's deletions Redis's replicas did not confirm; announced,
	// other stores' (unconfirmed.go). Both are refused whatever Redis holds.
	own, announced refused
}

// Config configures a Store. Zero durations take the defaults. cmd/dirgate binds
// its session-ttl and token-ttl settings to SessionTTL and TokenTTL
// (docs/settings.md); the other fields are its wiring.
type Config struct {
	Backend Backend
	// Secret keys the names and seals of the records: at least MinSecretLength bytes.
	Secret []byte
	// SessionTTL is the lifetime of a session, exchanged once for a token.
	SessionTTL time.Duration
	// TokenTTL is the lifetime of a token; there is no renewal.
	TokenTTL time.Duration
	Logger   *slog.Logger
	Now      func() time.Time
}

// Validate reports the problems of the lifetimes at once, each a *fielderr.Error
// naming its field; New also requires Backend and Secret.
func (c Config) Validate() error {
	var errs []error
	for field, neg := range map[string]bool{"SessionTTL": c.SessionTTL < 0, "TokenTTL": c.TokenTTL < 0} {
		if neg {
			errs = append(errs, fielderr.New(field, "must be positive"))
		}
	}
	return fielderr.Join(errs...)
}

// New returns a Store.
func New(cfg Config) (*Store, error) {
	if cfg.Backend == nil {
		return nil, errors.New("session: a backend is required")
	}
	if len(cfg.Secret) < MinSecretLength {
		return nil, fmt.Errorf("session: the secret must hold at least %d bytes", MinSecretLength)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	s := &Store{backend: cfg.Backend, sessionTTL: cfg.SessionTTL, tokenTTL: cfg.TokenTTL, log: cfg.Logger, now: cfg.Now,
		names: seal.Derive(cfg.Secret, "dirgate session names v1"), records: seal.NewText(cfg.Secret, "dirgate session records v1")}
	if s.sessionTTL == 0 {
		s.sessionTTL = DefaultSessionTTL
	}
	if s.tokenTTL == 0 {
		s.tokenTTL = DefaultTokenTTL
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s, nil
}

// Errors of the store, which the sign-in service maps to client answers.
var (
	// ErrUnknown: no such session or token, or it expired, was used, ended, revoked
	// or forged.
	ErrUnknown = errors.New("session: unknown, expired or revoked")
)

// Record kinds.
const (
	kindSession = "s"
	kindToken   = "t"
)

// record is what the backend holds (as JSON, after its HMAC).
type record struct {
	Kind    string `json:"k"`
	Subject string `json:"sub"`           // the account's GUID
	Expires int64  `json:"exp"`           // Unix nanoseconds
	Reason  int    `json:"cpr,omitempty"` // a session's changePasswordReason
	// Used marks a session that was exchanged; Link names its token's record (and a
	// token's record names its session's), so that ending a session revokes its token.
	Used bool   `json:"used,omitempty"`
	Link string `json:"link,omitempty"`
}

// Session is a created authentication session.
type Session struct {
	ID                   string
	Subject              string
	ChangePasswordReason int
	Expires              time.Time
}

// Token is an issued token.
type Token struct {
	Token   string
	Subject string
	Expires time.Time
}

// newSecret returns 256 random bits, URL-safe.
func newSecret() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("session: random: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// name is the backend key of a session id or token: a keyed hash, so that what
// Redis holds cannot be turned back into the value or checked against a guess.
func (s *Store) name(kind, value string) string {
	return kind + ":" + hex.EncodeToString(s.names.Joined(kind, value))
}

// seal renders a record with its HMAC over the key name and the JSON
// (internal/seal's TextSealer: "v1.<HMAC>.<JSON>").
func (s *Store) seal(key string, r record) (string, error) {
	js, err := json.Marshal(r)
	if err != nil {
		return "", fmt.Errorf("session: encode: %w", err)
	}
	return s.records.Seal(key, string(js)), nil
}

// open checks a stored value's HMAC and kind and decodes it. A value that fails is
// logged (without the value) and treated as absent.
func (s *Store) open(ctx context.Context, key, kind, v string) (record, bool) {
	var r record
	js, err := s.records.Open(key, v)
	if err != nil {
		s.log.WarnContext(ctx, "session store: a record failed its HMAC check and was refused (written by something without the secret?)", "kind", kind)
		return r, false
	}
	if err := json.Unmarshal([]byte(js), &r); err != nil || r.Kind != kind {
		s.log.WarnContext(ctx, "session store: a record with a valid HMAC did not decode", "kind", kind)
		return record{}, false
	}
	return r, true
}

// CreateSession stores a new session for subject.
func (s *Store) CreateSession(ctx context.Context, subject string, changePasswordReason int) (Session, error) {
	id, err := newSecret()
	if err != nil {
		return Session{}, err
	}
	exp := s.now().Add(s.sessionTTL)
	key := s.name(kindSession, id)
	v, err := s.seal(key, record{Kind: kindSession, Subject: subject, Expires: exp.UnixNano(), Reason: changePasswordReason})
	if err != nil {
		return Session{}, err
	}
	// Only a new session is refused at the account's bound: its exchange and the
	// records rewritten after it always find room, so an account holds at most
	// twice the bound (each session, then its token).
	if err := s.set(ctx, key, v, subject, s.sessionTTL, true); err != nil {
		return Session{}, fmt.Errorf("session: store session: %w", err)
	}
	return Session{ID: id, Subject: subject, ChangePasswordReason: changePasswordReason, Expires: exp}, nil
}

// Exchange turns a live, unused session into a token, once. A session whose
// password must change is consumed and returned with no token: the caller refuses it.
func (s *Store) Exchange(ctx context.Context, id string) (Session, Token, error) {
	key := s.name(kindSession, id)
	if s.isRefused(key) {
		return Session{}, Token{}, ErrUnknown
	}
	v, ok, err := s.getDelConfirmed(ctx, key, s.now().Add(s.sessionTTL))
	if err != nil {
		return Session{}, Token{}, fmt.Errorf("session: read session: %w", err)
	}
	if !ok {
		return Session{}, Token{}, ErrUnknown
	}
	r, ok := s.open(ctx, key, kindSession, v)
	now := s.now()
	if !ok || now.UnixNano() >= r.Expires {
		return Session{}, Token{}, ErrUnknown
	}
	if r.Used {
		// Exchanged before: put the record back, so that it still names its token
		// for EndSession.
		if err := s.set(ctx, key, v, r.Subject, time.Unix(0, r.Expires).Sub(now), false); err != nil {
			s.log.WarnContext(ctx, "session store: could not restore a used session", "err", err)
		}
		return Session{}, Token{}, ErrUnknown
	}
	ses := Session{ID: id, Subject: r.Subject, ChangePasswordReason: r.Reason, Expires: time.Unix(0, r.Expires)}
	if r.Reason != 0 {
		return ses, Token{}, nil
	}
	tok, err := newSecret()
	if err != nil {
		return Session{}, Token{}, err
	}
	tok = TokenPrefix + tok
	tkey := s.name(kindToken, tok)
	exp := now.Add(s.tokenTTL)
	tv, err := s.seal(tkey, record{Kind: kindToken, Subject: r.Subject, Expires: exp.UnixNano(), Link: key})
	if err != nil {
		return Session{}, Token{}, err
	}
	if err := s.set(ctx, tkey, tv, r.Subject, s.tokenTTL, false); err != nil {
		return Session{}, Token{}, fmt.Errorf("session: store token: %w", err)
	}
	// The used session stays until it would have expired, naming its token, so that
	// ending it revokes the token. Losing this write only loses that link.
	r.Used, r.Link = true, tkey
	if sv, err := s.seal(key, r); err == nil {
		if left := time.Unix(0, r.Expires).Sub(now); left > 0 {
			if err := s.set(ctx, key, sv, r.Subject, left, false); err != nil {
				s.log.WarnContext(ctx, "session store: could not link the session to its token", "err", err)
			}
		}
	}
	return ses, Token{Token: tok, Subject: r.Subject, Expires: exp}, nil
}

// Lookup returns the subject of a live token.
func (s *Store) Lookup(ctx context.Context, token string) (Token, error) {
	key := s.name(kindToken, token)
	if s.isRefused(key) {
		return Token{}, ErrUnknown
	}
	v, ok, err := s.backend.Get(ctx, key)
	if err != nil {
		return Token{}, fmt.Errorf("session: read token: %w", err)
	}
	if !ok {
		return Token{}, ErrUnknown
	}
	r, ok := s.open(ctx, key, kindToken, v)
	if !ok || s.now().UnixNano() >= r.Expires {
		return Token{}, ErrUnknown
	}
	return Token{Token: token, Subject: r.Subject, Expires: time.Unix(0, r.Expires)}, nil
}

// RevokeToken deletes a token; an unknown one is no error.
func (s *Store) RevokeToken(ctx context.Context, token string) error {
	if err := s.deleteConfirmed(ctx, s.name(kindToken, token), s.now().Add(s.tokenTTL)); err != nil {
		return fmt.Errorf("session: revoke token: %w", err)
	}
	return nil
}

// EndSession deletes a session and the token it was exchanged for; an unknown one
// is no error.
func (s *Store) EndSession(ctx context.Context, id string) error {
	key := s.name(kindSession, id)
	v, ok, err := s.getDelConfirmed(ctx, key, s.now().Add(s.sessionTTL))
	if err != nil {
		return fmt.Errorf("session: end session: %w", err)
	}
	if !ok {
		return nil
	}
	// Only a record with a valid HMAC may name what else to delete.
	if r, ok := s.open(ctx, key, kindSession, v); ok && r.Link != "" && strings.HasPrefix(r.Link, kindToken+":") {
		if err := s.deleteConfirmed(ctx, r.Link, s.now().Add(s.tokenTTL)); err != nil {
			return fmt.Errorf("session: revoke the session's token: %w", err)
		}
	}
	return nil
}

// getDelConfirmed is the backend's GetDel, waiting for the replicas where the
// backend confirms: an unconfirmed deletion is kept until exp (unconfirmed.go).
func (s *Store) getDelConfirmed(ctx context.Context, key string, exp time.Time) (string, bool, error) {
	cb, ok := s.backend.(confirmingBackend)
	if !ok {
		return s.backend.GetDel(ctx, key)
	}
	v, found, confirmed, err := cb.GetDelConfirmed(ctx, key)
	if err != nil {
		return "", false, err
	}
	if found && !confirmed {
		s.keepUnconfirmed(ctx, cb, key, exp)
	}
	return v, found, nil
}
