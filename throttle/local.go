package throttle

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// Local counts failures in this process, in three tables bounded apart: addresses
// (rejected tokens and session ids), address and name pairs, and addresses'
// password checks whatever the names. Each is a golang-lru simplelru under the
// one lock, so that many names from one address push out only other pairs, never
// an address's count of bad tokens or of failed sign-ins. In each, the most
// recently used is the key that failed (or took an attempt) last, so that beyond
// MaxClients the one whose last failure is oldest is forgotten. Judging a key
// (Blocked) or giving an attempt back does not count as a use.
type Local struct {
	window time.Duration

	mu        sync.Mutex
	addresses *simplelru.LRU[string, *failures]
	pairs     *simplelru.LRU[string, *failures]
	budgets   *simplelru.LRU[string, *tally]
}

// failures are one key's failure times within the window, oldest first: a sliding
// window.
type failures struct {
	times []time.Time
}

// tally is an address's failed password checks, whatever the names, in a fixed
// window that starts at its first one (as the shared count in Redis does): one
// count and one time per address, however large the limit is.
type tally struct {
	n     int
	start time.Time
}

// NewLocal counts over window, keeping at most maxClients keys in each table
// (at least one).
func NewLocal(window time.Duration, maxClients int) *Local {
	size := max(maxClients, 1)
	addresses, err := simplelru.NewLRU[string, *failures](size, nil)
	if err != nil {
		panic(err) // only for a size below 1, excluded above
	}
	pairs, _ := simplelru.NewLRU[string, *failures](size, nil)
	budgets, _ := simplelru.NewLRU[string, *tally](size, nil)
	return &Local{window: window, addresses: addresses, pairs: pairs, budgets: budgets}
}

// Addresses is the table of client addresses, in sliding windows.
func (l *Local) Addresses() Counter { return sliding{l, l.addresses} }

// Pairs is the table of address and name pairs, in sliding windows.
func (l *Local) Pairs() Counter { return sliding{l, l.pairs} }

// Budgets is the table of addresses' password checks whatever the names, in
// fixed windows.
func (l *Local) Budgets() Counter { return fixed{l} }

// sliding counts in one of Local's tables of failure times.
type sliding struct {
	l   *Local
	lru *simplelru.LRU[string, *failures]
}

// Fail records the failure; only the newest limit times are kept, and n is their
// number.
func (s sliding) Fail(_ context.Context, key string, limit int, now time.Time) (n int, wait time.Duration, blocked bool, _ error) {
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	f := entry(s.lru, key)
	s.l.prune(f, now)
	blocked = len(f.times) >= limit
	f.times = append(f.times, now)
	if n := len(f.times) - limit; n > 0 {
		f.times = append(f.times[:0], f.times[n:]...)
	}
	if len(f.times) >= limit {
		wait = min(f.times[0].Add(s.l.window).Sub(now), s.l.window)
	}
	return len(f.times), wait, blocked, nil
}

// Take records the attempt as a failure unless the failures and attempts in
// progress already fill the window.
func (s sliding) Take(_ context.Context, key string, limit int, now time.Time) (int, time.Duration, func(context.Context) error, error) {
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	f := entry(s.lru, key)
	s.l.prune(f, now)
	if len(f.times) >= limit {
		// Capped at the window: concurrent requests take their times before the
		// lock, so the oldest recorded may be later than now.
		return len(f.times), min(f.times[0].Add(s.l.window).Sub(now), s.l.window), nil, nil
	}
	f.times = append(f.times, now)
	return len(f.times), 0, func(context.Context) error { s.giveBack(key, now); return nil }, nil
}

// giveBack removes the attempt Take recorded at at.
func (s sliding) giveBack(key string, at time.Time) {
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	f, ok := s.lru.Peek(key)
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
		s.lru.Remove(key)
	}
}

