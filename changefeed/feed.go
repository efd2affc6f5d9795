// Package changefeed follows changes made in the directory by anything but dirgate,
// so that every cached listing, identifier resolution and caller principal follows
// them within seconds (docs/cache.md, "Changes made in the directory").
//
// One instance per deployment reads (the leader, elected with a lease in Redis; every
// instance alone without Redis). It asks the directory what changed since the stored
// position (dirgate.ChangeSource) and invalidates through the Cache it is given (the
// listing cache's version tokens): a changed object's own token, the tokens of the
// groups it is a direct or primary member of (every listing that shows it recorded
// one of them), and every listing that shows memberships. A change whose groups are
// unknown (a deletion) or a position that cannot be trusted invalidates everything
// the cache filled while followed. Only then is the position stored: a leader that
// dies in between makes the next one read the same changes again, never skip them.
//
// Tokens live in the shared store, so that invalidates every instance's listings at
// once. What instances keep outside the store (identifier resolutions in the cache's
// first level, principals) is dropped by each instance when it reads the leader's
// event from a Redis stream; a missed event (sequence gap) drops all of it.
package changefeed

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/fielderr"
	"github.com/dirgate/dirgate/internal/seal"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
)

// Cache is what the feed invalidates: the listing cache (cache.Cache implements it).
type Cache interface {
	// Follow makes every entry filled from now on depend on what InvalidateAll
	// replaces, and identifier resolutions be served without reading tokens (the
	// feed's events drop them through DropLookups).
	Follow()
	// Invalidate invalidates every entry that depends on the objects or groups named
	// (their version tokens) and every listing that shows memberships. An error
	// means the invalidation is not certain everywhere yet: the feed reads the same
	// changes again.
	Invalidate(ctx context.Context, guids []string) error
	// InvalidateAll invalidates everything filled while followed (a resync).
	InvalidateAll(ctx context.Context) error
	// DropLookups drops the identifier resolutions of guids this instance keeps in
	// process, all of them with all.
	DropLookups(guids []string, all bool)
	// Unfilled reports that nothing can be stale: the cache is in process only and
	// has filled nothing yet.
	Unfilled() bool
}

// Feed defaults.
const (
	DefaultInterval = time.Second
	DefaultMaxBatch = 10000
	DefaultLease    = time.Second
)

// leaseSteps is how often per Lease the leader renews its claim and the other
// instances try to take it: a reader that dies is replaced within Lease plus a
// step, and a leader whose renewal is late once still holds the claim.
const leaseSteps = 4

// Config configures Start.
type Config struct {
	// Source says what changed in the directory.
	Source dirgate.ChangeSource
	// Cache is what the feed invalidates.
	Cache Cache
	// Redis, when set, is shared by the deployment's instances: one of them reads
	// (the leader) and the others follow its events. nil: this instance reads alone.
	Redis redis.UniversalClient
	// KeyPrefix starts the feed's keys in Redis (cmd/dirgate passes the cache's).
	KeyPrefix string
	// Secret keys the HMACs of the claim, the position and the events (cmd/dirgate
	// passes the cache's): required with Redis.
	Secret []byte
	// Timeout bounds each Redis operation; RetryInterval is the pause after a failed
	// read of the event stream (cmd/dirgate passes the cache's).
	Timeout, RetryInterval time.Duration
	// Logger receives leadership changes, resyncs and refusals; nil: slog.Default().
	Logger *slog.Logger
	// Interval is how often the leader reads: between MinInterval and MaxInterval
	// (cmd/dirgate binds its changefeed-interval setting to it, docs/settings.md).
	Interval time.Duration
	// MaxBatch bounds the changes one read may return; a larger burst invalidates
	// everything instead.
	MaxBatch int
	// Lease is how long a leader's claim lasts without renewal; another instance
	// takes over within Lease plus a quarter of it of the leader's death, and reads
	// at once. Renewals run apart from the reads, every quarter Lease, so that a
	// read that takes long does not lose the claim. At least four Timeouts.
	Lease time.Duration
	// OnEvent, when set, is told on every instance what changed (to refresh caller
	// principals). It must not block.
	OnEvent func(Event)
	// PerInstance makes every instance read its own source, without an election
	// (the memory upstream: each instance watches its own file).
	PerInstance bool
	// Domain, when set, names the domain whose changes the feed follows (one feed
	// per domain with several domains): every metric carries it as the domain label,
	// and the log lines name it. Each domain's feed needs a KeyPrefix of its own.
	Domain string

	now func() time.Time // tests
}

// Event tells an instance what the leader invalidated.
type Event struct {
	// All: everything (a resync, a deletion, or events this instance missed).
	All bool
	// Groups: some group changed (its members, so any caller's groups may have).
	Groups bool
	// GUIDs are the objects that changed.
	GUIDs []string
}

