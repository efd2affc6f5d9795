// Package cache serves group listings and identifier lookups from a cache in front of
// any dirgate.Directory: Redis (one server, Sentinel or Cluster) shared by every
// dirgate instance, or an in-process store when no Redis is configured, with decoded
// entries kept in process as a first level in front of either.
//
// A *Cache is both the dirgate.Directory and the dirgate.Lister of a
// dirgate.MemberService: it caches Lookup, passes Members and MemberOf through, and
// after RemoveMember and AddMember invalidates every listing the change affects, on
// every instance that shares the store. docs/cache.md explains the mechanism and its guarantees.
package cache

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dirgate/dirgate"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/singleflight"
)

// maxValueBytes bounds one entry stored in Redis; larger listings are served but not
// cached. The in-process store has only its own bound (Config.MaxBytes).
const maxValueBytes = 64 << 20

// Cache is a dirgate.Directory and dirgate.Lister with a cache in front of dir.
type Cache struct {
	cfg     Config
	dir     dirgate.Directory
	store   store
	sealer  *sealer // authenticates entries in Redis (seal.go); nil in process
	keys    keys
	l1      *firstLevel
	flights singleflight.Group
	// versions shares the version reads of concurrent requests (versionreads.go).
	versions versionReads
	// lease lets trusted first-level entries skip those reads (lease.go); nil without
	// Redis or with leases off.
	lease *lease
	// claimID names this instance in its fill claims (claim.go); claimWaitCount
	// counts the misses that waited on another's claim (tests).
	claimID        string
	claimWaitCount atomic.Int64
	// tokenReads counts the requests that read tokens for an entry (tests).
	tokenReads atomic.Int64
	health     health
	pending    pending
	now        func() time.Time

	// storeTTL is how long an entry is kept: fresh for TTL, then servable as stale
	// until MaxStale after its fill. versionTTL outlives every entry that recorded a
	// version; a version that expires only makes entries invalid, never valid.
	storeTTL, versionTTL time.Duration
	// localGen counts this instance's membership changes; flights that cannot be checked
	// against the store (bypass) are keyed by it.
	localGen atomic.Uint64

	metrics cacheMetrics

	// followed is set once the change feed follows the cache (follow.go); dropMu and
	// dropGen keep a resolution it dropped from being added back by a read that
	// began before.
	followed atomic.Bool
	dropMu   sync.RWMutex
	dropGen  atomic.Uint64

	// settledGen is the History count whose changes have been handled (history.go).
	settledGen  atomic.Uint64
	historyDone chan struct{}

	stop chan struct{}
	done chan struct{}

	// testHookJoined, when set by a test, is called once a request has joined or
	// started the flight for key.
	testHookJoined func(key string)
}

var (
	_ dirgate.Directory = (*Cache)(nil)
	_ dirgate.Lister    = (*Cache)(nil)
)

// Open validates the configuration, connects to Redis (or makes the in-process
// store) and returns the cache in front of dir. An unreachable Redis is not an
// error: the cache bypasses it until it answers.
func (c Config) Open(ctx context.Context, dir dirgate.Directory) (*Cache, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if dir == nil {
		return nil, errors.New("cache: a directory is required")
	}
	c = c.withDefaults()
	var st store
	if c.Redis != nil {
		st = newRedisStore(c.Redis, c.Logger)
	} else {
		st = newMemoryStore(c.MaxBytes, c.now)
	}
	ch := newCache(c, dir, st)
	if c.Redis != nil && ch.Ready(ctx) == nil {
		// Logged once at start; requests do not depend on it.
		c.Logger.Info("cache: redis answers")
	}
	return ch, nil
}

// Ready reports whether the backend answers, always nil for the in-process one. A
// readiness check should report it without failing on it: while Redis is down the
// cache is bypassed and requests are still served.
func (c *Cache) Ready(ctx context.Context) error {
	if !c.store.shared() {
		return nil
	}
	err := c.op(ctx, true, func(ctx context.Context) error {
		_, err := c.store.get(ctx, c.keys.ready())
		return err
	})
	if err != nil {
		return fmt.Errorf("cache: redis: %w", err)
	}
	return nil
}

