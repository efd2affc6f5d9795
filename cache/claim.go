package cache

// Fill claims: one instance fills a listing that several miss at once.
//
// An instance fills a missed entry once however many of its requests miss it
// (singleflight, fill.go), but instances sharing Redis that miss it together (after
// an invalidation, each instance's next request for the listing) would each read the
// directory. Before filling a listing, an instance claims it in Redis (SET NX, for
// at most FillWait). An instance that finds another's claim polls the store for the
// entry that fill writes and serves it as a hit once it is there and valid (its
// version tokens current, as for any entry read from the store); it fills the
// listing itself when the claim ends without such an entry (the fill failed, or
// could not be stored because a removal came in between) or when FillWait has
// passed (the claimer stopped or is slow). A claim is deleted when its fill ends.
// A claim holds no listing, only an instance's random name: a Redis writer who
// forges one makes instances wait at most FillWait before they read the directory.

import (
	"context"
	"time"
)

// claimPoll is how often an instance waiting on another's fill reads the store.
const claimPoll = 25 * time.Millisecond

// claimFill claims req's fill for this instance. It returns the entry another
// instance's fill stored, as a hit, when it came within FillWait; otherwise nil,
// and whether this instance holds the claim (releaseClaim after the fill). This
// instance's concurrent misses of req claim and wait once (singleflight); those
// that joined check the entry's tokens again, as joiners of a fill do (fill.go).
func (c *Cache) claimFill(ctx context.Context, req request, stale *entry, rd reading) (hit *entry, claimed bool) {
	if *c.cfg.FillWait <= 0 || req.root == "" || !c.store.shared() || !rd.usable {
		return nil, false // no peers, an identifier resolution (cheap to read), or the store is bypassed
	}
	type result struct {
		hit     *entry
		claimed bool
	}
	v, _, shared := c.flights.Do("claim|"+req.key, func() (any, error) {
		hit, claimed := c.awaitClaim(ctx, req, stale, rd)
		return result{hit, claimed}, nil
	})
	r := v.(result)
	if r.hit != nil && shared {
		if ok, err := c.valid(ctx, r.hit); err != nil || !ok {
			return nil, r.claimed
		}
	}
	return r.hit, r.claimed
}

// awaitClaim is claimFill for one request of this instance.
func (c *Cache) awaitClaim(ctx context.Context, req request, stale *entry, rd reading) (hit *entry, claimed bool) {
	key := c.keys.fillClaim(req.key)
	var holder string
	if err := c.op(ctx, false, func(ctx context.Context) (err error) {
		holder, err = c.store.getOrSet(ctx, key, c.claimID, *c.cfg.FillWait)
		return err
	}); err != nil || holder == c.claimID {
		return nil, err == nil
	}
	c.metrics.claimWaits.Add(ctx, 1)
	c.claimWaitCount.Add(1)
	deadline := rd.now.Add(*c.cfg.FillWait)
	t := time.NewTimer(claimPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, false
		case <-t.C:
		}
		rd.now = c.now()
		hit, _, err := c.fromStore(ctx, req, stale, rd)
		if err != nil || hit != nil || !rd.now.Before(deadline) {
			return hit, false
		}
		var vals []string
		if err := c.op(ctx, false, func(ctx context.Context) (err error) {
			vals, err = c.store.get(ctx, key)
			return err
		}); err != nil || vals[0] != holder {
			return nil, false // the claimer's fill ended without a valid entry
		}
		t.Reset(claimPoll)
	}
}

// releaseClaim deletes this instance's claim on req's fill, so that instances
// waiting on it stop at once if the fill stored nothing.
func (c *Cache) releaseClaim(ctx context.Context, req request) {
	key := c.keys.fillClaim(req.key)
	_ = c.op(ctx, false, func(ctx context.Context) error { return c.store.delIf(ctx, key, c.claimID) })
}