// Feed is a running change feed.
type Feed struct {
	cfg    Config
	shared feedStore // nil without Redis: this instance reads alone
	id     string    // this instance's lease value

	leader atomic.Bool
	// term counts the times this instance took the lease; gained wakes the reader
	// when it does, so that it reads at once from the stored position.
	term     atomic.Uint64
	readTerm uint64 // the term f.pos belongs to (reader goroutine only)
	gained   chan struct{}
	leaseErr atomic.Pointer[string]                 // the last claim's failure, nil once one succeeds
	lastPos  atomic.Pointer[dirgate.ChangePosition] // the latest position known here
	lastErr  atomic.Pointer[string]
	pos      *dirgate.ChangePosition // the leader's position (reader goroutine only)

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

// errStore marks a read that failed on Redis, not on the directory.
var errStore = errors.New("redis")

// maxFeedBackoff bounds the wait between reads of a directory that keeps failing.
const maxFeedBackoff = 5 * time.Second

const coverageInterval = 10 * time.Minute

// Bounds of Config.Interval: a feed read more often than MinInterval costs the
// directory more than it saves; one read less often than MaxInterval is no longer a
// feed.
const (
	MinInterval = 10 * time.Millisecond
	MaxInterval = time.Hour
)

// Validate reports the problem of c's settings, a *fielderr.Error naming its field.
// A zero Interval takes DefaultInterval. Start checks the rest.
func (c Config) Validate() error {
	if c.Interval != 0 && (c.Interval < MinInterval || c.Interval > MaxInterval) {
		return fielderr.New("Interval", "must be between 10ms and 1h")
	}
	return nil
}

// Start starts following the directory's changes until Close. From now on every
// entry the cache fills depends on the feed (Cache.Follow).
func Start(ctx context.Context, cfg Config) (*Feed, error) {
	if cfg.Source == nil || cfg.Cache == nil {
		return nil, errors.New("change feed: a source and a cache are required")
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("change feed: %w", err)
	}
	shared := cfg.Redis != nil && !cfg.PerInstance
	if shared && len(cfg.Secret) < minSecretLength {
		return nil, fmt.Errorf("change feed: Redis needs a secret of at least %d bytes", minSecretLength)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = defaultTimeout
	}
	if cfg.RetryInterval <= 0 {
		cfg.RetryInterval = defaultRetryInterval
	}
	if cfg.KeyPrefix == "" {
		cfg.KeyPrefix = defaultKeyPrefix
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Domain != "" {
		cfg.Logger = cfg.Logger.With("domain", cfg.Domain)
	}
	if cfg.now == nil {
		cfg.now = time.Now
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = DefaultMaxBatch
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Lease < 4*cfg.Timeout {
		cfg.Lease = 4 * cfg.Timeout
	}
	f := &Feed{cfg: cfg, id: rand.Text(), metrics: newFeedMetrics(cfg.Domain), gained: make(chan struct{}, 1)}
	if shared {
		f.shared = newRedisFeed(cfg.Redis, cfg.KeyPrefix, seal.New(cfg.Secret), cfg.Logger, cfg.now)
	}
	cfg.Cache.Follow()
	ctx, f.cancel = context.WithCancel(context.WithoutCancel(ctx))
	if f.shared != nil {
		f.claim(ctx) // the first read knows whether it leads
		f.wg.Add(2)
		go f.leaseLoop(ctx)
		go f.followLoop(ctx)
	}
	f.wg.Add(1)
	go f.readLoop(ctx)
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
		ctx, cancel := context.WithTimeout(context.Background(), f.cfg.Timeout)
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
	case f.cfg.now().Sub(p.Time) > bound:
		return fmt.Errorf("behind by %s; changes made in the directory are seen within the cache TTL%s",
			f.cfg.now().Sub(p.Time).Round(time.Second), f.failing())
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

// readLoop reads every interval while this instance leads, and at once when it
// takes the lease.
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
		case <-f.gained:
		}
	}
}

// leaseLoop claims or renews the lease every quarter Lease, apart from the reads.
func (f *Feed) leaseLoop(ctx context.Context) {
	defer f.wg.Done()
	t := time.NewTicker(f.cfg.Lease / leaseSteps)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		f.claim(ctx)
	}
}

