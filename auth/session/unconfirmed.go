package session

import (
	"context"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// maxRefused bounds the deletions a store keeps refusing, its own unconfirmed ones
// and those announced by others each: a Redis writer publishing junk fills the
// announced ones, never this store's own.
const maxRefused = 100_000

// refused is a set of record names that stay refused until their expiry, whatever
// Redis says.
type refused struct {
	mu sync.Mutex
	m  map[string]time.Time
}

// add keeps key until exp, and reports whether it was kept (false: full).
func (r *refused) add(key string, exp, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]time.Time{}
	}
	if old, ok := r.m[key]; ok {
		if exp.After(old) {
			r.m[key] = exp
		}
		return true
	}
	if len(r.m) >= maxRefused {
		for k, e := range r.m { // make room from what has expired
			if !now.Before(e) {
				delete(r.m, k)
			}
		}
		if len(r.m) >= maxRefused {
			return false
		}
	}
	r.m[key] = exp
	return true
}

func (r *refused) has(key string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	exp, ok := r.m[key]
	if ok && !now.Before(exp) {
		delete(r.m, key)
		return false
	}
	return ok
}

func (r *refused) remove(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, key)
}

// live returns the keys not yet expired.
func (r *refused) live(now time.Time) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.m))
	for k, e := range r.m {
		if now.Before(e) {
			out = append(out, k)
		} else {
			delete(r.m, k)
		}
	}
	return out
}

func (r *refused) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.m)
}

// deleteConfirmed deletes key, which must stay deleted until exp (its record's
// longest possible life). A deletion the replicas do not confirm is kept: refused
// here, announced to the other stores, deleted again by retry. Without a confirming
// backend it is a plain deletion.
func (s *Store) deleteConfirmed(ctx context.Context, key string, exp time.Time) error {
	cb, ok := s.backend.(confirmingBackend)
	if !ok {
		return s.backend.Del(ctx, key)
	}
	confirmed, err := cb.DelConfirmed(ctx, key)
	if err != nil {
		return err
	}
	if !confirmed {
		s.keepUnconfirmed(ctx, cb, key, exp)
	}
	return nil
}

// keepUnconfirmed refuses key here until exp, announces it and has it retried.
func (s *Store) keepUnconfirmed(ctx context.Context, cb confirmingBackend, key string, exp time.Time) {
	if !s.own.add(key, exp, s.now()) {
		s.log.WarnContext(ctx, "session store: too many unconfirmed deletions kept; this one is not retried", "bound", maxRefused)
	}
	if err := cb.Announce(ctx, key, exp); err != nil {
		s.log.WarnContext(ctx, "session store: announcing an unconfirmed deletion failed; other replicas learn of it when it is confirmed", "err", err)
	}
	s.log.WarnContext(ctx, "session store: Redis's replicas did not confirm a deletion in time; it is refused here, announced, and deleted again until confirmed",
		"kind", key[:1])
}

// isRefused reports whether key is a deletion this store, or another that
// announced it, has not seen confirmed.
func (s *Store) isRefused(key string) bool {
	now := s.now()
	return s.own.has(key, now) || s.announced.has(key, now)
}

// Run keeps the store's unconfirmed deletions until ctx ends: it takes in other
// stores' announcements, and deletes its own again every interval and at once after
// each value from changed (Redis's history changed), until a primary confirms them.
// It returns at once for a backend that does not confirm.
func (s *Store) Run(ctx context.Context, interval time.Duration, changed <-chan struct{}) {
	cb, ok := s.backend.(confirmingBackend)
	if !ok {
		return
	}
	ann := cb.Announcements(ctx)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case a, ok := <-ann:
			if !ok {
				ann = nil // closed with ctx
				continue
			}
			if !s.own.has(a.Key, s.now()) && !s.announced.add(a.Key, a.Expires, s.now()) {
				s.log.Warn("session store: too many announced deletions; one is not kept", "bound", maxRefused)
			}
		case <-t.C:
			s.retryUnconfirmed(ctx, cb)
		case <-changed:
			s.retryUnconfirmed(ctx, cb)
		}
	}
}

// retryUnconfirmed deletes each unconfirmed token again; a confirmed one is no
// longer kept. A session's record is only refused, never deleted again: an exchanged
// session's record is written back, naming its token for EndSession.
func (s *Store) retryUnconfirmed(ctx context.Context, cb confirmingBackend) {
	for _, key := range s.own.live(s.now()) {
		if !strings.HasPrefix(key, kindToken+":") {
			continue
		}
		confirmed, err := cb.DelConfirmed(ctx, key)
		if err == nil && confirmed {
			s.own.remove(key)
			s.log.InfoContext(ctx, "session store: an unconfirmed deletion is confirmed", "kind", key[:1])
		}
	}
}

// confirmationCounter counts deletions by whether the replicas confirmed them.
type confirmationCounter struct {
	once        sync.Once
	counter     metric.Int64Counter
	yes, no     metric.AddOption
	initialized bool
}

func (c *confirmationCounter) init() {
	c.once.Do(func() {
		m := otel.Meter("github.com/dirgate/dirgate/auth/session")
		c.counter, _ = m.Int64Counter("dirgate_session_deletions_confirmed",
			metric.WithDescription("Revocations, ended sessions and exchanges that waited for Redis's replicas, by outcome: confirmed, or unconfirmed (kept and retried)."))
		c.yes = metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", "confirmed")))
		c.no = metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", "unconfirmed")))
		c.counter.Add(context.Background(), 0, c.yes)
		c.counter.Add(context.Background(), 0, c.no)
	})
}

func (c *confirmationCounter) Add(confirmed bool) {
	c.init()
	if confirmed {
		c.counter.Add(context.Background(), 1, c.yes)
	} else {
		c.counter.Add(context.Background(), 1, c.no)
	}
}
