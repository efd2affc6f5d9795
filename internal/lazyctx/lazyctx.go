// Package lazyctx gives a request its deadline without paying for a timer until
// something waits on it.
//
// context.WithTimeout arms a timer and registers the child with its parent for
// every request; on a cached listing, which never waits on anything, that was about
// 3 µs of a request's CPU under load (docs/benchmarks.md). The context here answers
// Deadline and Err from the clock, and makes the real context.WithDeadline only when
// Done is first called (a select on an upstream call, a child context).
package lazyctx

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// WithDeadline is context.WithDeadline(parent, d), made lazily. The returned cancel
// must be called, as with the standard one.
func WithDeadline(parent context.Context, d time.Time) (context.Context, context.CancelFunc) {
	if pd, ok := parent.Deadline(); ok && !pd.After(d) {
		return context.WithCancel(parent) // the parent's deadline comes first: nothing to add
	}
	c := &lazy{parent: parent, deadline: d}
	return c, c.cancel
}

// WithTimeout is WithDeadline(parent, time.Now().Add(d)).
func WithTimeout(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return WithDeadline(parent, time.Now().Add(d))
}

type lazy struct {
	parent   context.Context
	deadline time.Time

	mu       sync.Mutex
	canceled atomic.Bool           // cancel was called (set under mu)
	real     atomic.Pointer[state] // set once, under mu
}

// state is the standard context standing in once something waits.
type state struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// made returns the standard context, making it on first use: a deadline context,
// or one already canceled when cancel came first.
func (c *lazy) made() context.Context {
	if s := c.real.Load(); s != nil {
		return s.ctx
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.real.Load(); s != nil {
		return s.ctx
	}
	s := &state{}
	if c.canceled.Load() {
		s.ctx, s.cancel = context.WithCancel(c.parent)
		s.cancel()
	} else {
		s.ctx, s.cancel = context.WithDeadline(c.parent, c.deadline)
	}
	c.real.Store(s)
	return s.ctx
}

func (c *lazy) cancel() {
	c.mu.Lock()
	c.canceled.Store(true)
	s := c.real.Load()
	c.mu.Unlock()
	if s != nil {
		s.cancel()
	}
}

func (c *lazy) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *lazy) Done() <-chan struct{} { return c.made().Done() }

// Err is nil while the parent lives, the deadline has not passed and cancel was not
// called; otherwise it is the standard context's error (which Done then agrees with).
func (c *lazy) Err() error {
	if s := c.real.Load(); s != nil {
		return s.ctx.Err()
	}
	if !c.canceled.Load() && c.parent.Err() == nil && time.Now().Before(c.deadline) {
		return nil
	}
	return c.made().Err()
}

// Value answers from the standard context once it exists, so that a child context
// finds its cancellation there (context's own propagation then needs no goroutine).
func (c *lazy) Value(key any) any {
	if s := c.real.Load(); s != nil {
		return s.ctx.Value(key)
	}
	return c.parent.Value(key)
}

func (c *lazy) String() string { return "lazyctx.WithDeadline" }
