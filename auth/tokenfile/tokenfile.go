// Package tokenfile authenticates Adm-Authorization tokens against a YAML file of
// token hashes, each naming the directory object the token acts as.
//
// The file is a list of entries:
//
//   - sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
//     subject: CN=Dana Admin,OU=IT,OU=Staff,DC=corp,DC=example,DC=com
//   - token: plain-text-token   # development only: a warning is logged
//     subject: S-1-5-21-1-2-3-1105
//
// A subject is a DN, GUID or SID. It is resolved through the directory into a
// principal (with its transitive groups) when the token is used, and the principal
// is cached for a short time. A token whose account is disabled, locked out or
// expired is refused as an unknown one (docs/auth.md).
package tokenfile

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dirgate/dirgate"
	"golang.org/x/sync/singleflight"
	"gopkg.in/yaml.v3"
)

// MaxTokenLength bounds the header value that is hashed; longer tokens are refused
// without work.
const MaxTokenLength = 4096

// Resolver turns a subject into a principal; dirgate.MemberService.Principal is one.
type Resolver interface {
	Principal(ctx context.Context, subject dirgate.Identifier) (dirgate.Principal, error)
}

// entry is one line of the file after validation.
type entry struct {
	hash    [sha256.Size]byte
	subject dirgate.Identifier
	plain   bool
}

type rawEntry struct {
	SHA256  string `yaml:"sha256"`
	Token   string `yaml:"token"`
	Subject string `yaml:"subject"`
}

// Parse validates a tokens file and reports every problem at once. Plain entries are
// allowed but counted, so the caller can warn about them.
func Parse(data []byte) (entries []entry, plain int, err error) {
	var raw []rawEntry
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&raw); err != nil && !errors.Is(err, io.EOF) { // empty file: no tokens
		return nil, 0, fmt.Errorf("parse tokens: %w", err)
	}
	var errs []error
	seen := map[[sha256.Size]byte]int{}
	for i, r := range raw {
		n := i + 1
		var e entry
		switch {
		case r.SHA256 != "" && r.Token != "":
			errs = append(errs, fmt.Errorf("entry %d: give sha256 or token, not both", n))
			continue
		case r.SHA256 != "":
			b, err := hex.DecodeString(strings.TrimSpace(r.SHA256))
			if err != nil || len(b) != sha256.Size {
				errs = append(errs, fmt.Errorf("entry %d: sha256 must be 64 hexadecimal digits", n))
				continue
			}
			copy(e.hash[:], b)
		case r.Token != "":
			if len(r.Token) > MaxTokenLength {
				errs = append(errs, fmt.Errorf("entry %d: token longer than %d bytes", n, MaxTokenLength))
				continue
			}
			e.hash, e.plain = sha256.Sum256([]byte(r.Token)), true
			plain++
		default:
			errs = append(errs, fmt.Errorf("entry %d: sha256 or token is required", n))
			continue
		}
		id, err := dirgate.ParseIdentifier(r.Subject)
		if err != nil {
			errs = append(errs, fmt.Errorf("entry %d: subject %s", n, dirgate.ErrorMessage(err)))
			continue
		}
		e.subject = id
		if prev, dup := seen[e.hash]; dup {
			errs = append(errs, fmt.Errorf("entry %d: same token as entry %d", n, prev))
			continue
		}
		seen[e.hash] = n
		entries = append(entries, e)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, 0, fmt.Errorf("parse tokens: %w", err)
	}
	return entries, plain, nil
}

// File is an Authenticator over a tokens file.
type File struct {
	path     string
	resolver Resolver
	log      *slog.Logger
	ttl      time.Duration
	maxStale time.Duration
	now      func() time.Time

	entries atomic.Pointer[[]entry]

	mu    sync.Mutex
	cache map[string]cached // subject canonical form -> principal
	// expiries counts Expire calls (under mu). Concurrent resolutions of one
	// subject share one directory read (flights), keyed by this count: a request
	// after an Expire never joins a read that started before it.
	expiries uint64
	flights  singleflight.Group
}

