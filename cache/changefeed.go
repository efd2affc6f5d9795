package cache

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dirgate/dirgate"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// The change feed: changes made in the directory by anything but dirgate reach every
// cached listing, identifier resolution and caller principal within seconds
// (docs/cache.md, "Changes made in the directory").
//
// One instance per deployment reads (the leader, elected with a lease in Redis; every
// instance alone without Redis). It asks the directory what changed since the stored
// position (dirgate.ChangeSource) and invalidates through the version tokens listings
// already depend on: a changed object's own token, the tokens of the groups it is a
// direct or primary member of (every listing that shows it recorded one of them), and
// the pseudo-group anyMembershipChange. A change whose groups are unknown (a deletion) or a
// position that cannot be trusted replaces the epoch token, which every entry
// depends on while the feed runs. Only then is the position stored: a leader that
// dies in between makes the next one read the same changes again, never skip them.
//
// Tokens live in the shared store, so that invalidates every instance's listings at
// once. What instances keep outside the store (identifier resolutions in the first
// level, principals) is dropped by each instance when it reads the leader's event
// from a Redis stream; a missed event (sequence gap) drops all of it.

// epoch is a pseudo-group whose token every entry records while the feed runs:
// replacing it invalidates everything (a resync).
const epoch = "00000000-0000-0000-0000-000000000001"

// Feed defaults.
const (
	DefaultFeedInterval = time.Second
	DefaultFeedMaxBatch = 10000
	DefaultFeedLease    = 3 * time.Second
)

// FeedConfig configures Cache.StartFeed.
type FeedConfig struct {
	// Source says what changed in the directory.
	Source dirgate.ChangeSource
	// Interval is how often the leader reads (DIRGATE_CHANGEFEED_INTERVAL).
	Interval time.Duration
	// MaxBatch bounds the changes one read may return; a larger burst invalidates
	// everything instead.
	MaxBatch int
	// Lease is how long a leader's claim lasts without renewal; another instance
	// takes over within Lease plus Interval of the leader's death.
	Lease time.Duration
	// OnEvent, when set, is told on every instance what changed (to refresh caller
	// principals). It must not block.
	OnEvent func(FeedEvent)
	// PerInstance makes every instance read its own source, without an election
	// (the memory upstream: each instance watches its own file).
	PerInstance bool
}

// FeedEvent tells an instance what the leader invalidated.
type FeedEvent struct {
	// All: everything (a resync, a deletion, or events this instance missed).
	All bool
	// Groups: some group changed (its members, so any caller's groups may have).
	Groups bool
	// GUIDs are the objects that changed.
	GUIDs []string
}

// Feed is a running change feed.
type Feed struct {
	c      *Cache
	cfg    FeedConfig
	shared feedStore // nil without Redis: this instance reads alone
	id     string    // this instance's lease value

	leader  atomic.Bool
	lastPos atomic.Pointer[dirgate.ChangePosition] // the latest position known here
	lastErr atomic.Pointer[string]
	pos     *dirgate.ChangePosition // the leader's position (reader goroutine only)

	metrics   feedMetrics
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once

	// forced asks the reader to resync on its next read (tests, operators).
	forced atomic.Bool
	// coverage is what the source says it cannot see (dirgate.ChangeCoverage),
	// checked every coverageInterval.
	coverage  atomic.Pointer[string]
	coveredAt time.Time
	// failures counts reads that failed in a row; the next is not tried before
	// retryAt, so that a directory that is down is not dialled every interval.
	failures int
	retryAt  time.Time
}

// maxFeedBackoff bounds the wait between reads of a directory that keeps failing.
const maxFeedBackoff = 5 * time.Second

const coverageInterval = 10 * time.Minute

