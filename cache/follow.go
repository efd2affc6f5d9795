package cache

import (
	"context"

	"github.com/dirgate/dirgate"
)

// The cache's side of the change feed (changefeed/, docs/cache.md, "Changes made in
// the directory"): what the feed may ask of the cache, and how followed entries are
// filled. *Cache is the feed's changefeed.Cache.

// epoch is a pseudo-group whose token every entry records while the cache is
// followed or shared through Redis: replacing it invalidates everything (a resync
// of the change feed, a change of Redis's history: history.go).
const epoch = "00000000-0000-0000-0000-000000000001"

// Follow makes every entry filled from now on record the epoch's token, and
// identifier resolutions be served from the first level without reading tokens: the
// feed drops them there (DropLookups).
func (c *Cache) Follow() { c.followed.Store(true) }

// following reports whether entries must record the epoch.
func (c *Cache) following() bool { return c.followed.Load() }

// tracksEpoch reports whether entries must record the epoch: while followed, and
// always with Redis, whose history may change.
func (c *Cache) tracksEpoch() bool { return c.following() || c.store.shared() }

// trackFeed records the epoch token when entries must.
func (c *Cache) trackFeed(ctx context.Context, rec *recorder) {
	if c.tracksEpoch() {
		c.track(ctx, rec, epoch)
	}
}

// Invalidate replaces the tokens of the objects and groups named and the one every
// listing that shows memberships records (a change made in the directory), without
// waiting for other instances' leases: the feed's event reaches them.
func (c *Cache) Invalidate(ctx context.Context, guids []string) error {
	return c.invalidate(ctx, false, append([]string{anyMembershipChange}, guids...)...)
}

// InvalidateAll replaces the epoch's token: every entry filled while followed.
func (c *Cache) InvalidateAll(ctx context.Context) error {
	return c.invalidate(ctx, false, epoch, anyMembershipChange)
}

// Unfilled reports that nothing this instance holds can be stale: its cache is in
// process and it has filled nothing yet.
func (c *Cache) Unfilled() bool { return !c.store.shared() && c.l1.len() == 0 }

// DropLookups removes from the first level the identifier resolutions of guids (all
// of them with all). They are the only entries neither checked against tokens nor
// held to the leases.
func (c *Cache) DropLookups(guids []string, all bool) {
	set := make(map[string]bool, len(guids))
	for _, g := range guids {
		set[g] = true
	}
	c.dropMu.Lock()
	defer c.dropMu.Unlock()
	c.dropGen.Add(1)
	c.l1.drop(func(key string, e *entry) bool {
		if !c.keys.isLookup(key) {
			return false
		}
		objs := e.objs
		return all || len(objs) == 1 && set[objs[0].GUID]
	})
}

// l1add keeps e in the first level. A followed entry is not added if the feed
// dropped resolutions since gen was read: it may have been read before the change.
func (c *Cache) l1add(req request, e *entry, gen uint64) {
	if !req.followed {
		c.l1.add(req.key, e)
		return
	}
	c.dropMu.RLock()
	defer c.dropMu.RUnlock()
	if c.dropGen.Load() == gen {
		c.l1.add(req.key, e)
	}
}

// lookupFollowed resolves id for the cache while it is followed. The resolution
// depends on the epoch and on the object's own token, read before the object is: for
// a DN or SID the object's GUID is known only after a first read, so the object is
// read again by GUID once its token is recorded. A change between the two reads shows
// in the second, or replaces the token after it.
func (c *Cache) lookupFollowed(ctx context.Context, rec *recorder, id dirgate.Identifier) ([]dirgate.Object, error) {
	c.trackFeed(ctx, rec)
	if id.Kind() == dirgate.KindGUID {
		c.track(ctx, rec, id.Canonical())
		o, err := c.dir.Lookup(ctx, id, nil)
		if err != nil {
			return nil, err
		}
		return []dirgate.Object{o}, nil
	}
	o, err := c.dir.Lookup(ctx, id, nil)
	if err != nil {
		return nil, err
	}
	gid, err := dirgate.ParseIdentifier(o.GUID)
	if err != nil || !canonicalGUID(o.GUID) {
		rec.spoil()
		return []dirgate.Object{o}, nil
	}
	c.track(ctx, rec, o.GUID)
	again, err := c.dir.Lookup(ctx, gid, nil)
	if err != nil {
		return nil, err
	}
	if id.Kind() == dirgate.KindDN {
		d1, err1 := dirgate.ParseDN(o.DN)
		d2, err2 := dirgate.ParseDN(again.DN)
		if err1 != nil || err2 != nil || !d1.EqualFold(d2) {
			// Renamed in between: answer from the first read, keep nothing.
			rec.spoil()
			return []dirgate.Object{o}, nil
		}
	}
	return []dirgate.Object{again}, nil
}

// spoil marks a fill's result as not to be stored.
func (r *recorder) spoil() {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.broken = true
	r.mu.Unlock()
}
