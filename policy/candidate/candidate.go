// Package candidate decides a candidate policy in shadow beside the one in
// force (docs/policy.md, "Trying a change in shadow: the candidate policy"): the
// same requests, compared, counted and logged where they differ, and never used
// to answer. It is policy.Authorizer's policy.Shadow, loaded from a directory
// (watched) or from files delivered from elsewhere (OPA bundles: Replace and
// Refuse, as package opaconfig's feed calls them).
package candidate

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/policy"
)

// Config names a candidate policy: a second policy directory whose decisions are
// made beside the active policy's, counted and logged where they differ, and
// never used to answer.
type Config struct {
	// Dir is the candidate's directory, in the active policy's layout. Set it or
	// Files.
	Dir string
	// Files, when set instead of Dir, is a candidate delivered from elsewhere (OPA
	// bundles); Source names it. Replace swaps it.
	Files  fs.FS
	Source string
	// Sample is the fraction of requests the candidate also decides. nil means 1
	// (every request); 0 (or less) means none (the candidate is loaded, for the
	// decisions API, but decides no request).
	Sample *float64
	// Budget bounds the candidate's evaluation for one request, and each building
	// of one of its listing plans. It runs detached from the request's
	// cancellation, so a slow candidate cannot use up the request's deadline and
	// fail the answer. 0 means DefaultBudget.
	Budget time.Duration
	// MaxNamed bounds the GUIDs a comparison names, for the decision line
	// (policy.DecisionLog's MaxNamed); 0 or negative: none, differences are only
	// counted.
	MaxNamed int
	// PlanCacheSize bounds the plans kept per version (0:
	// policy.DefaultPlanCacheSize).
	PlanCacheSize int
	// NetworkBuiltins lets the candidate call the builtins that reach outside
	// dirgate, as the active policy may (policy.PolicyCapabilities).
	NetworkBuiltins bool
	// ReloadDebounce is how long Dir must be quiet after a change before it is
	// reloaded (0: policy.DefaultReloadDebounce).
	ReloadDebounce time.Duration
	// Logger receives loads, failures and evaluation errors (nil:
	// slog.Default()).
	Logger *slog.Logger
	// Now is the clock of Status's times (nil: time.Now).
	Now func() time.Time
}

// DefaultBudget is Config.Budget's default.
const DefaultBudget = time.Second

// Validate reports every problem of the configuration at once.
func (c Config) Validate() error {
	var errs []error
	if s := c.Sample; s != nil && (!(*s <= 1) || math.IsInf(*s, -1)) { // refuses NaN and -Inf too
		errs = append(errs, errors.New("policy: candidate sample must be a number at most 1"))
	}
	if c.Budget < 0 {
		errs = append(errs, errors.New("policy: candidate budget must not be negative"))
	}
	if c.ReloadDebounce < 0 {
		errs = append(errs, errors.New("policy: candidate ReloadDebounce must not be negative"))
	}
	if (c.Dir != "") == (c.Files != nil) {
		errs = append(errs, errors.New("policy: a candidate is a directory or delivered files, one of them"))
	}
	if c.Dir != "" {
		if st, err := os.Stat(c.Dir); err != nil {
			errs = append(errs, fmt.Errorf("policy: candidate directory: %w", err))
		} else if !st.IsDir() {
			errs = append(errs, fmt.Errorf("policy: candidate %s is not a directory", c.Dir))
		}
	}
	return errors.Join(errs...)
}

// Candidate is the candidate policy in shadow. Unlike the active policy, one that
// does not load, at start-up or later, is only reported (Ready, a metric, the log):
// the active policy alone answers, so a broken candidate cannot affect an answer.
type Candidate struct {
	cfg Config
	// fsys is the candidate's files; replaced under mu (Replace).
	fsys fs.FS
	// maxNamed bounds the GUIDs a decision line names (the decision log's bound).
	maxNamed int
	logger   *slog.Logger
	now      func() time.Time
	current  atomic.Pointer[policy.Compiled] // nil until a version loads
	metrics  candidateMetrics

	mu          sync.Mutex // serialises reloads and guards the fields below
	lastErr     error
	lastErrAt   time.Time
	watchCancel func() // stops Watch; nil when not watching
}

var _ policy.Shadow = (*Candidate)(nil)

type candidateMetrics struct {
	differences, reloads, errors metric.Int64Counter
	broken                       metric.Int64Gauge
}