func newCache(c Config, dir dirgate.Directory, st store) *Cache {
	ch := &Cache{
		cfg:      c,
		dir:      dir,
		store:    st,
		sealer:   sealerFor(c),
		keys:     keys{prefix: c.KeyPrefix},
		claimID:  rand.Text(),
		l1:       newFirstLevel(c.MaxBytes),
		health:   health{interval: c.RetryInterval, log: c.Logger},
		now:      c.now,
		storeTTL: max(c.TTL, c.MaxStale),
		metrics:  newCacheMetrics(),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),

		historyDone: make(chan struct{}),
	}
	ch.versionTTL = 2 * ch.storeTTL
	ch.pending.m = map[string]time.Time{}
	if c.Redis != nil && *c.Lease > 0 {
		ch.lease = newLease(c.Redis, c.KeyPrefix, *c.Lease, c.Timeout, c.Logger)
		go ch.lease.run()
	}
	go ch.retryLoop()
	if c.History != nil && c.Redis != nil {
		ch.settledGen.Store(c.History.Gen())
		go ch.followHistory(c.History.Subscribe())
	} else {
		close(ch.historyDone)
	}
	return ch
}

// Close stops retrying invalidations and gives the lease up (so that removals
// elsewhere do not wait for this instance). The change feed is closed before, and
// the Redis client after, by their opener.
func (c *Cache) Close() error {
	select {
	case <-c.stop:
		return nil
	default:
	}
	close(c.stop)
	<-c.done
	<-c.historyDone
	if c.lease != nil {
		c.lease.close()
	}
	if err := c.store.close(); err != nil {
		return fmt.Errorf("cache: close: %w", err)
	}
	return nil
}

// Listing returns group's unfiltered listing from the cache, filling it from the
// directory on a miss, with its objects' JSON encodings and how it was served. The
// returned objects are shared: callers must not modify them.
func (c *Cache) Listing(ctx context.Context, group dirgate.Object, opts dirgate.ListOptions) (l dirgate.Listing, err error) {
	ctx, span := tracer().Start(ctx, "cache listing")
	if span.IsRecording() { // attributes cost allocations even for a span nobody records
		span.SetAttributes(attribute.String("dirgate.group.guid", group.GUID), attribute.Bool("dirgate.include_indirect", opts.IncludeIndirect))
	}
	defer func() {
		if span.IsRecording() {
			span.SetAttributes(attribute.String("dirgate.cache", string(l.Status)), attribute.Int("dirgate.objects", len(l.Objects)))
			if err != nil {
				span.SetStatus(codes.Error, dirgate.ErrorCode(err))
			}
		}
		span.End()
		c.metrics.listings.Add(ctx, 1, statusSet(l.Status))
	}()
	props, err := dirgate.NormalizeProperties(opts.Properties)
	if err != nil || !canonicalGUID(group.GUID) {
		// Not something the cache can key safely: serve it from the directory.
		objs, err := dirgate.Expand(ctx, c.expansion(c.dir), group, opts)
		if err != nil {
			return dirgate.Listing{}, err
		}
		return dirgate.Listing{Objects: objs, Status: dirgate.CacheBypass}, nil
	}
	opts.Properties = props
	key, check := c.keys.listing(group.GUID, opts.IncludeIndirect, props)
	e, status, err := c.get(ctx, request{
		key: key, check: check, root: group.GUID, frags: true,
		fill: func(ctx context.Context, rec *recorder) ([]dirgate.Object, error) {
			c.trackFeed(ctx, rec)
			if showsMembership(props) {
				c.track(ctx, rec, anyMembershipChange)
			}
			x := c.expansion(&recordingDirectory{Directory: c.dir, c: c, rec: rec})
			if opts.IncludeIndirect && c.cfg.Transitive != nil {
				// One in-chain query cannot say which nested groups it read, so the
				// listing depends on the group itself and on every membership change.
				c.track(ctx, rec, group.GUID)
				c.track(ctx, rec, anyMembershipChange)
				x.Transitive = c.cfg.Transitive
			}
			return dirgate.Expand(ctx, x, group, opts)
		},
	})
	if err != nil {
		return dirgate.Listing{}, err
	}
	return dirgate.Listing{Objects: e.objs, Encoded: e.list, Status: status}, nil
}

