package proxy

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// ThrottleConfig bounds token guessing, as the product does: from the SlowAfter-th
// failure within Window on, an address's failed authentications are answered later
// and later (Delay, doubling up to MaxDelay); with MaxFailures failures it gets 429
// until the oldest of them leaves the window. Password checks are bounded per
// address and account name (MaxFailures) and per address whatever the names
// (MaxClientSignInFailures). Memory is bounded by MaxClients addresses and
// MaxClients address and name pairs of MaxFailures timestamps each, and MaxClients
// addresses' sign-in tallies.
type ThrottleConfig struct {
	// SlowAfter is the failure count from which answers are delayed. 0 means 3.
	SlowAfter int
	// Delay is the first delay; each further failure doubles it. 0 means 250 ms.
	Delay time.Duration
	// MaxDelay caps the delay. 0 means 4 s.
	MaxDelay time.Duration
	// MaxFailures is how many failures an address may have in Window. 0 means 10.
	MaxFailures int
	// Window is the length of the sliding window. 0 means one minute.
	Window time.Duration
	// MaxClients caps the addresses tracked, and apart from them the address and
	// name pairs; beyond it the one whose last failure is oldest is forgotten. 0
	// means 10,000.
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

func (c ThrottleConfig) withDefaults() ThrottleConfig {
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
	return c
}

func (c ThrottleConfig) validate() []error {
	var errs []error
	if c.MaxFailures < 0 || c.MaxFailures > 10_000 {
		errs = append(errs, fmt.Errorf("proxy: Throttle.MaxFailures %d is outside 1..10000", c.MaxFailures))
	}
	if c.MaxClientSignInFailures < 0 {
		errs = append(errs, errors.New("proxy: Throttle.MaxClientSignInFailures is negative"))
	}
	if c.Window < 0 {
		errs = append(errs, errors.New("proxy: Throttle.Window is negative"))
	}
	if c.MaxClients < 0 {
		errs = append(errs, errors.New("proxy: Throttle.MaxClients is negative"))
	}
	if c.SlowAfter < 0 || c.Delay < 0 || c.MaxDelay < 0 {
		errs = append(errs, errors.New("proxy: Throttle.SlowAfter, Delay and MaxDelay must not be negative"))
	}
	if c.MaxSignIns < 0 || c.MaxSignInsPerClient < 0 {
		errs = append(errs, errors.New("proxy: Throttle.MaxSignIns and MaxSignInsPerClient must not be negative"))
	}
	return errs
}

// throttle counts failed authentications per client address in a sliding window,
// and password checks per address and account name (signInKey) and per address
// whatever the name. Each is in a golang-lru simplelru of its own, all under the
// throttle's one lock (every operation reads and changes its counts as one step),
// so that many names from one address push out only other names' counts, never an
// address's count of bad tokens or of failed sign-ins. In each, the most recently
// used is the key that failed (or reserved an attempt) last, so that beyond
// MaxClients the one whose last failure is oldest is forgotten. Looking a key up to
// judge it (signInBlocked, confirm, releaseSignIn) does not count as a use.
type throttle struct {
	cfg ThrottleConfig

	mu sync.Mutex
	// clients are the rejected tokens and session ids per address.
	clients *simplelru.LRU[string, *failures]
	// pairs are the password checks per address and account name.
	pairs *simplelru.LRU[string, *failures]
	// signIns are the password checks per address, whatever the names.
	signIns *simplelru.LRU[string, *tally]
}

// failures are one key's failure times within the window, oldest first.
type failures struct {
	times []time.Time
}

// tally is an address's failed password checks, whatever the names, in a fixed
// window that starts at its first one (as the shared count in Redis does): one
// count and one time per address, however large MaxClientSignInFailures is.
type tally struct {
	n     int
	start time.Time
}

func newThrottle(cfg ThrottleConfig) *throttle {
	size := max(cfg.MaxClients, 1)
	clients, err := simplelru.NewLRU[string, *failures](size, nil)
	if err != nil {
		panic(err) // only for a size below 1, excluded above
	}
	pairs, _ := simplelru.NewLRU[string, *failures](size, nil)
	signIns, _ := simplelru.NewLRU[string, *tally](size, nil)
	return &throttle{cfg: cfg, clients: clients, pairs: pairs, signIns: signIns}
}

// blockedIn reports whether key has used up its failures in lru and, if so, how
// long until the oldest one leaves the window. The caller holds the lock.
func (t *throttle) blockedIn(lru *simplelru.LRU[string, *failures], key string, now time.Time) (time.Duration, bool) {
	f, ok := lru.Peek(key)
	if !ok {
		return 0, false
	}
	t.prune(f, now)
	switch {
	case len(f.times) == 0:
		lru.Remove(key)
		return 0, false
	case len(f.times) < t.cfg.MaxFailures:
		return 0, false
	}
	return f.times[0].Add(t.cfg.Window).Sub(now), true
}

// failJudged records a failed authentication by addr at now and returns how long
// to hold its answer (hold: nothing before SlowAfter failures in the window, then
// Delay doubling with each failure, up to MaxDelay). It also reports, in the same
// step, whether addr had already used up its failures before this one (wasBlocked)
// and then how long until this failure's window, which it extends, lets addr fail
// again (wait). Judged apart from the recording, concurrent failures could all
// pass as not blocked.
func (t *throttle) failJudged(addr string, now time.Time) (hold, wait time.Duration, wasBlocked bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := entry(t.clients, addr)
	t.prune(f, now)
	wasBlocked = len(f.times) >= t.cfg.MaxFailures
	f.times = append(f.times, now)
	// Only the newest MaxFailures matter.
	if n := len(f.times) - t.cfg.MaxFailures; n > 0 {
		f.times = append(f.times[:0], f.times[n:]...)
	}
	if len(f.times) >= t.cfg.MaxFailures {
		wait = min(f.times[0].Add(t.cfg.Window).Sub(now), t.cfg.Window)
	}
	return t.delay(len(f.times)), wait, wasBlocked
}

// reservePair counts an attempt at key (an address and account name) at now
// before it is judged, so that however many arrive at once at most MaxFailures are
// judged in a window: it reports how long key must wait when its failures and
// attempts in progress already fill the window, and otherwise records the attempt
// as a failure. The caller then either keeps it (confirm: the attempt failed) or
// gives it back (releaseSignIn: it succeeded, or was never judged).
func (t *throttle) reservePair(key string, now time.Time) (time.Duration, bool) {
	f := entry(t.pairs, key)
	t.prune(f, now)
	if len(f.times) >= t.cfg.MaxFailures {
		// Capped at the window: concurrent requests take their times before the
		// lock, so the oldest recorded may be later than now.
		return min(f.times[0].Add(t.cfg.Window).Sub(now), t.cfg.Window), false
	}
	f.times = append(f.times, now)
	return 0, true
}

// reserveSignIn is reservePair, under the lock, for a password check of key from
// client, which also takes one of client's MaxClientSignInFailures, whatever the
// name: an address that has used those up (clientBlocked) is refused whatever name
// it tries, so that trying one password against many names stays bounded too.
// Both counts are judged and taken as one step.
func (t *throttle) reserveSignIn(client, key string, now time.Time) (wait time.Duration, clientBlocked, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if v := t.tallyOf(client, now); v != nil && v.n >= t.cfg.MaxClientSignInFailures {
		return min(v.start.Add(t.cfg.Window).Sub(now), t.cfg.Window), true, false
	}
	if wait, ok := t.reservePair(key, now); !ok {
		return wait, false, false
	}
	v, ok := t.signIns.Get(client)
	if !ok || v.n == 0 {
		v = &tally{start: now}
		t.signIns.Add(client, v)
	}
	v.n++
	return 0, false, true
}

// signInBlocked reports, as blocked does, whether client has used up its failed
// password checks (clientBlocked), or client and the name of key theirs.
func (t *throttle) signInBlocked(client, key string, now time.Time) (wait time.Duration, clientBlocked, blocked bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if v := t.tallyOf(client, now); v != nil && v.n >= t.cfg.MaxClientSignInFailures {
		return v.start.Add(t.cfg.Window).Sub(now), true, true
	}
	wait, blocked = t.blockedIn(t.pairs, key, now)
	return wait, false, blocked
}

// tallyOf returns client's tally in the window running at now, nil if none.
func (t *throttle) tallyOf(client string, now time.Time) *tally {
	v, ok := t.signIns.Peek(client)
	if !ok {
		return nil
	}
	if !now.Before(v.start.Add(t.cfg.Window)) {
		t.signIns.Remove(client)
		return nil
	}
	return v
}

// confirm keeps a reserved attempt as a failure and returns how long to hold its
// answer, as failJudged does.
func (t *throttle) confirm(key string, now time.Time) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	f, ok := t.pairs.Peek(key)
	if !ok {
		return 0 // forgotten meanwhile (MaxClients)
	}
	t.prune(f, now)
	return t.delay(len(f.times))
}

