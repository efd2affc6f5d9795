package cache

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/dirgate/dirgate"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/singleflight"
)

// request describes one cached value: where it lives and how to compute it.
type request struct {
	key, check string
	// root is the group whose version guards the conditional store; "" stores
	// unconditionally (lookups, which no removal invalidates).
	root string
	// frags keeps the objects' JSON encodings (listings, which are written to clients).
	frags bool
	// followed entries (identifier resolutions while the change feed runs) are
	// served from the first level without reading their tokens: the feed's events
	// drop them there (DropLookups, which changefeed/feed.go calls). Their tokens are checked in the store.
	followed bool
	// fill computes the value from the directory; rec, when not nil, must be given the
	// version of every group before its members are read. The slice it returns is
	// the cache's from then on (the decoded entry reuses its array).
	fill func(ctx context.Context, rec *recorder) ([]dirgate.Object, error)
}

// get serves req from the first level, then the store, then the directory, and says
// which served it. An entry that depends on group versions is served only after
// they have been read from the store and found current, or from the first level
// while the instance's lease vouches for such a read (lease.go): that is what holds
// every instance's first level to the invalidation guarantee. The trust regimes, in
// the order they are tried:
//
//   - trusted in the first level, nothing read: an entry that depends on no token, a
//     followed identifier resolution (the change feed drops it), or an entry the
//     lease vouches for (trusted);
//   - token-checked in the first level: its tokens read and found current
//     (tokenChecked), which lets the lease vouch for it next time;
//   - read from the store with the tokens that come in the same round trip
//     (fromStore);
//   - filled from the directory (fillShared), or read from it without the cache
//     while the store is bypassed (bypassing, bypass).
//
// A fresh entry is a hit; a valid one past its freshness is kept as the stale
// candidate served if the directory then fails (serveStale).
func (c *Cache) get(ctx context.Context, req request) (*entry, dirgate.CacheStatus, error) {
	rd := c.startReading()
	hit, stale := c.fromFirstLevel(ctx, req, &rd)
	if hit != nil {
		return hit, dirgate.CacheHit, nil
	}
	if !rd.usable {
		return c.bypassing(ctx, req, stale, rd)
	}
	hit, stale, err := c.fromStore(ctx, req, stale, rd)
	switch {
	case err != nil:
		return c.bypass(ctx, req, stale, rd.now)
	case hit != nil:
		return hit, dirgate.CacheHit, nil
	}
	hit, claimed := c.claimFill(ctx, req, stale, rd)
	if hit != nil {
		return hit, dirgate.CacheHit, nil
	}
	e, stored, err := c.fillShared(ctx, req, true, rd.dropGen)
	if claimed {
		c.releaseClaim(ctx, req)
	}
	if err != nil {
		if c.serveStale(err, stale, rd.now) {
			return stale, dirgate.CacheStale, nil
		}
		return nil, dirgate.CacheMiss, err
	}
	if !stored {
		return e, dirgate.CacheBypass, nil
	}
	return e, dirgate.CacheMiss, nil
}

// reading is what one get reads under, taken at its start.
type reading struct {
	now time.Time
	// usable: entries that depend on tokens may be read and written (the store
	// answers and no invalidation is pending); a failed token read clears it.
	usable bool
	// dropGen is the change feed's drop generation (follow.go): a resolution read
	// under an older one is not kept.
	dropGen uint64
	// trustGen is the lease generation, taken before any token is read: a read
	// vouches for the generation current when it was sent, not for one that an
	// announcement ended meanwhile.
	trustGen uint64
}

func (c *Cache) startReading() reading {
	return reading{now: c.now(), usable: c.usable(), dropGen: c.dropGen.Load(), trustGen: c.lease.current()}
}

// fromFirstLevel returns req's first-level entry as a hit if it is trusted or its
// tokens check, and fresh; as the stale candidate if valid but no longer fresh.
func (c *Cache) fromFirstLevel(ctx context.Context, req request, rd *reading) (hit, stale *entry) {
	e := c.l1.get(req.key)
	if e == nil || rd.now.Sub(e.filled) > c.storeTTL {
		return nil, nil
	}
	if !c.trusted(req, e, rd) && !c.tokenChecked(ctx, req, e, rd) {
		return nil, nil
	}
	if rd.now.Before(e.fresh) {
		return e, nil
	}
	return nil, e
}

// trusted reports whether e may be served from the first level without reading
// anything: it depends on no token, it is a followed resolution, or the lease
// vouches for a read of its tokens.
func (c *Cache) trusted(req request, e *entry, rd *reading) bool {
	return len(e.deps) == 0 || req.followed || rd.usable && c.lease.trusts(e)
}