// Lookup resolves id from the cache (LookupServed).
func (c *Cache) Lookup(ctx context.Context, id dirgate.Identifier, props []string) (dirgate.Object, error) {
	o, _, err := c.lookup(ctx, id, props)
	return o, err
}

// LookupServed resolves id from the cache, saying how it was served when a listing
// must say so: stale or bypass (hits and misses are the listing's to say).
func (c *Cache) LookupServed(ctx context.Context, id dirgate.Identifier) (dirgate.Object, dirgate.CacheStatus, error) {
	o, st, err := c.lookup(ctx, id, nil)
	if st != dirgate.CacheStale && st != dirgate.CacheBypass {
		st = ""
	}
	return o, st, err
}

// LookupFresh resolves id from the directory itself: a write acts on the current DN
// and primary group, and a principal follows the directory within its own bound.
func (c *Cache) LookupFresh(ctx context.Context, id dirgate.Identifier, props []string) (dirgate.Object, error) {
	return c.dir.Lookup(ctx, id, props)
}

// lookup resolves id from the cache. Lookups with extra properties pass through:
// MemberService resolves without any, and properties may change at any time.
// Lookups are not invalidated by removals (an object's identity and status do not
// depend on its groups); they follow the TTL, or the change feed's events.
func (c *Cache) lookup(ctx context.Context, id dirgate.Identifier, props []string) (dirgate.Object, dirgate.CacheStatus, error) {
	if len(props) > 0 || id.IsZero() {
		o, err := c.dir.Lookup(ctx, id, props)
		return o, "", err
	}
	key, check := c.keys.lookup(id)
	e, status, err := c.get(ctx, request{
		key: key, check: check, followed: c.following(),
		fill: func(ctx context.Context, rec *recorder) ([]dirgate.Object, error) {
			if c.following() {
				return c.lookupFollowed(ctx, rec, id)
			}
			o, err := c.dir.Lookup(ctx, id, nil)
			if err != nil {
				return nil, err
			}
			return []dirgate.Object{o}, nil
		},
	})
	if err != nil {
		return dirgate.Object{}, "", err
	}
	return e.objs[0], status, nil
}

// Members passes through: listings are cached whole, by Listing.
func (c *Cache) Members(ctx context.Context, group dirgate.Object, props []string) ([]dirgate.Object, error) {
	return c.dir.Members(ctx, group, props)
}

// MemberOf passes through: it decides a caller's groups, which must follow the
// directory within the principal TTL, not the cache TTL.
func (c *Cache) MemberOf(ctx context.Context, obj dirgate.Object) ([]dirgate.Object, error) {
	return c.dir.MemberOf(ctx, obj)
}

// RemoveMember removes member from group in the directory, then invalidates every
// cached listing computed from group's members (its own listings, and the nested
// listings of every group that reached it) before returning, so that once the
// removal is answered no instance sharing the store serves the member from them.
// It invalidates whenever the directory may have changed, failures included.
func (c *Cache) RemoveMember(ctx context.Context, group, member dirgate.Object) error {
	err := c.dir.RemoveMember(ctx, group, member)
	// "Not a member" still invalidates: a listing that shows the member is stale
	// (someone removed it behind dirgate's back). Only a refusal changed nothing.
	if errors.Is(err, dirgate.ErrPrimaryGroup) {
		return err
	}
	c.invalidateMembership(ctx, group)
	return err
}

// AddMember adds member to group in the directory, then invalidates exactly what
// RemoveMember does, before returning: once the addition is answered, no instance
// sharing the store serves a listing of group, or a nested listing through it, that
// lacks the member. "Already a member" invalidates too (a listing without the member
// is stale: it was added behind dirgate's back), and so does any failure, since the
// directory may have applied the change before the answer was lost.
func (c *Cache) AddMember(ctx context.Context, group, member dirgate.Object) error {
	err := c.dir.AddMember(ctx, group, member)
	c.invalidateMembership(ctx, group)
	return err
}