// Blocked waits, when key is blocked, until its oldest failure leaves the window.
func (s sliding) Blocked(_ context.Context, key string, limit int, now time.Time) (time.Duration, bool, error) {
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	f, ok := s.lru.Peek(key)
	if !ok {
		return 0, false, nil
	}
	s.l.prune(f, now)
	switch {
	case len(f.times) == 0:
		s.lru.Remove(key)
		return 0, false, nil
	case len(f.times) < limit:
		return 0, false, nil
	}
	return f.times[0].Add(s.l.window).Sub(now), true, nil
}

// fixed counts in Local's tallies.
type fixed struct{ l *Local }

// Fail counts the failure, in a window that starts with the key's first.
func (x fixed) Fail(_ context.Context, key string, limit int, now time.Time) (n int, wait time.Duration, blocked bool, _ error) {
	x.l.mu.Lock()
	defer x.l.mu.Unlock()
	v := x.l.tallyFor(key, now)
	blocked = v.n >= limit
	v.n++
	if v.n >= limit {
		wait = min(v.start.Add(x.l.window).Sub(now), x.l.window)
	}
	return v.n, wait, blocked, nil
}

// Take counts the attempt unless the window's count is full.
func (x fixed) Take(_ context.Context, key string, limit int, now time.Time) (int, time.Duration, func(context.Context) error, error) {
	x.l.mu.Lock()
	defer x.l.mu.Unlock()
	if v := x.l.tallyOf(key, now); v != nil && v.n >= limit {
		return v.n, min(v.start.Add(x.l.window).Sub(now), x.l.window), nil, nil
	}
	v := x.l.tallyFor(key, now)
	v.n++
	return v.n, 0, func(context.Context) error { x.giveBack(key, now); return nil }, nil
}

// giveBack takes back the attempt Take counted at at, unless its window has ended
// since.
func (x fixed) giveBack(key string, at time.Time) {
	x.l.mu.Lock()
	defer x.l.mu.Unlock()
	if v, ok := x.l.budgets.Peek(key); ok && !at.Before(v.start) && v.n > 0 {
		v.n--
	}
}

// Blocked waits, when key is blocked, until its window ends.
func (x fixed) Blocked(_ context.Context, key string, limit int, now time.Time) (time.Duration, bool, error) {
	x.l.mu.Lock()
	defer x.l.mu.Unlock()
	if v := x.l.tallyOf(key, now); v != nil && v.n >= limit {
		return v.start.Add(x.l.window).Sub(now), true, nil
	}
	return 0, false, nil
}

// tallyOf returns key's tally in the window running at now, nil if none. The
// caller holds the lock.
func (l *Local) tallyOf(key string, now time.Time) *tally {
	v, ok := l.budgets.Peek(key)
	if !ok {
		return nil
	}
	if !now.Before(v.start.Add(l.window)) {
		l.budgets.Remove(key)
		return nil
	}
	return v
}

// tallyFor returns key's tally as the most recently used, a new window starting at
// now when none runs or its count is 0. The caller holds the lock.
func (l *Local) tallyFor(key string, now time.Time) *tally {
	l.tallyOf(key, now) // drops an ended window
	v, ok := l.budgets.Get(key)
	if !ok || v.n == 0 {
		v = &tally{start: now}
		l.budgets.Add(key, v)
	}
	return v
}

// entry returns key's failures in lru, created if needed, as the most recently
// used; a new key beyond the table's size evicts the least recently used.
func entry(lru *simplelru.LRU[string, *failures], key string) *failures {
	if f, ok := lru.Get(key); ok {
		return f
	}
	f := &failures{}
	lru.Add(key, f)
	return f
}

// prune drops the failures that have left the window.
func (l *Local) prune(f *failures, now time.Time) {
	i := 0
	for i < len(f.times) && !f.times[i].Add(l.window).After(now) {
		i++
	}
	if i > 0 {
		f.times = append(f.times[:0], f.times[i:]...)
	}
}