// claim claims or renews the lease and records whether this instance leads.
func (f *Feed) claim(ctx context.Context) {
	lctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	lead, err := f.shared.lead(lctx, f.id, f.cfg.Lease)
	cancel()
	if err != nil {
		lead = false
		s := fmt.Sprintf("redis: %v", err)
		f.leaseErr.Store(&s)
	} else {
		f.leaseErr.Store(nil)
	}
	if lead == f.leader.Load() {
		return
	}
	f.cfg.Logger.Info("cache: change feed leadership", "leader", lead)
	if lead {
		f.term.Add(1) // before leader: a reader that sees leader sees the new term
	}
	f.leader.Store(lead)
	if lead {
		select {
		case f.gained <- struct{}{}:
		default:
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
	log := f.cfg.Logger
	if cc, ok := f.cfg.Source.(dirgate.ChangeCoverage); ok && f.cfg.now().Sub(f.coveredAt) > coverageInterval {
		f.coveredAt = f.cfg.now()
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
		if !f.leader.Load() {
			if e := f.leaseErr.Load(); e != nil {
				f.lastErr.Store(e)
			} else {
				f.setErr(nil)
				f.followPosition(ctx)
			}
			return
		}
		if t := f.term.Load(); t != f.readTerm {
			// A new term starts from the stored position, and at once.
			f.readTerm, f.pos = t, nil
			f.failures, f.retryAt = 0, time.Time{}
		}
	} else {
		f.leader.Store(true)
	}
	if f.cfg.now().Before(f.retryAt) {
		return
	}
	if err := f.readOnce(ctx); err != nil {
		f.setErr(err)
		f.failures++
		// The directory is retried at the next interval, then after twice as long
		// each time; Redis, which fails over within seconds and which nothing
		// else dials, after its retry interval.
		backoff := min(f.cfg.Interval<<min(f.failures-1, 16), maxFeedBackoff)
		if errors.Is(err, errStore) {
			backoff = f.cfg.RetryInterval
		}
		f.retryAt = f.cfg.now().Add(backoff)
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
	pctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
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
			pctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
			var err error
			p, err = f.shared.position(pctx)
			cancel()
			if err != nil {
				return fmt.Errorf("%w: read position: %w", errStore, err)
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
	if from, to := serverOf(f.pos.Source), serverOf(b.Position.Source); from != "" && to != from {
		// Another DC answers (a failover, or the preferred one back): USNs are per
		// DC, so the source resumed from its mark for this DC or resynced.
		f.cfg.Logger.Info("cache: change feed follows another DC", "from", from, "to", to, "resumed", b.Resync == "", "resync", b.Resync)
	}
	if f.forced.Swap(false) && b.Resync == "" {
		b.Resync, b.Detail = dirgate.ResyncForced, "requested"
	}
	if b.Resync == dirgate.ResyncNoPosition && f.cfg.Cache.Unfilled() {
		// The first read of an instance that keeps its cache in process and has
		// cached nothing yet: nothing to invalidate.
		b.Resync = ""
	}
	if b.Resync == "" && len(b.Changes) == 0 {
		f.commit(ctx, b.Position)
		return nil
	}
	ev := f.event(b)
	if err := f.invalidate(ctx, b, ev); err != nil {
		return fmt.Errorf("%w: invalidate: %w", errStore, err) // the same changes are read again
	}
	if b.Resync != "" {
		f.cfg.Logger.Warn("cache: change feed resync: every cached entry is invalidated", "reason", b.Resync, "detail", b.Detail)
		f.metrics.resyncs.Add(ctx, 1, f.metrics.with(attribute.String("reason", b.Resync)))
	}
	for _, ch := range b.Changes {
		f.metrics.changes.Add(ctx, 1, f.metrics.with(attribute.String("kind", string(ch.Kind))))
	}
	if f.shared != nil {
		pctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
		err := f.shared.publish(pctx, ev)
		cancel()
		if err != nil {
			// Tokens are already replaced; followers that miss this see a gap.
			f.cfg.Logger.Warn("cache: change feed could not publish an event", "error", err)
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
		pctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
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
func (f *Feed) event(b dirgate.ChangeBatch) Event {
	ev := Event{All: b.Resync != ""}
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

// invalidate has the cache invalidate what b changed: everything for ev.All,
// otherwise each changed object and the groups it is a direct or primary member of.
func (f *Feed) invalidate(ctx context.Context, b dirgate.ChangeBatch, ev Event) error {
	if ev.All {
		return f.cfg.Cache.InvalidateAll(ctx)
	}
	var guids []string
	for _, ch := range b.Changes {
		guids = append(guids, ch.GUID)
		guids = append(guids, ch.Groups...)
	}
	return f.cfg.Cache.Invalidate(ctx, guids)
}

// deliver applies an event to this instance: identifier resolutions kept in the
// first level (not checked against tokens on every request), then the principals.
func (f *Feed) deliver(ev Event) {
	f.cfg.Cache.DropLookups(ev.GUIDs, ev.All)
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
		evs, err := f.shared.read(ctx, last, min(f.cfg.Interval, maxFollowBlock))
		if err != nil {
			if ctx.Err() == nil {
				f.sleep(ctx)
			}
			continue
		}
		for _, e := range evs {
			if last.seq != 0 && e.pos.seq != last.seq+1 {
				// Events were trimmed or lost: drop everything kept locally.
				f.cfg.Logger.Warn("cache: change feed events missed; dropping local identifier resolutions and principals", "from", last.seq, "to", e.pos.seq)
				f.deliver(Event{All: true})
			}
			f.deliver(e.ev)
			last = e.pos
		}
	}
}

// maxFollowBlock bounds how long one read of the event stream blocks in Redis: a
// blocked read does not end with its context, so Close waits for it.
const maxFollowBlock = time.Second

func (f *Feed) sleep(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(f.cfg.RetryInterval):
	}
}
