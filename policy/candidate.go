package policy

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
)

// CandidateConfig names a candidate policy: a second policy directory whose
// decisions are made beside the active policy's, counted and logged where they
// differ, and never used to answer (docs/policy.md, "Trying a change in shadow").
type CandidateConfig struct {
	// Dir is the candidate's directory, in the active policy's layout. Empty: none,
	// unless Files is set.
	Dir string
	// Files, when set instead of Dir, is a candidate delivered from elsewhere (OPA
	// bundles: external.go); Source names it. ReplaceCandidate swaps it.
	Files  fs.FS
	Source string
	// Sample is the fraction of requests the candidate also decides. 0 means 1 (every
	// request); negative means none (the candidate is loaded, for the decisions API,
	// but decides no request).
	Sample float64
	// Budget bounds the candidate's evaluation for one request, and each building
	// of one of its listing plans. It runs detached from the request's
	// cancellation, so a slow candidate cannot use up the request's deadline and
	// fail the answer. 0 means DefaultCandidateBudget.
	Budget time.Duration
}

// DefaultCandidateBudget is CandidateConfig.Budget's default.
const DefaultCandidateBudget = time.Second

func (c CandidateConfig) validate() []error {
	var errs []error
	if !(c.Sample <= 1) || math.IsInf(c.Sample, -1) { // refuses NaN and -Inf too
		errs = append(errs, errors.New("policy: candidate sample must be a number at most 1"))
	}
	if c.Budget < 0 {
		errs = append(errs, errors.New("policy: candidate budget must not be negative"))
	}
	if c.Dir != "" && c.Files != nil {
		errs = append(errs, errors.New("policy: a candidate directory and delivered files are exclusive"))
	}
	if c.Dir != "" {
		if st, err := os.Stat(c.Dir); err != nil {
			errs = append(errs, fmt.Errorf("policy: candidate directory: %w", err))
		} else if !st.IsDir() {
			errs = append(errs, fmt.Errorf("policy: candidate %s is not a directory", c.Dir))
		}
	}
	return errs
}

// candidate is the candidate policy in shadow. Unlike the active policy, one that
// does not load, at start-up or later, is only reported (Ready, a metric, the log):
// the active policy alone answers, so a broken candidate cannot affect an answer.
type candidate struct {
	cfg CandidateConfig
	// fsys is the candidate's files; replaced under mu (ReplaceCandidate).
	fsys fs.FS
	// maxNamed bounds the GUIDs a decision line names (the decision log's bound).
	maxNamed int
	logger   *slog.Logger
	now      func() time.Time
	size     int
	caps     *ast.Capabilities       // the builtins it may call (nil: every one)
	current  atomic.Pointer[version] // nil until a version loads
	metrics  candidateMetrics

	mu        sync.Mutex // serialises reloads and guards the fields below
	lastErr   error
	lastErrAt time.Time
}

type candidateMetrics struct {
	differences, reloads, errors metric.Int64Counter
	broken                       metric.Int64Gauge
}

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

func openCandidate(ctx context.Context, cfg CandidateConfig, maxNamed int, logger *slog.Logger, now func() time.Time, planCacheSize int, caps *ast.Capabilities) *candidate {
	c := &candidate{cfg: cfg, fsys: cfg.Files, maxNamed: maxNamed, logger: logger.With("policy", "candidate"), now: now, size: planCacheSize, caps: caps, metrics: newCandidateMetrics()}
	if c.fsys == nil {
		c.fsys = os.DirFS(cfg.Dir)
	}
	c.reload(ctx)
	return c
}

// source names the candidate in logs and its status.
func (c *candidate) source() string {
	if c.cfg.Dir != "" {
		return c.cfg.Dir
	}
	return c.cfg.Source
}

// reload reads the candidate's directory again; a failure keeps the previous
// candidate (if any) and is reported.
func (c *candidate) reload(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reloadLocked(ctx)
}

// reloadLocked is reload with c.mu held.
func (c *candidate) reloadLocked(ctx context.Context) {
	prev := c.current.Load()
	v, err := loadVersion(ctx, c.fsys, prev, c.size, c.caps, c.now)
	if err != nil {
		c.failedLoad(ctx, err)
		return
	}
	c.lastErr = nil
	c.metrics.reloads.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", "ok")))
	c.metrics.broken.Record(ctx, 0)
	if v != prev {
		// Set before the version is shared.
		v.planBudget = c.budgetOf()
		v.plans.retryAfter = candidatePlanRetry
		c.current.Store(v)
		c.logger.Info("candidate policy loaded", "source", c.source(), "revision", v.revision, "modules", v.files)
	}
}

// failedLoad records a load of the candidate that brought no usable policy, with
// c.mu held.
func (c *candidate) failedLoad(ctx context.Context, err error) {
	c.lastErr, c.lastErrAt = err, c.now()
	c.metrics.reloads.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", "failed")))
	c.metrics.broken.Record(ctx, 1)
	c.logger.Error("candidate policy does not load; answers are unaffected", "source", c.source(), "err", err)
}

// sampled returns the candidate version when this request is to be compared.
func (c *candidate) sampled() *version {
	if c == nil || c.cfg.Sample < 0 {
		return nil
	}
	if s := c.cfg.Sample; s != 0 && s < 1 && rand.Float64() >= s {
		return nil
	}
	return c.current.Load()
}