// invalidateMembership gives group, and the pseudo-group every membership change
// bumps, new version tokens.
func (c *Cache) invalidateMembership(ctx context.Context, group dirgate.Object) {
	ctx, span := tracer().Start(ctx, "cache invalidate", trace.WithAttributes(attribute.String("dirgate.group.guid", group.GUID)))
	c.invalidate(ctx, true, group.GUID, anyMembershipChange)
	span.End()
}

// membershipProperties change on objects other than the group when a member is
// removed or added: the member's memberOf, a listed nested group's member. A listing
// that shows any of them depends on every membership change (through
// anyMembershipChange), not only on the groups it expanded.
var membershipProperties = map[string]bool{
	"member": true, "memberof": true, "msds-membertransitive": true, "msds-memberoftransitive": true,
	"tokengroups": true, "tokengroupsglobalanduniversal": true, "tokengroupsnogcacceptable": true,
}

func showsMembership(props []string) bool {
	for _, p := range props {
		if membershipProperties[p] {
			return true
		}
	}
	return false
}

// anyMembershipChange is a pseudo-group, the nil GUID (which no directory object
// has), whose version every removal and addition through dirgate changes.
const anyMembershipChange = "00000000-0000-0000-0000-000000000000"

// invalidate gives each group a new version token. Entries record the tokens of the
// groups they were computed from and are served only while those tokens are
// current, so this one write invalidates them all, on every instance. With leases it
// then announces the change and, with wait, waits until every instance has dropped
// its trust in its first level (lease.go): a removal or addition through dirgate
// waits, the change feed (whose event reaches every instance) does not. If the store
// cannot take it, the groups are retried in the background, and until then this
// instance bypasses the cache (other instances cannot be told: docs/cache.md); the
// error says so.
func (c *Cache) invalidate(ctx context.Context, wait bool, guids ...string) error {
	c.localGen.Add(1)
	guids = canonicalOnce(guids)
	var bumped []string
	var failed error
	for part := range slices.Chunk(guids, tokenBatch) {
		if failed == nil {
			if failed = c.bump(ctx, part...); failed == nil {
				bumped = append(bumped, part...)
				continue
			}
			c.cfg.Logger.Warn("cache: invalidation deferred until the backend answers", "groups", len(guids)-len(bumped), "first", part[0], "error", failed)
		}
		for _, guid := range part {
			c.pending.add(guid, c.now())
		}
	}
	if c.lease == nil || len(bumped) == 0 {
		return failed
	}
	a, err := c.announce(ctx)
	if err != nil {
		// Other instances may trust entries the new tokens invalidate: bump and
		// announce again until the store takes it, and bypass until then.
		for _, guid := range bumped {
			c.pending.add(guid, c.now())
		}
		c.cfg.Logger.Warn("cache: invalidation deferred until the backend answers", "groups", len(bumped), "first", bumped[0], "error", err)
		return err
	}
	if wait {
		start := c.now()
		c.lease.await(ctx, a)
		c.metrics.leaseWait.Record(ctx, c.now().Sub(start).Seconds())
	}
	return failed
}

// tokenBatch bounds the tokens replaced in one round trip (a resync of the change
// feed replaces up to its batch of 10,000).
const tokenBatch = 500

// canonicalOnce keeps each canonical GUID of guids once, in order: no other was
// ever cached.
func canonicalOnce(guids []string) []string {
	seen := make(map[string]bool, len(guids))
	out := make([]string, 0, len(guids))
	for _, g := range guids {
		if canonicalGUID(g) && !seen[g] {
			seen[g] = true
			out = append(out, g)
		}
	}
	return out
}

