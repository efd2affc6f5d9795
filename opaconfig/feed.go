package opaconfig

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	obundle "github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/plugins"
	"github.com/open-policy-agent/opa/v1/plugins/bundle"
	"github.com/open-policy-agent/opa/v1/server"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
)

// Policy is what a feed delivers to: the active policy, or the candidate
// (policy.Authorizer, or candidate.Candidate, whose Replace and Refuse these are).
type Policy interface {
	// Replace loads files, in a policy directory's layout, as the policy in force;
	// one that does not load keeps the last good one and is reported.
	Replace(ctx context.Context, files fs.FS) error
	// Refuse records a bundle that could not be used (download, verification or
	// activation failed): the last good policy stays in force.
	Refuse(ctx context.Context, err error)
}

// feed is one plugin manager and its bundle plugin: OPA downloads, verifies and
// activates the bundles into the manager's store, and the feed hands what the
// store holds to its Policy. The active policy and the candidate have a feed
// each: both define data.dirgate.authz, which one store cannot hold twice.
type feed struct {
	name    string // "policy" or "candidate", for logs
	manager *plugins.Manager
	bundles *bundle.Plugin
	// signal wakes the delivery loop after a bundle status changed; statuses are
	// read under mu.
	signal chan struct{}

	mu       sync.Mutex
	statuses map[string]*bundle.Status
	target   Policy
	current  *snapshot
	lastKey  string // the content and errors last delivered
	done     chan struct{}
	// info is the bundles' revisions for decision events, kept at each delivery
	// rather than read from the store per decision.
	info atomic.Pointer[map[string]server.BundleInfo]
}

// openFeed starts a manager with raw (a configuration naming the feed's bundles)
// and waits until every bundle is activated, from the service or from disk
// (persist), or until wait passes, which is an error when required.
// Every service's client is bounded to maxBytes (bound.go).
func openFeed(ctx context.Context, name string, raw []byte, services map[string]map[string]any, maxBytes int64, id string, logger *slog.Logger, wait time.Duration, required bool, extra func(*plugins.Manager) error) (*feed, error) {
	ol := newOPALogger(logger.With("policy", name))
	m, err := plugins.New(raw, id, inmem.New(), plugins.Logger(ol), plugins.ConsoleLogger(ol))
	if err != nil {
		return nil, fmt.Errorf("opa config: %w", err)
	}
	if err := registerBoundedAuth(m, services, maxBytes); err != nil {
		return nil, err
	}
	if err := m.Init(ctx); err != nil {
		return nil, fmt.Errorf("opa config: %w", err)
	}
	trigger := plugins.DefaultTriggerMode
	bcfg, err := bundle.NewConfigBuilder().WithBytes(m.Config.Bundles).WithServices(m.Services()).
		WithKeyConfigs(m.PublicKeys()).WithTriggerMode(&trigger).Parse()
	if err != nil {
		return nil, fmt.Errorf("opa config: bundles: %w", err)
	}
	f := &feed{name: name, manager: m, bundles: bundle.New(bcfg, m),
		signal: make(chan struct{}, 1), done: make(chan struct{})}
	m.Register(bundle.Name, f.bundles)
	if extra != nil {
		if err := extra(m); err != nil {
			return nil, err
		}
	}
	f.bundles.RegisterBulkListener("dirgate", func(st map[string]*bundle.Status) {
		f.mu.Lock()
		f.statuses = st
		f.mu.Unlock()
		select {
		case f.signal <- struct{}{}:
		default:
		}
	})
	if err := m.Start(ctx); err != nil {
		return nil, fmt.Errorf("opa config: start: %w", err)
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		missing := f.bundles.NotActivated()
		if len(missing) == 0 {
			break
		}
		select {
		case <-f.signal:
			continue
		case <-timer.C:
		case <-ctx.Done():
		}
		if !required {
			break
		}
		// The failures are read before Stop: stopping cancels a download under
		// way, whose "context canceled" would replace the last attempt's reason.
		why := errors.Join(append(f.errors(), ctx.Err())...)
		m.Stop(context.Background())
		err := fmt.Errorf("opa config: no %s bundle %s activated within %s", name, strings.Join(missing, ", "), wait)
		if why != nil {
			err = fmt.Errorf("%w: %w", err, why)
		}
		return nil, err
	}
	revs := f.revisions()
	snap, err := readSnapshot(ctx, m.Store, revs)
	if err != nil {
		m.Stop(context.Background())
		return nil, err
	}
	f.setInfo(revs)
	f.current, f.lastKey = snap, snap.key
	return f, nil
}