// view decides a listing under the candidate and compares it with the active
// policy's decisions of its first decided objects. The candidate decides the whole
// listing, with no size limit, so that its plan remembers complete decisions and a
// cached listing costs it no more than the active policy. failed tells that the
// evaluation failed (d is then nil); nothing is counted here (record).
func (c *candidate) view(ctx context.Context, in Input, objs []dirgate.Object, allowed []bool, decided int) (d *CandidateDiff, failed bool) {
	v := c.sampled()
	if v == nil {
		return nil, false
	}
	ctx, cancel := c.budget(ctx)
	defer cancel()
	defer c.isolate(ActionView, v, &d, &failed)
	buf := candidateBools.Get().(*[]bool)
	defer candidateBools.Put(buf)
	if cap(*buf) < len(objs) {
		*buf = make([]bool, len(objs))
	}
	cand := (*buf)[:len(objs)]
	clear(cand)
	candidateTestHook(ActionView)
	if _, err := v.filterView(ctx, c.logger, in, objs, cand, 0); err != nil {
		c.failed(ActionView, v, err)
		return nil, true
	}
	d = &CandidateDiff{Revision: v.revision, max: c.maxNamed}
	for i := range decided {
		if allowed[i] != cand[i] {
			d.add(objs[i].GUID, cand[i])
		}
	}
	return d, false
}

// candidateBools are the candidate's decisions of a listing, reused between
// requests: a listing of thousands of objects would otherwise allocate as many.
var candidateBools = sync.Pool{New: func() any { return new([]bool) }}

// change decides one membership change under the candidate. failed tells that
// the evaluation failed (an error decided as a denial is still compared); nothing is
// counted here (record).
func (c *candidate) change(ctx context.Context, in Input, val ast.Value, allowed bool) (d *CandidateDiff, failed bool) {
	v := c.sampled()
	if v == nil || val == nil {
		return nil, false
	}
	ctx, cancel := c.budget(ctx)
	defer cancel()
	defer c.isolate(in.Action, v, &d, &failed)
	candidateTestHook(in.Action)
	out, err := v.decide(ctx, val)
	if err != nil {
		if ctx.Err() != nil {
			c.failed(in.Action, v, err)
			return nil, true
		}
		failed = true
		c.logger.Error("candidate policy: evaluation failed; "+in.Action+" would be denied", "revision", v.revision, "err", err)
	}
	d = &CandidateDiff{Revision: v.revision, max: c.maxNamed}
	if got := out.allowed && err == nil; got != allowed {
		d.add(in.Object.GUID, got)
	}
	return d, failed
}

// budget returns the context the candidate evaluates under: detached from the
// request's cancellation and deadline (its values, such as the trace, are kept),
// and bounded by the candidate's own budget.
func (c *candidate) budget(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), c.budgetOf())
}

// candidatePlanRetry is how long a candidate's listing plan that ran out of its
// budget is not tried again: the listings of that plan are compared no more
// (counted as candidate errors) instead of each waiting the whole budget.
const candidatePlanRetry = 30 * time.Second

// budgetOf is the candidate's budget per request, which also bounds the building
// of each of its listing plans (version.planBudget).
func (c *candidate) budgetOf() time.Duration {
	if b := c.cfg.Budget; b != 0 {
		return b
	}
	return DefaultCandidateBudget
}

// failed logs a candidate evaluation that ended in an error: the request is not
// compared. It is counted by record, when the request's outcome is one its caller
// sees.
func (c *candidate) failed(action string, v *version, err error) {
	c.logger.Warn("candidate policy: evaluation failed or ran out of its budget; not compared", "action", action,
		"revision", v.revision, "err", err)
}

// isolate, deferred, turns a panic in the candidate's evaluation into a failed
// evaluation: the active policy's answer stands, the request is not compared.
func (c *candidate) isolate(action string, v *version, d **CandidateDiff, failed *bool) {
	if r := recover(); r != nil {
		*d, *failed = nil, true
		c.failed(action, v, fmt.Errorf("panic: %v", r))
	}
}

// candidateTestHook is called before each candidate evaluation; tests replace it
// (export_test.go) to make one panic.
var candidateTestHook = func(string) {}

func (d *CandidateDiff) add(guid string, nowAllowed bool) {
	named := len(d.NewlyAllowed)+len(d.NewlyDenied) < d.max
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

// record counts a compared request in dirgate_policy_candidate_differences and
// dirgate_policy_candidate_errors. The Authorizer calls it only for a request whose
// outcome its caller sees, and never with differences about objects the active
// policy hides from it (docs/operations.md, "Metrics"): an object the caller may not
// view must count as one that does not exist, which no candidate decides about.
func (c *candidate) record(ctx context.Context, action string, d *CandidateDiff, failed bool) {
	if c == nil {
		return
	}
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

// CandidateStatus describes the candidate policy: zero Source when none is set.
type CandidateStatus struct {
	Source    string    `json:"source,omitempty"`
	Revision  string    `json:"revision,omitempty"` // empty while none has loaded
	LastError string    `json:"lastError,omitempty"`
	LastErrAt time.Time `json:"lastErrorAt,omitzero"`
}

// CandidateStatus returns the candidate's state.
func (a *Authorizer) CandidateStatus() CandidateStatus {
	c := a.cand
	if c == nil {
		return CandidateStatus{}
	}
	st := CandidateStatus{Source: c.source()}
	if v := c.current.Load(); v != nil {
		st.Revision = v.revision
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lastErr != nil {
		st.LastError, st.LastErrAt = c.lastErr.Error(), c.lastErrAt
	}
	return st
}

// CandidateReady returns an error while the candidate directory does not load, for
// readiness reports. Like Ready, it names no compiler detail (that is in the log).
func (a *Authorizer) CandidateReady() error {
	st := a.CandidateStatus()
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
