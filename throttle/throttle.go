// Package throttle bounds guessing at credentials (docs/auth.md, "Throttling"):
// rejected tokens and session ids per client address, password checks per address
// and account name and per address whatever the names, and password checks in
// progress. It counts through one failure-counter interface, Counter, with three
// implementations: in process (Local), shared by the replicas (the Redis one, which
// lives with the Redis-owning package, auth/session), and both together (Both). The
// HTTP layer (proxy/) makes one call per event and words the answer; the client's
// address is its business too.
package throttle

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/fielderr"
	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// Config bounds credential guessing, as the product does: from the SlowAfter-th
// failure within Window on, an address's failed authentications are answered later
// and later (Delay, doubling up to MaxDelay); with MaxFailures failures it gets 429
// until the oldest of them leaves the window. Password checks are bounded per
// address and account name (MaxFailures) and per address whatever the names
// (MaxClientSignInFailures). In process, memory is bounded by MaxClients addresses
// and MaxClients address and name pairs of MaxFailures timestamps each, and
// MaxClients addresses' sign-in tallies.
type Config struct {
	// SlowAfter is the failure count from which answers are delayed. 0 means 3.
	SlowAfter int
	// Delay is the first delay; each further failure doubles it. 0 means 250 ms.
	Delay time.Duration
	// MaxDelay caps the delay. 0 means 4 s.
	MaxDelay time.Duration
	// MaxFailures is how many failures an address may have in Window. 0 means 10.
	MaxFailures int
	// Window is the length of the window. 0 means one minute.
	Window time.Duration
	// MaxClients caps the addresses tracked in process, and apart from them the
	// address and name pairs; beyond it the one whose last failure is oldest is
	// forgotten. 0 means 10,000.
	MaxClients int
	// MaxClientSignInFailures is how many password checks from one address may
	// fail in Window, whatever the names tried; further sign-ins from it get 429
	// without a check. 0 means ClientSignInFailuresFactor × MaxFailures.
	MaxClientSignInFailures int
	// MaxSignIns bounds the password checks in progress at once, from all
	// addresses together; the excess gets 429. 0 means DefaultMaxSignIns.
	MaxSignIns int
	// MaxSignInsPerClient bounds the password checks in progress at once from one
	// address; the excess gets 429. 0 means DefaultMaxSignInsPerClient.
	MaxSignInsPerClient int
	// Shared, when set, counts unknown session ids and password checks across
	// replicas (*session.RedisFailures) beside the process: each such count is
	// kept in both (Both). Rejected tokens are counted in process only: checking a
	// token costs no Redis write. The window of Shared must be Window.
	Shared Counter
	// Logger receives, at debug level, the errors of Shared (which only lose the
	// shared count: the process's still holds). nil means slog.Default().
	Logger *slog.Logger
	// Now is the throttle's clock. nil means time.Now.
	Now func() time.Time
}

// Throttle defaults.
const (
	DefaultMaxFailures = 10
	DefaultWindow      = time.Minute
	DefaultMaxClients  = 10_000
	DefaultSlowAfter   = 3
	DefaultDelay       = 250 * time.Millisecond
	DefaultMaxDelay    = 4 * time.Second
	// ClientSignInFailuresFactor: an address may fail this many times
	// MaxFailures password checks in a window across all names. One name from one
	// address already has MaxFailures; five leave room for several people behind
	// one NAT address mistyping their passwords, while one password tried against
	// many names (spraying) is held to 50 names a minute by default.
	ClientSignInFailuresFactor = 5
	// DefaultMaxSignIns: each check in progress holds a connection of its own to
	// the directory (a bind), so this bounds what sign-ins can ask of the DC at
	// once, well below what a DC serves, and far above what people signing in by
	// hand need (a bind takes milliseconds).
	DefaultMaxSignIns = 32
	// DefaultMaxSignInsPerClient: a person signs in one request at a time; a few
	// leave room for several people behind one NAT address.
	DefaultMaxSignInsPerClient = 4
)