type cached struct {
	p       dirgate.Principal
	fetched time.Time
	expires time.Time
}

// Config configures a File.
type Config struct {
	// Path of the YAML file; Data, when set, is used instead (the embedded demo).
	Path string
	Data []byte
	// Resolver resolves subjects into principals.
	Resolver Resolver
	// PrincipalTTL is how long a resolved principal is reused; 0 means 30 s.
	PrincipalTTL time.Duration
	// PrincipalMaxStale is how old a principal may be and still be used when the
	// directory fails (so that cached listings can be served stale during an outage);
	// 0 means never.
	PrincipalMaxStale time.Duration
	Logger            *slog.Logger
}

// Open loads the tokens; a file that does not parse is refused.
func Open(cfg Config) (*File, error) {
	f := &File{path: cfg.Path, resolver: cfg.Resolver, log: cfg.Logger, ttl: cfg.PrincipalTTL, maxStale: cfg.PrincipalMaxStale,
		now: time.Now, cache: map[string]cached{}}
	if f.log == nil {
		f.log = slog.Default()
	}
	if f.ttl == 0 {
		f.ttl = 30 * time.Second
	}
	if f.resolver == nil {
		return nil, errors.New("tokenfile: a resolver is required")
	}
	data := cfg.Data
	if data == nil {
		var err error
		if data, err = os.ReadFile(cfg.Path); err != nil {
			return nil, fmt.Errorf("tokenfile: %w", err)
		}
	}
	if err := f.load(data); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *File) load(data []byte) error {
	entries, plain, err := Parse(data)
	if err != nil {
		return fmt.Errorf("tokenfile %s: %w", f.path, err)
	}
	if plain > 0 {
		f.log.Warn("tokens file holds plain-text tokens: for development only; store sha256 hashes instead",
			"path", f.path, "plain", plain)
	}
	f.entries.Store(&entries)
	f.mu.Lock()
	f.cache = map[string]cached{} // a subject may have changed
	f.mu.Unlock()
	f.log.Info("tokens loaded", "path", f.path, "count", len(entries))
	return nil
}

// Reload re-reads the file. On error the previous tokens stay in force.
func (f *File) Reload() error {
	if f.path == "" {
		return nil
	}
	data, err := os.ReadFile(f.path)
	if err != nil {
		return fmt.Errorf("tokenfile: %w", err)
	}
	return f.load(data)
}

// Count returns the number of tokens in force.
func (f *File) Count() int { return len(*f.entries.Load()) }

var errUnknown = &dirgate.Error{Code: dirgate.EUNAUTHENTICATED, Message: "The provided authentication token is either expired or invalid."}

// Authenticate finds the token's entry, comparing the token's hash with every entry in
// constant time, and returns its subject's principal.
func (f *File) Authenticate(ctx context.Context, token string) (dirgate.Principal, error) {
	if token == "" || len(token) > MaxTokenLength {
		return dirgate.Principal{}, errUnknown
	}
	sum := sha256.Sum256([]byte(token))
	var match *entry
	entries := *f.entries.Load()
	for i := range entries {
		// No early exit: the time taken does not tell which entry matched.
		if subtle.ConstantTimeCompare(sum[:], entries[i].hash[:]) == 1 {
			match = &entries[i]
		}
	}
	if match == nil {
		return dirgate.Principal{}, errUnknown
	}
	return f.principal(ctx, match.subject)
}

// Principal resolves subject through the file's principal cache, so that a
// signed-in token (auth/session) shares the cache, its freshness and its expiry by
// the change feed. A subject gone from the directory is EUNAUTHENTICATED, and so is
// an account that is disabled, locked out or expired (wrapping a
// *dirgate.AccountRefusedError).
func (f *File) Principal(ctx context.Context, subject dirgate.Identifier) (dirgate.Principal, error) {
	return f.principal(ctx, subject)
}