// errors are the bundles' last failures, in name order.
func (f *feed) errors() []error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var errs []error
	names := make([]string, 0, len(f.statuses))
	for n := range f.statuses {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		st := f.statuses[n]
		if st.Code == "" && st.Message == "" {
			continue
		}
		msg := st.Message
		if st.HTTPCode != "" {
			msg += " (HTTP " + string(st.HTTPCode) + ")"
		}
		// The compiler's errors (bounded: a bundle may hold many).
		for i, e := range st.Errors {
			if i == 5 {
				msg += fmt.Sprintf("; and %d more", len(st.Errors)-i)
				break
			}
			msg += "; " + e.Error()
		}
		errs = append(errs, fmt.Errorf("bundle %s: %s", n, msg))
	}
	return errs
}

// revisions returns each activated bundle's revision, as the bundle plugin
// records it in the store (data.system.bundles), which also holds the bundles
// activated from disk at start.
func (f *feed) revisions() map[string]string {
	ctx := context.Background()
	out := map[string]string{}
	txn, err := f.manager.Store.NewTransaction(ctx)
	if err != nil {
		return out
	}
	defer f.manager.Store.Abort(ctx, txn)
	for n := range f.bundles.Config().Bundles {
		if rev, err := obundle.ReadBundleRevisionFromStore(ctx, f.manager.Store, txn, n); err == nil {
			out[n] = rev
		}
	}
	return out
}

// bundleInfo is the bundles' revisions as OPA's decision log events carry them.
func (f *feed) bundleInfo() map[string]server.BundleInfo { return *f.info.Load() }

func (f *feed) setInfo(revisions map[string]string) {
	out := map[string]server.BundleInfo{}
	for n, r := range revisions {
		out[n] = server.BundleInfo{Revision: r}
	}
	f.info.Store(&out)
}

// attach starts delivering to p: the bundles activated since openFeed first,
// then each change.
func (f *feed) attach(ctx context.Context, p Policy) {
	f.mu.Lock()
	f.target = p
	f.mu.Unlock()
	go f.loop(ctx)
	select {
	case f.signal <- struct{}{}:
	default:
	}
}

func (f *feed) loop(ctx context.Context) {
	defer close(f.done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.signal:
			f.deliver(ctx)
		}
	}
}

// deliver hands the store's content to the target when it changed, and the
// bundles' failures when they changed: a failure is counted once, not once per
// poll that repeats it.
func (f *feed) deliver(ctx context.Context) {
	errs := f.errors()
	revs := f.revisions()
	f.setInfo(revs)
	for _, n := range f.bundles.NotActivated() {
		if _, ok := revs[n]; !ok {
			errs = append(errs, fmt.Errorf("bundle %s: not activated yet", n))
		}
	}
	snap, err := readSnapshot(ctx, f.manager.Store, revs)
	if err != nil {
		errs = append(errs, err)
		snap = f.current
	}
	key := snap.key
	if err := errors.Join(errs...); err != nil {
		key += "\n" + err.Error()
	}
	f.mu.Lock()
	target, changed := f.target, snap.key != f.current.key
	same := key == f.lastKey
	f.current, f.lastKey = snap, key
	f.mu.Unlock()
	if same || target == nil {
		return
	}
	if changed || len(errs) == 0 {
		// Errors are the policy's own when it does not load (it reports them).
		_ = target.Replace(ctx, snap.files)
	}
	if len(errs) > 0 {
		target.Refuse(ctx, errors.Join(errs...))
	}
}

func (f *feed) stop(ctx context.Context) {
	f.manager.Stop(ctx)
}