// tokenChecked reads e's tokens: current, e is valid and the lease may vouch for it
// from now on; outdated, e leaves the first level; unreadable, the store is not
// usable for the rest of this get.
func (c *Cache) tokenChecked(ctx context.Context, req request, e *entry, rd *reading) bool {
	if !rd.usable {
		return false
	}
	ok, err := c.valid(ctx, e)
	switch {
	case err != nil:
		rd.usable = false
		return false
	case ok:
		c.lease.mark(e, rd.trustGen)
		return true
	}
	c.l1.remove(req.key, e)
	return false
}

// fromStore reads req's entry from the shared level (this or another instance may
// have filled it), with the tokens of its own group and of the epoch in the same
// round trip (same hash tag, same node), so that a direct listing is checked without
// a second one. It returns the entry as a hit when valid and fresh (keeping it in the
// first level), or as the new stale candidate when valid, newer than stale and past
// its freshness; err when the store failed.
func (c *Cache) fromStore(ctx context.Context, req request, stale *entry, rd reading) (hit, newStale *entry, err error) {
	keys := []string{req.key}
	var known []string // groups whose versions come in the same round trip
	if req.root != "" {
		known = append(known, req.root)
	}
	if c.tracksEpoch() {
		known = append(known, epoch)
	}
	for _, g := range known {
		keys = append(keys, c.keys.version(g))
	}
	var vals []string
	rctx, span := tracer().Start(ctx, "cache read")
	err = c.op(rctx, false, func(ctx context.Context) (err error) {
		vals, err = c.store.get(ctx, keys...)
		return err
	})
	span.SetAttributes(attribute.Bool("dirgate.cache.found", err == nil && vals[0] != ""))
	span.End()
	if err != nil || vals[0] == "" {
		return nil, stale, err
	}
	e, err := c.decode(vals[0], req)
	if err != nil {
		c.cfg.Logger.Warn("cache: ignoring an entry that does not decode", "key", req.key, "error", err)
		return nil, stale, nil
	}
	if stale != nil && !e.filled.After(stale.filled) {
		return nil, stale, nil
	}
	versions := map[string]string{}
	for i, g := range known {
		versions[g] = vals[1+i]
	}
	ok, err := c.validKnown(ctx, e, versions)
	if err != nil {
		return nil, stale, err
	}
	if !ok || rd.now.Sub(e.filled) > c.storeTTL {
		return nil, stale, nil
	}
	if !rd.now.Before(e.fresh) {
		return nil, e, nil
	}
	c.lease.mark(e, rd.trustGen)
	c.l1add(req, e, rd.dropGen)
	return e, nil, nil
}

// bypassing serves req from the directory while the store is bypassed (it failed
// within the retry interval, or an invalidation is pending), without recording or
// storing anything.
func (c *Cache) bypassing(ctx context.Context, req request, stale *entry, rd reading) (*entry, dirgate.CacheStatus, error) {
	e, _, err := c.fillShared(ctx, req, false, rd.dropGen)
	if err != nil && c.serveStale(err, stale, rd.now) {
		return stale, dirgate.CacheStale, nil
	}
	return e, dirgate.CacheBypass, err
}

// bypass serves req from the directory after the store failed.
func (c *Cache) bypass(ctx context.Context, req request, stale *entry, now time.Time) (*entry, dirgate.CacheStatus, error) {
	if stale != nil && len(stale.deps) > 0 {
		stale = nil // validated before the store failed, but it cannot be checked again now
	}
	gen := c.dropGen.Load()
	e, _, err := c.fillShared(ctx, req, false, gen)
	if err != nil && c.serveStale(err, stale, now) {
		return stale, dirgate.CacheStale, nil
	}
	return e, dirgate.CacheBypass, err
}

// serveStale reports whether stale may stand in for a directory that failed with err:
// only infrastructure failures, only within MaxStale of its fill.
func (c *Cache) serveStale(err error, stale *entry, now time.Time) bool {
	if stale == nil || c.cfg.MaxStale <= 0 || now.Sub(stale.filled) > c.cfg.MaxStale {
		return false
	}
	return dirgate.IsDirectoryDown(err)
}

// valid reports whether every group e depends on still has the version e recorded.
func (c *Cache) valid(ctx context.Context, e *entry) (bool, error) {
	return c.validKnown(ctx, e, nil)
}