func (f *File) principal(ctx context.Context, subject dirgate.Identifier) (dirgate.Principal, error) {
	key := subject.Canonical()
	now := f.now()
	f.mu.Lock()
	c, ok := f.cache[key]
	gen := f.expiries
	f.mu.Unlock()
	if ok && now.Before(c.expires) {
		return f.usable(ctx, c.p, now)
	}
	p, err := f.resolve(ctx, key, gen, subject, now)
	if err != nil {
		if dirgate.ErrorCode(err) == dirgate.ENOTFOUND {
			// The token is known but its subject is gone from the directory: the
			// token no longer names anyone.
			f.log.Warn("token subject not found in the directory", "subject", subject.String())
			return dirgate.Principal{}, errUnknown
		}
		if ok && dirgate.IsDirectoryDown(err) && now.Sub(c.fetched) < f.maxStale {
			f.log.WarnContext(ctx, "directory unavailable; using the last known principal",
				"subject", subject.String(), "age", now.Sub(c.fetched).Round(time.Second).String())
			// The last state known decides: a disabled account stays refused while
			// the directory cannot say otherwise, and an expiry date still passes.
			return f.usable(ctx, c.p, now)
		}
		return dirgate.Principal{}, fmt.Errorf("tokenfile: resolve subject: %w", err)
	}
	return f.usable(ctx, p, now)
}

// resolve reads subject's principal from the directory, once for all the requests
// that ask while it is read (after every change to groups the feed expires every
// principal: without sharing, each request of a busy caller would read the
// directory, several searches each, at once). The read runs until the first
// asker's deadline but is not cancelled with it. It is kept whatever the account's
// state, so that a refused token costs no directory read until the principal is due
// again, and is checked at each use (an expiry date passes without any change in
// the directory); unless an Expire came since gen, when it may predate a change.
func (f *File) resolve(ctx context.Context, key string, gen uint64, subject dirgate.Identifier, now time.Time) (dirgate.Principal, error) {
	v, err, _ := f.flights.Do(key+"|"+strconv.FormatUint(gen, 10), func() (any, error) {
		// A read that ended between this request's look at the cache and now.
		f.mu.Lock()
		c, ok := f.cache[key]
		fresh := ok && f.expiries == gen && now.Before(c.expires)
		f.mu.Unlock()
		if fresh {
			return c.p, nil
		}
		rctx := context.WithoutCancel(ctx)
		if dl, ok := ctx.Deadline(); ok {
			var cancel context.CancelFunc
			rctx, cancel = context.WithDeadline(rctx, dl)
			defer cancel()
		}
		p, err := f.resolver.Principal(rctx, subject)
		if err != nil {
			return dirgate.Principal{}, err
		}
		f.mu.Lock()
		if f.expiries == gen {
			f.cache[key] = cached{p: p, fetched: now, expires: now.Add(f.ttl)}
		}
		f.mu.Unlock()
		return p, nil
	})
	p, _ := v.(dirgate.Principal)
	return p, err
}

// usable returns p, or EUNAUTHENTICATED when its account may not act at now
// (disabled, locked out, expired). The warning names the account, never the token.
// Subjects that are not accounts (a group, a contact) have no status to check.
func (f *File) usable(ctx context.Context, p dirgate.Principal, now time.Time) (dirgate.Principal, error) {
	reason := p.AccountStatus.Refusal(now)
	if reason == "" {
		return p, nil
	}
	f.log.WarnContext(ctx, "token refused: the account is disabled, locked out or expired", "account", p.GUID, "reason", reason)
	return dirgate.Principal{}, &dirgate.Error{Code: errUnknown.Code, Message: errUnknown.Message,
		Err: &dirgate.AccountRefusedError{GUID: p.GUID, Reason: reason}}
}

// Expire makes every cached principal for which match is true be resolved again on
// its next use (the change feed calls it when a caller's groups may have changed).
// The principal is kept for the stale fallback during a directory outage.
func (f *File) Expire(match func(dirgate.Principal) bool) {
	now := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.expiries++
	for k, c := range f.cache {
		if now.Before(c.expires) && match(c.p) {
			c.expires = now
			f.cache[k] = c
		}
	}
}

var _ dirgate.Authenticator = (*File)(nil)