func (c Config) withDefaults() Config {
	if c.MaxFailures == 0 {
		c.MaxFailures = DefaultMaxFailures
	}
	if c.Window == 0 {
		c.Window = DefaultWindow
	}
	if c.MaxClients == 0 {
		c.MaxClients = DefaultMaxClients
	}
	if c.SlowAfter == 0 {
		c.SlowAfter = DefaultSlowAfter
	}
	if c.Delay == 0 {
		c.Delay = DefaultDelay
	}
	if c.MaxDelay == 0 {
		c.MaxDelay = DefaultMaxDelay
	}
	if c.MaxClientSignInFailures == 0 {
		c.MaxClientSignInFailures = ClientSignInFailuresFactor * c.MaxFailures
	}
	if c.MaxSignIns == 0 {
		c.MaxSignIns = DefaultMaxSignIns
	}
	if c.MaxSignInsPerClient == 0 {
		c.MaxSignInsPerClient = DefaultMaxSignInsPerClient
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate reports every problem of c at once, each a *fielderr.Error naming its
// field. A zero value takes its default; a negative one is refused. cmd/dirgate
// binds its auth-* and signin-max-concurrent* settings to MaxFailures, Window,
// MaxSignIns and MaxSignInsPerClient (docs/settings.md).
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) { errs = append(errs, fielderr.New(field, format, args...)) }
	for field, neg := range map[string]bool{"MaxFailures": c.MaxFailures < 0, "Window": c.Window < 0,
		"MaxSignIns": c.MaxSignIns < 0, "MaxSignInsPerClient": c.MaxSignInsPerClient < 0} {
		if neg {
			bad(field, "must be positive")
		}
	}
	if c.MaxFailures > 10_000 {
		bad("MaxFailures", "must be between 1 and 10000, got %d", c.MaxFailures)
	}
	for field, neg := range map[string]bool{"MaxClientSignInFailures": c.MaxClientSignInFailures < 0,
		"MaxClients": c.MaxClients < 0, "SlowAfter": c.SlowAfter < 0, "Delay": c.Delay < 0, "MaxDelay": c.MaxDelay < 0} {
		if neg {
			bad(field, "must not be negative")
		}
	}
	return fielderr.Join(errs...)
}

// Throttle judges authentication events against the bounds of its Config. Each
// kind of count is a Counter of its own: the process's alone, or the process's and
// the shared one together (Both).
type Throttle struct {
	cfg Config
	// tokens are rejected tokens per address, in process only; ids are unknown
	// session ids per address (the same local count as tokens'); pairs are
	// password checks per address and account name (signInKey); budgets are
	// password checks per address whatever the names (clientSignInKey).
	tokens, ids, pairs, budgets Counter
	gate                        *gate
}

// New returns a Throttle, or every problem of cfg at once.
func New(cfg Config) (*Throttle, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("throttle: %w", err)
	}
	cfg = cfg.withDefaults()
	l := NewLocal(cfg.Window, cfg.MaxClients)
	t := &Throttle{cfg: cfg, tokens: l.Addresses(), ids: l.Addresses(), pairs: l.Pairs(), budgets: l.Budgets(), gate: newGate(cfg)}
	if cfg.Shared != nil {
		t.ids, t.pairs, t.budgets = Both(t.ids, cfg.Shared), Both(t.pairs, cfg.Shared), Both(t.budgets, cfg.Shared)
	}
	return t, nil
}

// TokenFailed counts a rejected token from client and judges it in the same step:
// its answer is held (Hold) and, when client had already used up its failures in
// the window, refused (ThrottledAddress) until this failure's window, which it
// extends, lets client fail again. Judged apart from the counting, concurrent
// failures could all pass as not blocked.
func (t *Throttle) TokenFailed(ctx context.Context, client string) dirgate.Throttled {
	return t.failed(ctx, t.tokens, client)
}

// SessionIDFailed is TokenFailed for an unknown session id, which with Shared is
// counted across replicas too: the larger count holds the answer, and either
// refuses it.
func (t *Throttle) SessionIDFailed(ctx context.Context, client string) dirgate.Throttled {
	return t.failed(ctx, t.ids, client)
}

func (t *Throttle) failed(ctx context.Context, c Counter, client string) dirgate.Throttled {
	n, wait, blocked, err := c.Fail(ctx, client, t.cfg.MaxFailures, t.cfg.Now())
	t.logShared(ctx, err)
	v := dirgate.Throttled{Hold: t.delay(n)}
	if blocked {
		v.Refused, v.RetryAfter = dirgate.ThrottledAddress, wait
	}
	return v
}