// releasePair gives back the attempt that reservePair recorded at at. The caller
// holds the lock.
func (t *throttle) releasePair(key string, at time.Time) {
	f, ok := t.pairs.Peek(key)
	if !ok {
		return
	}
	for i := len(f.times) - 1; i >= 0; i-- {
		if f.times[i].Equal(at) {
			f.times = append(f.times[:i], f.times[i+1:]...)
			break
		}
	}
	if len(f.times) == 0 {
		t.pairs.Remove(key)
	}
}

// releaseSignIn gives back what reserveSignIn took at at: the pair's attempt, and
// client's count unless its window has ended since.
func (t *throttle) releaseSignIn(client, key string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.releasePair(key, at)
	if v, ok := t.signIns.Peek(client); ok && !at.Before(v.start) && v.n > 0 {
		v.n--
	}
}

// entry returns key's failures in lru, created if needed, as the most recently
// used; a new key beyond MaxClients evicts the least recently used.
func entry(lru *simplelru.LRU[string, *failures], key string) *failures {
	if f, ok := lru.Get(key); ok {
		return f
	}
	f := &failures{}
	lru.Add(key, f)
	return f
}

func (t *throttle) delay(failures int) time.Duration {
	n := failures - t.cfg.SlowAfter
	if n < 0 {
		return 0
	}
	d := t.cfg.Delay
	for ; n > 0 && d < t.cfg.MaxDelay; n-- {
		d *= 2
	}
	return min(d, t.cfg.MaxDelay)
}