// validKnown is valid with some current versions already read (by GUID).
func (c *Cache) validKnown(ctx context.Context, e *entry, known map[string]string) (bool, error) {
	var ks []string
	var idx []int
	for i, d := range e.deps {
		if v, ok := known[d.guid]; ok {
			if v != d.token {
				return false, nil
			}
			continue
		}
		ks = append(ks, c.keys.version(d.guid))
		idx = append(idx, i)
	}
	if len(ks) == 0 {
		return true, nil
	}
	c.tokenReads.Add(1)
	// Shared with concurrent requests, in a read sent after this one arrived
	// (versionReads).
	cur, err := c.versions.get(ks, func(keys []string) (cur []string, err error) {
		err = c.op(ctx, false, func(ctx context.Context) (err error) {
			cur, err = c.store.get(ctx, keys...)
			return err
		})
		return cur, err
	})
	if err != nil {
		return false, err
	}
	for j, i := range idx {
		if cur[j] != e.deps[i].token {
			return false, nil
		}
	}
	return true, nil
}

// decode decodes a stored value and checks that it is the entry req asked for.
func (c *Cache) decode(v string, req request) (*entry, error) {
	if c.sealer != nil {
		var err error
		if v, err = c.sealer.open(req.key, v); err != nil {
			return nil, err
		}
	}
	v, err := unpack(v)
	if err != nil {
		return nil, err
	}
	e, err := decodeEntry(v)
	if err != nil {
		return nil, err
	}
	if e.check != req.check {
		return nil, fmt.Errorf("%w: stored under another key's inputs", errCorrupt)
	}
	for _, d := range e.deps {
		if !canonicalGUID(d.guid) || d.token == "" {
			return nil, fmt.Errorf("%w: malformed dependency", errCorrupt)
		}
	}
	if req.root != "" && !slices.ContainsFunc(e.deps, func(d dep) bool { return d.guid == req.root }) {
		return nil, fmt.Errorf("%w: entry does not depend on its own group", errCorrupt)
	}
	if req.frags && e.list.Fragments() == nil {
		return nil, fmt.Errorf("%w: listing without encodings", errCorrupt)
	}
	if req.root == "" && len(e.objs) != 1 {
		return nil, fmt.Errorf("%w: lookup of %d objects", errCorrupt, len(e.objs))
	}
	return e, nil
}