// StartSignIn judges a password check of name from client before it is made. A
// pair (address and name) or an address that has used up its failed checks is
// refused without a check: checking anyway would answer whether the password is
// right, an oracle without bound. Otherwise the check takes a place among those in
// progress (per address and in all) and is counted, against the pair and against
// the address whatever the name, before it is made: counted after, a burst would
// pass the block check all at once, every request of it reaching a bind; counted
// first, at most MaxFailures checks of one name, and MaxClientSignInFailures of
// all names, from one address reach the directory in a window, whatever the
// concurrency. When it is not refused, finish must follow with the check's outcome
// and returns how long to hold its answer.
func (t *Throttle) StartSignIn(ctx context.Context, client string, name dirgate.SignInName) (finish func(context.Context, error) time.Duration, v dirgate.Throttled) {
	key, budget := signInKey(client, name), clientSignInKey(client)
	now := t.cfg.Now()
	refuse := func(b dirgate.ThrottleBound, wait time.Duration) (func(context.Context, error) time.Duration, dirgate.Throttled) {
		return nil, dirgate.Throttled{Refused: b, RetryAfter: wait}
	}
	wait, blocked, err := t.budgets.Blocked(ctx, budget, t.cfg.MaxClientSignInFailures, now)
	t.logShared(ctx, err)
	if blocked {
		return refuse(dirgate.ThrottledAddressSignIns, wait)
	}
	wait, blocked, err = t.pairs.Blocked(ctx, key, t.cfg.MaxFailures, now)
	t.logShared(ctx, err)
	if blocked {
		return refuse(dirgate.ThrottledAccount, wait)
	}
	if !t.gate.enter(client) {
		// A check takes milliseconds: a second is long enough to find a place.
		return refuse(dirgate.ThrottledInProgress, time.Second)
	}
	n, wait, givePair, err := t.pairs.Take(ctx, key, t.cfg.MaxFailures, now)
	t.logShared(ctx, err)
	if givePair == nil {
		t.gate.leave(client)
		return refuse(dirgate.ThrottledAccount, wait)
	}
	_, wait, giveBudget, err := t.budgets.Take(ctx, budget, t.cfg.MaxClientSignInFailures, now)
	t.logShared(ctx, err)
	if giveBudget == nil {
		t.logShared(ctx, givePair(ctx))
		t.gate.leave(client)
		return refuse(dirgate.ThrottledAddressSignIns, wait)
	}
	// A success gives the attempt back. Anything else keeps it as a failure: a
	// refusal, and an error too, since a bind may have reached the directory before
	// it (a timeout, a client that hung up): giving those back would let a client
	// that cancels its requests bind without bound. A refusal's answer is held as a
	// bad token's, by the pair's count.
	return func(ctx context.Context, err error) time.Duration {
		t.gate.leave(client)
		switch {
		case err == nil:
			t.logShared(ctx, givePair(ctx))
			t.logShared(ctx, giveBudget(ctx))
		case dirgate.IsRefusal(err):
			return t.delay(n)
		}
		return 0
	}, dirgate.Throttled{}
}

func (t *Throttle) logShared(ctx context.Context, err error) {
	if err != nil {
		t.cfg.Logger.DebugContext(ctx, "shared sign-in failure count unavailable", "err", err.Error())
	}
}

// delay is how long to hold the answer to a key's failure when it has n in the
// window: nothing before SlowAfter, then Delay doubling with each failure, up to
// MaxDelay.
func (t *Throttle) delay(n int) time.Duration {
	n -= t.cfg.SlowAfter
	if n < 0 {
		return 0
	}
	d := t.cfg.Delay
	for ; n > 0 && d < t.cfg.MaxDelay; n-- {
		d *= 2
	}
	return min(d, t.cfg.MaxDelay)
}

// signInKey is what password checks are counted by: the client's address and the
// account name's user part, folded (foldName). Failures for one account from an
// address never refuse another account's correct password from that address
// (behind an ingress or a NAT, one address is many people), while guesses at one
// account from one address stay bounded. The domain part is left out so that
// user@domain and DOMAIN\user share a count where the UPN prefix is the
// sAMAccountName. The folded name is hashed: the key's length stays bounded however
// far folding expands a name. A client address holds no space, so the key is
// unambiguous. The shared count's Redis key is a hash of this string, so changing
// it would reset the counts across a rolling upgrade.
func signInKey(client string, name dirgate.SignInName) string {
	sum := sha256.Sum256([]byte(foldName(name.User)))
	return client + " " + hex.EncodeToString(sum[:16])
}

// clientSignInKey is the count of an address's password checks, whatever the
// names. It never equals a signInKey (no name folds to NUL, and the hash is hex)
// nor an address.
func clientSignInKey(client string) string {
	return client + " \x00"
}

// foldName folds an account name as the directory compares names, or more
// broadly: AD matches sAMAccountName and userPrincipalName without regard to case
// or to the width of a character, so "ＡＬＩＣＥ" (full width) names the same
// account as "alice". NFKC maps full- and half-width forms (and other
// compatibility characters) to their usual ones, and Unicode case folding then
// ignores case beyond ASCII. Folding more than the directory does only makes two
// names share one count, which can refuse sooner but never lets a guess through.
func foldName(user string) string {
	// A Caser keeps state: one per call.
	return cases.Fold().String(norm.NFKC.String(user))
}