// prune drops the failures that have left the window.
func (t *throttle) prune(f *failures, now time.Time) {
	i := 0
	for i < len(f.times) && !f.times[i].Add(t.cfg.Window).After(now) {
		i++
	}
	if i > 0 {
		f.times = append(f.times[:0], f.times[i:]...)
	}
}

// retryAfterSeconds renders a wait as Retry-After seconds, rounded up: a client that
// waits that long is no longer blocked.
func retryAfterSeconds(d time.Duration) int {
	s := int((d + time.Second - 1) / time.Second)
	return max(s, 1)
}

// remoteAddr is the default client address: the connection's peer, an IPv6 peer by
// its /64 since one host commonly holds a whole /64.
func remoteAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	return clientKey(a)
}

// clientKey names an address for the throttle: IPv4 as it is, IPv6 by its /64 (one
// host usually owns a whole /64).
func clientKey(a netip.Addr) string {
	if a = a.Unmap(); a.Is6() {
		p, _ := a.WithZone("").Prefix(64)
		return p.String()
	}
	return a.String()
}

// ForwardedClientAddr returns a Config.ClientAddr for a gateway behind proxies: when
// the connection comes from one of trusted, the client is the right-most address of
// X-Forwarded-For that is not itself trusted (the left-most entries are whatever the
// client chose to send). Connections from anywhere else are named by their own
// address, so an untrusted client cannot pick its throttle key.
func ForwardedClientAddr(trusted []netip.Prefix) func(*http.Request) string {
	isTrusted := func(a netip.Addr) bool {
		for _, p := range trusted {
			if p.Contains(a.Unmap()) {
				return true
			}
		}
		return false
	}
	return func(r *http.Request) string {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			host = r.RemoteAddr
		}
		peer, err := netip.ParseAddr(host)
		if err != nil || !isTrusted(peer) {
			return remoteAddr(r)
		}
		hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
		for i := len(hops) - 1; i >= 0; i-- {
			a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
			if err != nil {
				break // a malformed hop: stop at the last proxy we trust
			}
			if !isTrusted(a) {
				return clientKey(a)
			}
		}
		return clientKey(peer)
	}
}