// StartFeed starts following the directory's changes until Close. From now on every
// entry filled records the epoch token.
func (c *Cache) StartFeed(ctx context.Context, cfg FeedConfig) (*Feed, error) {
	if cfg.Source == nil {
		return nil, errors.New("cache: change feed: a source is required")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultFeedInterval
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = DefaultFeedMaxBatch
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultFeedLease
	}
	if cfg.Lease < 2*cfg.Interval {
		cfg.Lease = 2 * cfg.Interval
	}
	f := &Feed{c: c, cfg: cfg, id: rand.Text(), metrics: newFeedMetrics()}
	if rs, ok := c.store.(*redisStore); ok && !cfg.PerInstance {
		f.shared = rs.feed(c.keys.prefix, c.sealer, c.cfg.Logger, c.now)
	}
	c.feed.Store(f)
	ctx, f.cancel = context.WithCancel(context.WithoutCancel(ctx))
	f.wg.Add(1)
	go f.readLoop(ctx)
	if f.shared != nil {
		f.wg.Add(1)
		go f.followLoop(ctx)
	}
	reg, err := f.metrics.register(f)
	if err == nil {
		f.metrics.reg = reg
	}
	return f, nil
}

// Close stops the feed and gives up the lease, so that another instance takes over
// at once.
func (f *Feed) Close() error {
	f.closeOnce.Do(f.close)
	return nil
}

func (f *Feed) close() {
	f.cancel()
	f.wg.Wait()
	if f.metrics.reg != nil {
		f.metrics.reg.Unregister()
	}
	if f.shared != nil && f.leader.Load() {
		ctx, cancel := context.WithTimeout(context.Background(), f.c.cfg.Timeout)
		defer cancel()
		_ = f.shared.release(ctx, f.id)
	}
	f.leader.Store(false)
}

// Resync makes the next read invalidate everything (an operator's or a test's
// request). Only the leader's counts.
func (f *Feed) Resync() { f.forced.Store(true) }

// Leader reports whether this instance reads the directory.
func (f *Feed) Leader() bool { return f.leader.Load() }

// Ready reports the feed for /readyz: nil while the position is recent, otherwise
// why not. It never gates: listings stay bounded by the cache TTL.
func (f *Feed) Ready(context.Context) error {
	if cv := f.coverage.Load(); cv != nil {
		return errors.New(*cv)
	}
	p := f.lastPos.Load()
	bound := max(10*f.cfg.Interval, 30*time.Second)
	switch {
	case p == nil:
		return errors.New("no position yet" + f.failing())
	case f.c.now().Sub(p.Time) > bound:
		return fmt.Errorf("behind by %s; changes made in the directory are seen within the cache TTL%s",
			f.c.now().Sub(p.Time).Round(time.Second), f.failing())
	}
	return nil
}

// failing says that reads fail, without the error's text: /readyz needs no token,
// and errors name addresses (the log has them).
func (f *Feed) failing() string {
	if f.lastErr.Load() != nil {
		return " (reads fail: see the log)"
	}
	return ""
}