// newCandidateMetrics makes the candidate's instruments under package policy's
// meter, whose series they have always been (docs/operations.md, "Metrics").
func newCandidateMetrics() candidateMetrics {
	m := otel.Meter("github.com/dirgate/dirgate/policy")
	differences, _ := m.Int64Counter("dirgate_policy_candidate_differences",
		metric.WithDescription("Decisions where the candidate policy differs from the active one, by action (view, remove, add) and change (newly_allowed, newly_denied), counted only for objects and requests whose active outcome the caller sees."))
	reloads, _ := m.Int64Counter("dirgate_policy_candidate_reloads",
		metric.WithDescription("Candidate policy loads by outcome (ok, failed)."))
	errs, _ := m.Int64Counter("dirgate_policy_candidate_errors",
		metric.WithDescription("Candidate policy evaluations that failed, panicked or ran out of their budget, by action; the request is answered by the active policy alone and not compared."))
	broken, _ := m.Int64Gauge("dirgate_policy_candidate_broken",
		metric.WithDescription("1 while the candidate policy directory does not load (the last good candidate, if any, is still compared), else 0."))
	return candidateMetrics{differences: differences, reloads: reloads, errors: errs, broken: broken}
}

// Open loads the candidate. Unlike the active policy, one that does not load is
// no error: it is reported (Ready, Status, a metric, the log) until a later load
// succeeds, and compared from then on. Only an invalid Config is an error.
func Open(ctx context.Context, cfg Config) (*Candidate, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	c := &Candidate{cfg: cfg, fsys: cfg.Files, maxNamed: max(cfg.MaxNamed, 0), logger: logger.With("policy", "candidate"),
		now: cfg.Now, metrics: newCandidateMetrics()}
	if c.now == nil {
		c.now = time.Now
	}
	if c.fsys == nil {
		c.fsys = os.DirFS(cfg.Dir)
	}
	c.reload(ctx)
	return c, nil
}

// source names the candidate in logs and its status.
func (c *Candidate) source() string {
	if c.cfg.Dir != "" {
		return c.cfg.Dir
	}
	return c.cfg.Source
}

// reload reads the candidate's directory again; a failure keeps the previous
// candidate (if any) and is reported.
func (c *Candidate) reload(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reloadLocked(ctx)
}

// reloadLocked is reload with c.mu held.
func (c *Candidate) reloadLocked(ctx context.Context) {
	prev := c.current.Load()
	v, err := policy.Load(ctx, c.fsys, prev, policy.LoadOptions{PlanCacheSize: c.cfg.PlanCacheSize,
		NetworkBuiltins: c.cfg.NetworkBuiltins, PlanBudget: c.budgetOf(), PlanRetry: planRetry, Now: c.now})
	if err != nil {
		c.failedLoad(ctx, err)
		return
	}
	c.lastErr = nil
	c.metrics.reloads.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", "ok")))
	c.metrics.broken.Record(ctx, 0)
	if v != prev {
		c.current.Store(v)
		c.logger.Info("candidate policy loaded", "source", c.source(), "revision", v.Revision(), "modules", v.Modules())
	}
}

// failedLoad records a load of the candidate that brought no usable policy, with
// c.mu held.
func (c *Candidate) failedLoad(ctx context.Context, err error) {
	c.lastErr, c.lastErrAt = err, c.now()
	c.metrics.reloads.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", "failed")))
	c.metrics.broken.Record(ctx, 1)
	c.logger.Error("candidate policy does not load; answers are unaffected", "source", c.source(), "err", err)
}

// sampled returns the candidate version when this request is to be compared.
func (c *Candidate) sampled() *policy.Compiled {
	if p := c.cfg.Sample; p != nil {
		if s := *p; s <= 0 || s < 1 && rand.Float64() >= s {
			return nil
		}
	}
	return c.current.Load()
}

// View decides a listing under the candidate and compares it with the active
// policy's decisions of its first decided objects. The candidate decides the whole
// listing, with no size limit, so that its plan remembers complete decisions and a
// cached listing costs it no more than the active policy. failed tells that the
// evaluation failed (d is then nil); nothing is counted here (Record).
func (c *Candidate) View(ctx context.Context, in policy.Input, objs []dirgate.Object, allowed []bool, decided int) (d *policy.CandidateDiff, failed bool) {
	v := c.sampled()
	if v == nil {
		return nil, false
	}
	ctx, cancel := c.budget(ctx)
	defer cancel()
	defer c.isolate(policy.ActionView, v, &d, &failed)
	buf := candidateBools.Get().(*[]bool)
	defer candidateBools.Put(buf)
	if cap(*buf) < len(objs) {
		*buf = make([]bool, len(objs))
	}
	cand := (*buf)[:len(objs)]
	clear(cand)
	testHook(policy.ActionView)
	if err := v.DecideListing(ctx, c.logger, in, objs, cand); err != nil {
		c.failed(policy.ActionView, v, err)
		return nil, true
	}
	d = &policy.CandidateDiff{Revision: v.Revision()}
	for i := range decided {
		if allowed[i] != cand[i] {
			c.add(d, objs[i].GUID, cand[i])
		}
	}
	return d, false
}

