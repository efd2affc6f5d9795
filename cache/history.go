package cache

import (
	"context"
	"errors"
	"time"
)

// The cache's side of a Redis failover (docs/cache.md, "Redis failovers"). Redis
// replicates asynchronously: a promoted replica may lack the version tokens and
// announcements its predecessor acknowledged, so entries in Redis and trust in the
// first level that those writes had ended could look valid again. When History says
// that Redis's history changed, the cache stops using Redis (every request is served
// from the directory, nothing is stored) until it has replaced the epoch's token,
// which every entry kept in Redis records (follow.go), and announced it: every entry
// filled before the change is then refused, on every instance.

// History tells the cache when Redis's history changed: redisconn.History, shared
// with the client the cache uses.
type History interface {
	// Gen counts the changes seen so far; it changes before any reply of a promoted
	// primary is returned.
	Gen() uint64
	// Subscribe returns a channel that receives a value after each change.
	Subscribe() <-chan struct{}
}

// errHistoryChanged fails a store operation during which Redis's history changed,
// or sent before the cache had handled a change: its reply may come from a history
// that lost writes.
var errHistoryChanged = errors.New("cache: Redis's history changed (a failover); the cache is bypassed until it is handled")

// historyGen is the History's count, 0 without one.
func (c *Cache) historyGen() uint64 {
	if c.cfg.History == nil {
		return 0
	}
	return c.cfg.History.Gen()
}

// settled reports whether every history change seen has been handled.
func (c *Cache) settled() bool { return c.settledGen.Load() == c.historyGen() }

// followHistory handles each history change until the cache closes, retrying every
// RetryInterval while Redis does not take it.
func (c *Cache) followHistory(changed <-chan struct{}) {
	defer close(c.historyDone)
	for {
		select {
		case <-c.stop:
			return
		case <-changed:
		}
		for !c.settle() {
			select {
			case <-c.stop:
				return
			case <-time.After(c.cfg.RetryInterval):
			}
		}
	}
}

// settle distrusts everything kept from before the change (the first level's trust,
// identifier resolutions, every entry in Redis through the epoch's token) and
// reports whether it is done. A change seen meanwhile makes it start again.
func (c *Cache) settle() bool {
	g := c.historyGen()
	if c.settledGen.Load() == g {
		return true
	}
	c.lease.drop()
	c.DropLookups(nil, true)
	c.cfg.Logger.Warn("cache: Redis's history changed; serving from the directory until every entry filled before is invalidated")
	if err := c.invalidate(context.Background(), false, epoch, anyMembershipChange); err != nil {
		c.cfg.Logger.Warn("cache: invalidating every entry after Redis's history changed failed; retrying", "error", err)
		return false
	}
	if c.historyGen() != g {
		return false
	}
	c.settledGen.Store(g)
	c.metrics.historySettled.Add(context.Background(), 1)
	c.cfg.Logger.Info("cache: every entry filled before Redis's history changed is invalidated; the cache is used again")
	return true
}