// readLoop reads every interval while this instance leads.
func (f *Feed) readLoop(ctx context.Context) {
	defer f.wg.Done()
	t := time.NewTicker(f.cfg.Interval)
	defer t.Stop()
	for {
		f.tick(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (f *Feed) setErr(err error) {
	if err == nil {
		f.lastErr.Store(nil)
		return
	}
	s := err.Error()
	f.lastErr.Store(&s)
}

// tick claims or renews the lease, then, as leader, reads and applies one batch.
func (f *Feed) tick(ctx context.Context) {
	log := f.c.cfg.Logger
	if cc, ok := f.cfg.Source.(dirgate.ChangeCoverage); ok && f.c.now().Sub(f.coveredAt) > coverageInterval {
		f.coveredAt = f.c.now()
		if err := cc.ChangeCoverage(ctx); err != nil {
			s := err.Error()
			if f.coverage.Swap(&s) == nil {
				log.Warn("cache: change feed", "coverage", s)
			}
		} else {
			f.coverage.Store(nil)
		}
	}
	if f.shared != nil {
		lctx, cancel := context.WithTimeout(ctx, f.c.cfg.Timeout)
		lead, err := f.shared.lead(lctx, f.id, f.cfg.Lease)
		cancel()
		if err != nil {
			lead = false
			f.setErr(fmt.Errorf("redis: %w", err))
		}
		if lead != f.leader.Load() {
			log.Info("cache: change feed leadership", "leader", lead)
			f.pos = nil // a new leader starts from the stored position
		}
		f.leader.Store(lead)
		if !lead {
			if err == nil {
				f.setErr(nil)
				f.followPosition(ctx)
			}
			return
		}
	} else {
		f.leader.Store(true)
	}
	if f.c.now().Before(f.retryAt) {
		return
	}
	if err := f.readOnce(ctx); err != nil {
		f.setErr(err)
		f.failures++
		backoff := min(f.cfg.Interval<<min(f.failures, 16), maxFeedBackoff)
		f.retryAt = f.c.now().Add(backoff)
		if f.failures == 1 {
			log.Warn("cache: change feed read failed; retrying with backoff (logged once until it succeeds)", "error", err, "max_backoff", maxFeedBackoff)
		}
		return
	}
	if f.failures > 0 {
		log.Info("cache: change feed reads again", "failures", f.failures)
	}
	f.failures, f.retryAt = 0, time.Time{}
	f.setErr(nil)
}

// followPosition reads the leader's position, for lag and readiness.
func (f *Feed) followPosition(ctx context.Context) {
	pctx, cancel := context.WithTimeout(ctx, f.c.cfg.Timeout)
	defer cancel()
	if p, err := f.shared.position(pctx); err == nil && p != nil {
		f.lastPos.Store(p)
	}
}

// readOnce reads one batch from the position and applies it.
func (f *Feed) readOnce(ctx context.Context) error {
	if f.pos == nil {
		var p *dirgate.ChangePosition
		if f.shared != nil {
			pctx, cancel := context.WithTimeout(ctx, f.c.cfg.Timeout)
			var err error
			p, err = f.shared.position(pctx)
			cancel()
			if err != nil {
				return fmt.Errorf("redis: read position: %w", err)
			}
		}
		if p == nil {
			p = &dirgate.ChangePosition{} // the source answers with no_position
		}
		f.pos = p
	}
	b, err := f.cfg.Source.ReadChanges(ctx, *f.pos, f.cfg.MaxBatch)
	if err != nil {
		return err
	}
	if f.forced.Swap(false) && b.Resync == "" {
		b.Resync, b.Detail = dirgate.ResyncForced, "requested"
	}
	if _, inProcess := f.c.store.(*memoryStore); inProcess && b.Resync == dirgate.ResyncNoPosition && !f.c.everFilled() {
		// The first read of an instance that keeps its cache in process and has
		// cached nothing yet: nothing to invalidate.
		b.Resync = ""
	}
	if b.Resync == "" && len(b.Changes) == 0 {
		f.commit(ctx, b.Position)
		return nil
	}
	ev := f.event(b)
	if err := f.c.bumpAll(ctx, f.guids(b, ev)); err != nil {
		return fmt.Errorf("invalidate: %w", err) // the same changes are read again
	}
	if b.Resync != "" {
		f.c.cfg.Logger.Warn("cache: change feed resync: every cached entry is invalidated", "reason", b.Resync, "detail", b.Detail)
		f.metrics.resyncs.Add(ctx, 1, metric.WithAttributes(attribute.String("reason", b.Resync)))
	}
	for _, ch := range b.Changes {
		f.metrics.changes.Add(ctx, 1, metric.WithAttributes(attribute.String("kind", string(ch.Kind))))
	}
	if f.shared != nil {
		pctx, cancel := context.WithTimeout(ctx, f.c.cfg.Timeout)
		err := f.shared.publish(pctx, ev)
		cancel()
		if err != nil {
			// Tokens are already replaced; followers that miss this see a gap.
			f.c.cfg.Logger.Warn("cache: change feed could not publish an event", "error", err)
		}
	} else {
		f.deliver(ev)
	}
	f.commit(ctx, b.Position)
	return nil
}

// commit stores the position (fenced by the lease) and keeps it.
func (f *Feed) commit(ctx context.Context, p dirgate.ChangePosition) {
	if f.shared != nil {
		pctx, cancel := context.WithTimeout(ctx, f.c.cfg.Timeout)
		ok, err := f.shared.storePosition(pctx, f.id, p)
		cancel()
		if err != nil || !ok {
			// Lost the lease or Redis: read again from the stored position.
			f.pos = nil
			return
		}
	}
	f.pos = &p
	f.lastPos.Store(&p)
}

// event is what instances must drop for b.
func (f *Feed) event(b dirgate.ChangeBatch) FeedEvent {
	ev := FeedEvent{All: b.Resync != ""}
	for _, ch := range b.Changes {
		ev.GUIDs = append(ev.GUIDs, ch.GUID)
		ev.Groups = ev.Groups || ch.Kind == dirgate.ChangeGroup
		ev.All = ev.All || !ch.GroupsKnown
	}
	if ev.All {
		ev.GUIDs = nil
	}
	return ev
}

// guids are the tokens to replace for b.
func (f *Feed) guids(b dirgate.ChangeBatch, ev FeedEvent) []string {
	if ev.All {
		return []string{epoch, anyMembershipChange}
	}
	seen := map[string]bool{anyMembershipChange: true}
	out := []string{anyMembershipChange}
	add := func(g string) {
		if !seen[g] && canonicalGUID(g) {
			seen[g] = true
			out = append(out, g)
		}
	}
	for _, ch := range b.Changes {
		add(ch.GUID)
		for _, g := range ch.Groups {
			add(g)
		}
	}
	return out
}

// deliver applies an event to this instance: identifier resolutions kept in the
// first level (not checked against tokens on every request), then the principals.
func (f *Feed) deliver(ev FeedEvent) {
	f.c.dropLookups(ev)
	if f.cfg.OnEvent != nil {
		f.cfg.OnEvent(ev)
	}
}

// followLoop reads the leader's events from the stream, on every instance.
func (f *Feed) followLoop(ctx context.Context) {
	defer f.wg.Done()
	var last streamPos
	for ctx.Err() == nil {
		if last.id == "" {
			p, err := f.shared.streamEnd(ctx)
			if err != nil {
				f.sleep(ctx)
				continue
			}
			last = p
		}
		evs, err := f.shared.read(ctx, last, f.cfg.Interval)
		if err != nil {
			if ctx.Err() == nil {
				f.sleep(ctx)
			}
			continue
		}
		for _, e := range evs {
			if last.seq != 0 && e.pos.seq != last.seq+1 {
				// Events were trimmed or lost: drop everything kept locally.
				f.c.cfg.Logger.Warn("cache: change feed events missed; dropping local identifier resolutions and principals", "from", last.seq, "to", e.pos.seq)
				f.deliver(FeedEvent{All: true})
			}
			f.deliver(e.ev)
			last = e.pos
		}
	}
}

func (f *Feed) sleep(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(f.c.cfg.RetryInterval):
	}
}

// following reports whether entries must record the epoch.
func (c *Cache) following() bool { return c.feed.Load() != nil }

// trackFeed records the epoch token while the feed runs.
func (c *Cache) trackFeed(ctx context.Context, rec *recorder) {
	if c.following() {
		c.track(ctx, rec, epoch)
	}
}

// everFilled reports whether this instance has put anything in its first level.
func (c *Cache) everFilled() bool { return c.l1.len() > 0 }

// bumpAll replaces the tokens of guids, in batches.
func (c *Cache) bumpAll(ctx context.Context, guids []string) error {
	const chunk = 500
	for len(guids) > 0 {
		n := min(chunk, len(guids))
		part := guids[:n]
		guids = guids[n:]
		err := c.op(ctx, true, func(ctx context.Context) error {
			if rs, ok := c.store.(*redisStore); ok {
				return rs.setTokens(ctx, c.keys, part, c.versionTTL)
			}
			for _, g := range part {
				if err := c.store.set(ctx, c.keys.version(g), newToken(), c.versionTTL); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	c.localGen.Add(1)
	_, err := c.announce(ctx)
	return err
}

// dropLookups removes from the first level the identifier resolutions an event
// names (all of them for ev.All). They are the only entries neither checked against
// tokens nor held to the leases.
func (c *Cache) dropLookups(ev FeedEvent) {
	set := make(map[string]bool, len(ev.GUIDs))
	for _, g := range ev.GUIDs {
		set[g] = true
	}
	lookupPrefix := c.keys.prefix + "o:"
	c.dropMu.Lock()
	defer c.dropMu.Unlock()
	c.dropGen.Add(1)
	c.l1.mu.Lock()
	defer c.l1.mu.Unlock()
	for key, el := range c.l1.items {
		if !strings.HasPrefix(key, lookupPrefix) {
			continue
		}
		objs := el.Value.(*l1Item).e.list.Objects()
		if ev.All || len(objs) == 1 && set[objs[0].GUID] {
			c.l1.removeElement(el)
		}
	}
}

// Feed store: the lease, the position and the event stream, in Redis.

// feedStore is the shared part of the feed (redisStore.feed).
type feedStore interface {
	// lead claims the lease or renews it; it reports whether id holds it.
	lead(ctx context.Context, id string, lease time.Duration) (bool, error)
	release(ctx context.Context, id string) error
	position(ctx context.Context) (*dirgate.ChangePosition, error)
	// storePosition stores p if id still holds the lease.
	storePosition(ctx context.Context, id string, p dirgate.ChangePosition) (bool, error)
	publish(ctx context.Context, ev FeedEvent) error
	streamEnd(ctx context.Context) (streamPos, error)
	read(ctx context.Context, from streamPos, block time.Duration) ([]streamEvent, error)
}

type streamPos struct {
	id  string
	seq int64
}

type streamEvent struct {
	pos streamPos
	ev  FeedEvent
	// refused says why the event was not believed (it drops everything).
	refused string
}

// decodePosition parses a stored position: untrusted input, checked.
func decodePosition(s string) (*dirgate.ChangePosition, error) {
	if s == "" {
		return nil, nil
	}
	if len(s) > maxPositionBytes {
		return nil, errors.New("cache: stored position is too long")
	}
	var p dirgate.ChangePosition
	if err := json.Unmarshal([]byte(s), &p); err != nil {
		return nil, fmt.Errorf("cache: stored position: %w", err)
	}
	if p.Source == "" || p.Time.IsZero() {
		return nil, errors.New("cache: stored position is incomplete")
	}
	return &p, nil
}

// Metrics.

type feedMetrics struct {
	changes metric.Int64Counter
	resyncs metric.Int64Counter
	lag     metric.Float64ObservableGauge
	leader  metric.Int64ObservableGauge
	reg     metric.Registration
}

func newFeedMetrics() feedMetrics {
	m := otel.Meter("github.com/dirgate/dirgate/cache")
	var fm feedMetrics
	fm.changes, _ = m.Int64Counter("dirgate_changefeed_changes_total",
		metric.WithDescription("Objects changed in the directory that the change feed invalidated, by kind: group, object or deleted."))
	fm.resyncs, _ = m.Int64Counter("dirgate_changefeed_resyncs_total",
		metric.WithDescription("Times the change feed invalidated everything, by reason."))
	fm.lag, _ = m.Float64ObservableGauge("dirgate_changefeed_lag_seconds",
		metric.WithDescription("Age of the change feed's position: how far behind the directory cached entries may be."), metric.WithUnit("s"))
	fm.leader, _ = m.Int64ObservableGauge("dirgate_changefeed_leader",
		metric.WithDescription("1 on the instance that reads the directory's changes for the deployment, 0 elsewhere."))
	return fm
}

func (fm feedMetrics) register(f *Feed) (metric.Registration, error) {
	m := otel.Meter("github.com/dirgate/dirgate/cache")
	return m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		var lead int64
		if f.leader.Load() {
			lead = 1
		}
		o.ObserveInt64(fm.leader, lead)
		if p := f.lastPos.Load(); p != nil {
			o.ObserveFloat64(fm.lag, f.c.now().Sub(p.Time).Seconds())
		}
		return nil
	}, fm.lag, fm.leader)
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

// lookupFollowed resolves id for the cache while the feed runs. The resolution
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