// candidateBools are the candidate's decisions of a listing, reused between
// requests: a listing of thousands of objects would otherwise allocate as many.
var candidateBools = sync.Pool{New: func() any { return new([]bool) }}

// Change decides one membership change under the candidate. failed tells that
// the evaluation failed (an error decided as a denial is still compared); nothing is
// counted here (Record).
func (c *Candidate) Change(ctx context.Context, in policy.Input, val ast.Value, allowed bool) (d *policy.CandidateDiff, failed bool) {
	v := c.sampled()
	if v == nil || val == nil {
		return nil, false
	}
	ctx, cancel := c.budget(ctx)
	defer cancel()
	defer c.isolate(in.Action, v, &d, &failed)
	testHook(in.Action)
	got, err := v.Decide(ctx, val)
	if err != nil {
		if ctx.Err() != nil {
			c.failed(in.Action, v, err)
			return nil, true
		}
		failed = true
		c.logger.Error("candidate policy: evaluation failed; "+in.Action+" would be denied", "revision", v.Revision(), "err", err)
	}
	d = &policy.CandidateDiff{Revision: v.Revision()}
	if got = got && err == nil; got != allowed {
		c.add(d, in.Object.GUID, got)
	}
	return d, failed
}

// budget returns the context the candidate evaluates under: detached from the
// request's cancellation and deadline (its values, such as the trace, are kept),
// and bounded by the candidate's own budget.
func (c *Candidate) budget(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), c.budgetOf())
}

// planRetry is how long a candidate's listing plan that ran out of its
// budget is not tried again: the listings of that plan are compared no more
// (counted as candidate errors) instead of each waiting the whole budget.
const planRetry = 30 * time.Second

// budgetOf is the candidate's budget per request, which also bounds the building
// of each of its listing plans (policy.LoadOptions.PlanBudget).
func (c *Candidate) budgetOf() time.Duration {
	if b := c.cfg.Budget; b != 0 {
		return b
	}
	return DefaultBudget
}

// failed logs a candidate evaluation that ended in an error: the request is not
// compared. It is counted by record, when the request's outcome is one its caller
// sees.
func (c *Candidate) failed(action string, v *policy.Compiled, err error) {
	c.logger.Warn("candidate policy: evaluation failed or ran out of its budget; not compared", "action", action,
		"revision", v.Revision(), "err", err)
}

// isolate, deferred, turns a panic in the candidate's evaluation into a failed
// evaluation: the active policy's answer stands, the request is not compared.
func (c *Candidate) isolate(action string, v *policy.Compiled, d **policy.CandidateDiff, failed *bool) {
	if r := recover(); r != nil {
		*d, *failed = nil, true
		c.failed(action, v, fmt.Errorf("panic: %v", r))
	}
}

// testHook is called before each candidate evaluation; tests replace it
// (export_test.go) to make one panic.
var testHook = func(string) {}

// add records in d that the candidate would newly allow (or deny) the object
// guid, naming at most maxNamed objects in all.
func (c *Candidate) add(d *policy.CandidateDiff, guid string, nowAllowed bool) {
	named := len(d.NewlyAllowed)+len(d.NewlyDenied) < c.maxNamed
	if nowAllowed {
		d.NAllowed++
		if named {
			d.NewlyAllowed = append(d.NewlyAllowed, guid)
		}
	} else {
		d.NDenied++
		if named {
			d.NewlyDenied = append(d.NewlyDenied, guid)
		}
	}
}

// Record counts a compared request in dirgate_policy_candidate_differences and
// dirgate_policy_candidate_errors. The Authorizer calls it only for a request whose
// outcome its caller sees, and never with differences about objects the active
// policy hides from it (docs/operations.md, "Metrics"): an object the caller may not
// view must count as one that does not exist, which no candidate decides about.
func (c *Candidate) Record(ctx context.Context, action string, d *policy.CandidateDiff, failed bool) {
	if failed {
		c.metrics.errors.Add(ctx, 1, metric.WithAttributes(attribute.String("action", action)))
	}
	if d == nil {
		return
	}
	if d.NAllowed > 0 {
		c.metrics.differences.Add(ctx, int64(d.NAllowed), metric.WithAttributes(
			attribute.String("action", action), attribute.String("change", "newly_allowed")))
	}
	if d.NDenied > 0 {
		c.metrics.differences.Add(ctx, int64(d.NDenied), metric.WithAttributes(
			attribute.String("action", action), attribute.String("change", "newly_denied")))
	}
}