// fillShared fills req once per instance however many requests miss it at once
// (singleflight). tracked fills record versions and store their result; untracked
// ones (bypass) do neither. stored reports whether the entry went to the store.
func (c *Cache) fillShared(ctx context.Context, req request, tracked bool, gen uint64) (e *entry, stored bool, err error) {
	key := c.flightKey(req.key, tracked)
	type result struct {
		e        *entry
		stored   bool
		complete bool // every group read was tracked: the entry's versions vouch for it
	}
	leader := false
	ch := c.flights.DoChan(key, func() (any, error) {
		leader = true
		// The fill serves every request waiting for it: one client going away must
		// not cancel it for the others. It keeps the leader's deadline.
		fctx, cancel := detach(ctx)
		defer cancel()
		e, stored, complete, err := c.fill(fctx, req, tracked, gen)
		return result{e, stored, complete}, err
	})
	if c.testHookJoined != nil {
		c.testHookJoined(key)
	}
	var res singleflight.Result
	select {
	case res = <-ch:
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
	if res.Err != nil {
		return nil, false, res.Err
	}
	r := res.Val.(result)
	if !leader && tracked {
		// The flight may have read the directory before a removal that this request
		// follows; its versions tell. If they cannot vouch or are no longer current,
		// read afresh.
		if !r.complete {
			e, stored, _, err := c.fill(ctx, req, tracked, gen)
			return e, stored, err
		}
		if ok, err := c.valid(ctx, r.e); err != nil || !ok {
			e, stored, _, err := c.fill(ctx, req, tracked, gen)
			return e, stored, err
		}
	}
	return r.e, r.stored, nil
}

func detach(ctx context.Context) (context.Context, context.CancelFunc) {
	d := context.WithoutCancel(ctx)
	if dl, ok := ctx.Deadline(); ok {
		return context.WithDeadline(d, dl)
	}
	return context.WithCancel(d)
}

// fill computes req from the directory. A tracked fill reads each group's version
// before its members, and stores the result only if the listed group's version is
// still the one read (atomically, in the store) and the nested groups' are too; a
// removal in between makes the result unstorable, and were it stored, invalid.
func (c *Cache) fill(ctx context.Context, req request, tracked bool, gen uint64) (e *entry, stored, complete bool, err error) {
	var rec *recorder
	if tracked {
		rec = &recorder{}
	}
	start := c.now()
	objs, err := req.fill(ctx, rec)
	if err != nil {
		return nil, false, false, err
	}
	var unresolved []int
	for i := range objs {
		if objs[i].Unresolved {
			unresolved = append(unresolved, i)
		}
	}
	if len(unresolved) > 0 {
		// An object stands for one a directory could not be asked about (its
		// domain failed): answered, not kept, so the next request asks again.
		rec.spoil()
	}
	var frags fragments
	if req.frags {
		frags = objectJSON(objs)
	}
	e = &entry{check: req.check, filled: start, fresh: start.Add(c.jitteredTTL())}
	if rec != nil {
		e.deps = rec.deps
	}
	blob, err := encodeEntry(e, objs, frags)
	if err != nil {
		return nil, false, false, dirgate.WrapError(dirgate.EINTERNAL, "", err)
	}
	// Served in its decoded form, as every later hit is: one representation, one
	// string backing all of its text. The fill's objects are the fill's own
	// (request.fill), and are not read again: they take the decoded ones.
	if e, err = decodeEntryInto(blob, objs); err != nil {
		return nil, false, false, dirgate.WrapError(dirgate.EINTERNAL, "", fmt.Errorf("cache: decode what was encoded: %w", err))
	}
	for _, i := range unresolved {
		e.objs[i].Unresolved = true // never encoded: this answer's alone
	}
	complete = rec != nil && !rec.broken
	if !complete {
		return e, false, false, nil
	}
	if c.store.shared() {
		blob = pack(blob) // compress.go
	}
	if c.store.shared() && len(blob) > maxValueBytes || !c.put(ctx, req, e, blob) {
		return e, false, complete, nil
	}
	c.l1add(req, e, gen)
	return e, true, true, nil
}

// put stores a filled entry; it reports false when the store failed or a version
// changed during the fill.
func (c *Cache) put(ctx context.Context, req request, e *entry, blob string) (stored bool) {
	ctx, span := tracer().Start(ctx, "cache write", trace.WithAttributes(attribute.Int("dirgate.cache.bytes", len(blob))))
	defer func() { span.SetAttributes(attribute.Bool("dirgate.cache.stored", stored)); span.End() }()
	if c.sealer != nil {
		blob = c.sealer.seal(req.key, blob)
	}
	if req.root == "" {
		return c.op(ctx, false, func(ctx context.Context) error {
			return c.store.set(ctx, req.key, blob, c.storeTTL)
		}) == nil
	}
	i := slices.IndexFunc(e.deps, func(d dep) bool { return d.guid == req.root })
	if i < 0 {
		return false
	}
	if len(e.deps) > 1 {
		// Nested groups live in other slots: checked just before, and again by every
		// reader.
		if ok, err := c.valid(ctx, e); err != nil || !ok {
			return false
		}
	}
	err := c.op(ctx, false, func(ctx context.Context) (err error) {
		stored, err = c.store.setIf(ctx, req.key, blob, c.storeTTL, c.keys.version(req.root), e.deps[i].token)
		return err
	})
	return err == nil && stored
}

// recorder collects, during one fill, the groups whose members were read and the
// version each had before the read.
type recorder struct {
	mu     sync.Mutex
	deps   []dep
	broken bool // a version could not be read: the result must not be stored
}

// track reads (creating it if needed) group's version before its members are read.
func (c *Cache) track(ctx context.Context, rec *recorder, guid string) {
	if rec == nil {
		return
	}
	var tok string
	err := errBypass
	if canonicalGUID(guid) {
		err = c.op(ctx, false, func(ctx context.Context) (err error) {
			tok, err = c.store.getOrSet(ctx, c.keys.version(guid), newToken(), c.versionTTL)
			return err
		})
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if err != nil {
		rec.broken = true
		return
	}
	if !slices.ContainsFunc(rec.deps, func(d dep) bool { return d.guid == guid }) {
		rec.deps = append(rec.deps, dep{guid: guid, token: tok})
	}
}

// expansion is how a fill reads a listing from dir: dirgate's own expansion, with
// the cache's concurrency.
func (c *Cache) expansion(dir dirgate.Directory) dirgate.Expansion {
	return dirgate.Expansion{Dir: dir, Concurrency: c.cfg.ExpandConcurrency}
}

// recordingDirectory gives the fill's recorder each group's version before the
// group's members are read.
type recordingDirectory struct {
	dirgate.Directory
	c   *Cache
	rec *recorder
}

func (d *recordingDirectory) Members(ctx context.Context, group dirgate.Object, props []string) ([]dirgate.Object, error) {
	d.c.track(ctx, d.rec, group.GUID)
	return d.Directory.Members(ctx, group, props)
}