// announce tells the instances holding leases that tokens changed, after this one
// has withdrawn its own trust; invalidate then waits for the others if asked to,
// deferred invalidations do not. The tokens are written already, so a refusal is
// tried twice more before it is returned.
func (c *Cache) announce(ctx context.Context) (a announcement, err error) {
	if c.lease == nil {
		return a, nil
	}
	c.lease.drop()
	for range 3 {
		if err = c.op(ctx, true, func(ctx context.Context) (err error) {
			a, err = c.lease.announce(ctx)
			return err
		}); err == nil {
			return a, nil
		}
	}
	return a, err
}

// bump gives guids new tokens, in one round trip.
func (c *Cache) bump(ctx context.Context, guids ...string) error {
	keys := make([]string, len(guids))
	tokens := make([]string, len(guids))
	for i, g := range guids {
		keys[i], tokens[i] = c.keys.version(g), newToken()
	}
	return c.op(ctx, true, func(ctx context.Context) error {
		return c.store.setAll(ctx, keys, tokens, c.versionTTL)
	})
}

// retryLoop retries deferred invalidations every RetryInterval. A group pending for
// longer than storeTTL is dropped: every entry filled before its removal has expired.
func (c *Cache) retryLoop() {
	defer close(c.done)
	t := time.NewTicker(c.cfg.RetryInterval)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		c.retryPending()
	}
}

func (c *Cache) retryPending() {
	var done []string
	snap := c.pending.snapshot()
	for guid, since := range snap {
		if c.now().Sub(since) > c.storeTTL {
			c.pending.remove(guid, since)
		} else if c.bump(context.Background(), guid) == nil {
			done = append(done, guid)
		}
	}
	if len(done) == 0 {
		return
	}
	if _, err := c.announce(context.Background()); err != nil {
		return
	}
	for _, guid := range done {
		c.pending.remove(guid, snap[guid])
	}
}

// pending holds groups whose invalidation the store has not taken yet.
type pending struct {
	mu sync.Mutex
	m  map[string]time.Time
}

func (p *pending) add(guid string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.m[guid]; !ok {
		p.m[guid] = now
	}
}

func (p *pending) remove(guid string, since time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m[guid] == since {
		delete(p.m, guid)
	}
}

func (p *pending) empty() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.m) == 0
}

func (p *pending) snapshot() map[string]time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]time.Time, len(p.m))
	for k, v := range p.m {
		out[k] = v
	}
	return out
}

// op runs f against the store with the configured timeout, detached from the
// request's cancellation, and tracks the store's health. Unless force is set, a
// store that failed within the retry interval is not tried.
func (c *Cache) op(ctx context.Context, force bool, f func(ctx context.Context) error) error {
	if !force && !c.health.ok(c.now()) {
		return errBypass
	}
	// A reply is used only if Redis's history did not change since the last change
	// was handled (history.go); the handling itself writes (force) meanwhile.
	gen := c.historyGen()
	if !force && c.settledGen.Load() != gen {
		return errHistoryChanged
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.Timeout)
	defer cancel()
	if err := f(sctx); err != nil {
		c.health.failed(c.now(), err)
		return err
	}
	c.health.succeeded()
	if c.historyGen() != gen {
		return errHistoryChanged
	}
	return nil
}

var errBypass = errors.New("cache: backend is being bypassed")

// usable reports whether entries that depend on versions may be read and written.
func (c *Cache) usable() bool { return c.health.ok(c.now()) && c.pending.empty() && c.settled() }

// newToken returns a version token that no earlier token of any group equals, so
// that a version that disappears (evicted, expired, Redis restarted) and is
// recreated can never make an old entry valid again.
func newToken() string { return rand.Text() }

// jitteredTTL shortens the TTL by up to TTLJitter.
func (c *Cache) jitteredTTL() time.Duration {
	return c.cfg.TTL - time.Duration(float64(c.cfg.TTL)**c.cfg.TTLJitter*mrand.Float64())
}

// flightKey keys a bypass flight by this instance's count of membership changes, so
// that a request that follows a local change never joins a read that began before it.
func (c *Cache) flightKey(key string, tracked bool) string {
	if tracked {
		return key
	}
	return "bypass|" + strconv.FormatUint(c.localGen.Load(), 10) + "|" + key
}