// Current is the candidate's policy in force, nil while none has loaded.
func (c *Candidate) Current() *policy.Compiled { return c.current.Load() }

// Status describes the candidate policy.
type Status struct {
	Source    string    `json:"source,omitempty"`
	Revision  string    `json:"revision,omitempty"` // empty while none has loaded
	LastError string    `json:"lastError,omitempty"`
	LastErrAt time.Time `json:"lastErrorAt,omitzero"`
}

// Status returns the candidate's state.
func (c *Candidate) Status() Status {
	st := Status{Source: c.source()}
	if v := c.current.Load(); v != nil {
		st.Revision = v.Revision()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lastErr != nil {
		st.LastError, st.LastErrAt = c.lastErr.Error(), c.lastErrAt
	}
	return st
}

// Ready returns an error while the candidate does not load, for readiness
// reports. Like policy.Authorizer's Ready, it names no compiler detail (that is
// in the log).
func (c *Candidate) Ready() error {
	st := c.Status()
	if st.LastError == "" {
		return nil
	}
	if st.Revision == "" {
		return fmt.Errorf("the candidate policy does not load since %s; no candidate is compared (see the log)",
			st.LastErrAt.UTC().Format(time.RFC3339))
	}
	return fmt.Errorf("the candidate policy does not load since %s; still comparing revision %s (see the log)",
		st.LastErrAt.UTC().Format(time.RFC3339), st.Revision)
}

// ViewOne decides one view under the candidate, as AllowView does under the
// active policy, and compares the two; failed tells that the evaluation failed.
// Nothing is counted here (Record).
func (c *Candidate) ViewOne(ctx context.Context, in policy.Input, allowed bool) (d *policy.CandidateDiff, failed bool) {
	v := c.sampled()
	if v == nil {
		return nil, false
	}
	ctx, cancel := c.budget(ctx)
	defer cancel()
	defer c.isolate(policy.ActionView, v, &d, &failed)
	testHook(policy.ActionView)
	got, err := v.DecideOne(ctx, c.logger, in)
	if err != nil {
		if ctx.Err() != nil {
			c.failed(policy.ActionView, v, err)
			return nil, true
		}
		failed = true
		c.logger.Error("candidate policy: evaluation failed; view would be denied", "revision", v.Revision(), "err", err)
		got = false
	}
	d = &policy.CandidateDiff{Revision: v.Revision()}
	if got != allowed {
		c.add(d, in.Object.GUID, got)
	}
	return d, failed
}

// Watch reloads the candidate whenever its directory changes, as
// policy.Authorizer's Watch does the active policy's, until ctx ends or Close is
// called. A delivered candidate (Config.Files) changes by Replace: nothing is
// watched.
func (c *Candidate) Watch(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.watchCancel != nil {
		return errors.New("policy: already watching the candidate")
	}
	stop := func() {}
	if c.cfg.Dir != "" {
		var err error
		if stop, err = policy.WatchDir(ctx, c.cfg.Dir, c.cfg.ReloadDebounce, c.logger, c.reload); err != nil {
			return err
		}
	}
	c.watchCancel = stop
	return nil
}

// Close stops watching the candidate's directory.
func (c *Candidate) Close() error {
	c.mu.Lock()
	stop := c.watchCancel
	c.watchCancel = nil
	c.mu.Unlock()
	if stop != nil {
		stop()
	}
	return nil
}

// Replace loads fsys as the candidate (Config.Files): a candidate that does not
// load keeps the last good one compared, and is reported, as a directory's is.
func (c *Candidate) Replace(ctx context.Context, fsys fs.FS) error {
	if c.cfg.Files == nil {
		return errors.New("policy: replacing the candidate needs one configured with Files")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fsys = fsys
	c.reloadLocked(ctx)
	if c.lastErr != nil {
		return fmt.Errorf("reload candidate policy: %w", c.lastErr)
	}
	return nil
}

// Refuse records a delivery of the candidate that could not be used before it
// reached the policy (a bundle that failed its download or its signature's
// verification): the last good candidate is still compared.
func (c *Candidate) Refuse(ctx context.Context, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failedLoad(ctx, fmt.Errorf("refused: %w", err))
}
