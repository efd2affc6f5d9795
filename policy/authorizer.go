// Package policy decides, in Rego, what each caller may view, remove and add:
// it implements dirgate.Authorizer over a policy directory (OPA bundle layout),
// or files in that layout delivered from elsewhere (external.go), that defines
// data.dirgate.authz.allow; it reloads the policy when it changes and keeps the
// last good version when an edit does not compile. Its rooms do the rest:
// policy/translate turns a listing's residual into Go, policy/decisionlog
// records every decision (through DecisionLog), policy/candidate decides a
// candidate in shadow (through Shadow), and policy/explain answers the
// decisions API. docs/policy.md is the contract for policy authors.
package policy

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dirgate/dirgate"
	bundled "github.com/dirgate/dirgate/rego"
	"github.com/open-policy-agent/opa/v1/ast"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
)

// Defaults of Config.
const (
	DefaultReloadDebounce = 250 * time.Millisecond
	DefaultPlanCacheSize  = 4096
)

// Config is the Authorizer's factory.
type Config struct {
	// Dir is the policy directory: *.rego modules and data.json / data.yaml files
	// in OPA's bundle layout. Empty means the bundled policy (package rego), unless
	// Files is set.
	Dir string
	// Files, when set instead of Dir, is a policy delivered from elsewhere, in the
	// directory's layout (OPA bundles: external.go); Source names it. Replace
	// swaps it for the next delivery.
	Files  fs.FS
	Source string
	// Logger receives reloads, load failures and evaluation errors. nil means
	// slog.Default().
	Logger *slog.Logger
	// DecisionLog receives one record per decision (package policy/decisionlog
	// writes them). nil logs none.
	DecisionLog DecisionLog
	// ReloadDebounce is how long the directory must be quiet after a change before
	// it is reloaded (editors and deployments write several files). 0 means
	// DefaultReloadDebounce.
	ReloadDebounce time.Duration
	// PlanCacheSize bounds the compiled per-caller predicates kept per policy
	// version. 0 means DefaultPlanCacheSize.
	PlanCacheSize int
	// Now is the clock of Status's times. nil means time.Now.
	Now func() time.Time
	// Shadow is a second policy decided in shadow beside this one (package
	// policy/candidate). nil: none.
	Shadow Shadow
	// Schema, when set, names the attributes the directory's schema marks
	// confidential or DN-valued: the property policy treats them as secret, beside
	// the built-in lists (properties.go). nil means the built-in lists only.
	Schema dirgate.PropertySchema
	// NetworkBuiltins lets the policy (and the candidate) call the builtins that
	// reach outside dirgate: http.send, net.lookup_ip_addr, opa.runtime, and JSON
	// schema references fetched from the network. false: a policy that calls them
	// does not compile (PolicyCapabilities).
	NetworkBuiltins bool
}

// Validate reports every problem of the configuration at once.
func (c Config) Validate() error {
	var errs []error
	if c.ReloadDebounce < 0 {
		errs = append(errs, errors.New("policy: ReloadDebounce must not be negative"))
	}
	if c.PlanCacheSize < 0 {
		errs = append(errs, errors.New("policy: PlanCacheSize must not be negative"))
	}
	if c.Dir != "" && c.Files != nil {
		errs = append(errs, errors.New("policy: a policy directory and delivered files are exclusive"))
	}
	if c.Dir != "" {
		if st, err := os.Stat(c.Dir); err != nil {
			errs = append(errs, fmt.Errorf("policy: directory: %w", err))
		} else if !st.IsDir() {
			errs = append(errs, fmt.Errorf("policy: %s is not a directory", c.Dir))
		}
	}
	return errors.Join(errs...)
}

// Authorizer implements dirgate.Authorizer with a Rego policy.
type Authorizer struct {
	cfg    Config
	fsys   fs.FS
	logger *slog.Logger
	dlog   DecisionLog // nil: none
	now    func() time.Time
	// metrics are made at Open, against the meter provider installed by then.
	metrics policyMetrics

	current atomic.Pointer[version]
	// shadow is the candidate policy in shadow; nil without one.
	shadow Shadow

	// broken is set while the directory does not load (dirgate_policy_broken); an
	// atomic, so that a scrape never waits for a reload's compilation.
	broken atomic.Bool
	// stateReg is the callback of dirgate_policy_broken and _info, unregistered by
	// Close.
	stateReg metric.Registration

	mu          sync.Mutex // serialises reloads and guards the fields below
	lastErr     error
	lastErrAt   time.Time
	watchCancel context.CancelFunc
	watchDone   chan struct{}
}

var _ dirgate.Authorizer = (*Authorizer)(nil)

// Open loads and compiles the policy. A policy that does not load is an error:
// dirgate must not start with a policy it cannot evaluate.
func Open(ctx context.Context, cfg Config) (*Authorizer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	a := &Authorizer{cfg: cfg, logger: cfg.Logger, dlog: cfg.DecisionLog, shadow: cfg.Shadow, now: cfg.Now, metrics: newPolicyMetrics()}
	if a.logger == nil {
		a.logger = slog.Default()
	}
	if a.now == nil {
		a.now = time.Now
	}
	a.fsys = bundled.FS
	if cfg.Dir != "" {
		a.fsys = os.DirFS(cfg.Dir)
	} else if cfg.Files != nil {
		a.fsys = cfg.Files
	}
	v, err := a.load(ctx)
	if err != nil {
		return nil, fmt.Errorf("policy %s: %w", a.source(), err)
	}
	a.current.Store(v)
	a.stateReg = a.metrics.observeState(a)
	a.logger.Info("policy loaded", "source", a.source(), "revision", v.revision, "modules", v.files,
		"nondeterministic_builtins", v.nondeterministic)
	return a, nil
}

func (a *Authorizer) source() string {
	switch {
	case a.cfg.Dir != "":
		return a.cfg.Dir
	case a.cfg.Files != nil:
		return a.cfg.Source
	}
	return "bundled"
}

func (a *Authorizer) load(ctx context.Context) (*version, error) {
	return loadVersion(ctx, a.fsys, a.current.Load(), a.cfg.PlanCacheSize, PolicyCapabilities(a.cfg.NetworkBuiltins), a.now)
}

// loadVersion reads and compiles a policy directory; cur is returned as it is when
// the directory has not changed.
func loadVersion(ctx context.Context, fsys fs.FS, cur *version, planCacheSize int, caps *ast.Capabilities, now func() time.Time) (*version, error) {
	src, err := readSource(fsys, loadOptions{})
	if err != nil {
		return nil, err
	}
	if cur != nil && cur.revision == src.revision {
		return cur, nil
	}
	v, err := compileWith(ctx, src, planCacheSize, caps)
	if err != nil {
		return nil, err
	}
	if err := v.checkData(ctx); err != nil {
		return nil, err
	}
	v.loadedAt = now()
	return v, nil
}

// Reload reads the policy directory again. A policy that does not load leaves the
// current version in place; the failure is logged and reported by Status and Ready
// until a later reload succeeds.
func (a *Authorizer) Reload(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.reload(ctx)
}

// reload is Reload with a.mu held.
func (a *Authorizer) reload(ctx context.Context) error {
	prev := a.current.Load()
	v, err := a.load(ctx)
	if err != nil {
		a.failed(ctx, prev, err)
		return fmt.Errorf("reload policy: %w", err)
	}
	a.lastErr = nil
	a.broken.Store(false)
	a.metrics.reloads.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", "ok")))
	if v != prev {
		a.current.Store(v)
		a.logger.Info("policy reloaded", "source", a.source(), "revision", v.revision, "previous", prev.revision,
			"modules", v.files, "nondeterministic_builtins", v.nondeterministic)
	}
	return nil
}

// failed records a reload that brought no usable policy, with a.mu held.
func (a *Authorizer) failed(ctx context.Context, prev *version, err error) {
	a.lastErr, a.lastErrAt = err, a.now()
	a.broken.Store(true)
	a.metrics.reloads.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", "failed")))
	a.logger.Error("policy reload failed; keeping the last good policy", "source", a.source(),
		"revision", prev.revision, "err", err)
}

// Status describes the policy in force.
type Status struct {
	Source    string    `json:"source"` // the directory, "bundled", or Config.Source
	Revision  string    `json:"revision"`
	LoadedAt  time.Time `json:"loadedAt"`
	Modules   int       `json:"modules"`
	LastError string    `json:"lastError,omitempty"` // why the directory's current content does not load
	// LastErrorAt is when LastError happened (zero when there is none).
	LastErrorAt time.Time `json:"lastErrorAt,omitzero"`
	// Nondeterministic lists the non-deterministic builtins the policy calls; such a
	// policy is evaluated on every request.
	Nondeterministic []string `json:"nondeterministic,omitempty"`
}

// Status returns the policy in force and the last reload failure, if any.
func (a *Authorizer) Status() Status {
	v := a.current.Load()
	a.mu.Lock()
	defer a.mu.Unlock()
	st := Status{Source: a.source(), Revision: v.revision, LoadedAt: v.loadedAt, Modules: v.files, Nondeterministic: v.nondeterministic}
	if a.lastErr != nil {
		st.LastError, st.LastErrorAt = a.lastErr.Error(), a.lastErrAt
	}
	return st
}

// Ready returns an error while the policy directory holds a policy that does not
// load (the last good one is still enforced), for readiness checks. Readiness is
// served without authentication, so the error names the revision in force and
// leaves the compiler's detail to the log and Status.
func (a *Authorizer) Ready() error {
	st := a.Status()
	if st.LastError != "" {
		what := "the policy directory does not load"
		if a.cfg.Files != nil {
			what = "no new policy loads from " + a.cfg.Source
		}
		return fmt.Errorf("%s since %s; still enforcing revision %s (see the log)",
			what, st.LastErrorAt.UTC().Format(time.RFC3339), st.Revision)
	}
	return nil
}

// Revision names the policy in force: a hash of its modules and data.
func (a *Authorizer) Revision() string { return a.current.Load().revision }

// FilterView returns the objects of a listing that p may view, in their order.
// Objects whose decision is not the boolean true are omitted. When the listing
// asks for properties the property policy may withhold (mayWithhold), the objects
// returned are the first opts.SizeLimit (all when 0), with the properties p may not
// read left out: altered copies, the listing's objects being shared. Their
// properties are remembered with the listing's remembered decisions
// (withholdRemembered) and shared with the next requests of the same plan: the
// objects returned must not be modified.
func (a *Authorizer) FilterView(ctx context.Context, p dirgate.Principal, group dirgate.Object, opts dirgate.ListOptions, objs []dirgate.Object) ([]dirgate.Object, error) {
	v := a.current.Load()
	allowed, n, _, wh, err := a.decideView(ctx, v, p, group, opts, objs, 0, a.mayWithhold(v, opts.Properties))
	if err != nil {
		return nil, err
	}
	if wh != nil {
		return wh.objs, nil
	}
	out := make([]dirgate.Object, 0, n)
	for i, ok := range allowed {
		if ok {
			out = append(out, objs[i])
		}
	}
	return out, nil
}

var _ dirgate.ViewSelector = (*Authorizer)(nil)

// SelectView is FilterView reporting the positions of the allowed objects instead
// of copying them. With limit > 0, deciding stops once limit objects are allowed,
// and the decision log counts the objects after them as undecided. A selection
// cannot withhold properties: when the policy in force may withhold some of the
// requested ones (mayWithhold), it selects only when the property outcome
// remembered with the listing's remembered decisions (withholdRemembered), for
// opts.SizeLimit, left every property of every object in; otherwise it decides
// and logs nothing and answers dirgate.ErrPropertiesWithheld, for the caller to
// use FilterView (which then remembers the outcome for the next request).
func (a *Authorizer) SelectView(ctx context.Context, p dirgate.Principal, group dirgate.Object, opts dirgate.ListOptions, objs []dirgate.Object, limit int) (dirgate.Selection, error) {
	v := a.current.Load()
	if a.mayWithhold(v, opts.Properties) {
		if limit != opts.SizeLimit {
			return dirgate.Selection{}, dirgate.ErrPropertiesWithheld // the outcome is remembered per size limit
		}
		in := Input{Action: ActionView, Subject: p, Group: group, Request: requestOf(opts)}.normalize()
		if wh := a.rememberedWithheld(v, in, objs, opts.SizeLimit); wh == nil || wh.count+wh.errors > 0 {
			return dirgate.Selection{}, dirgate.ErrPropertiesWithheld
		}
		// Nothing withheld: the decision line is the one FilterView would write.
	}
	allowed, n, from, _, err := a.decideView(ctx, v, p, group, opts, objs, limit, false)
	if err != nil {
		return dirgate.Selection{}, err
	}
	var sel dirgate.Selection
	switch {
	case from == nil:
		sel = dirgate.SelectionOf(allowed)
	case limit > 0 && n > limit:
		sel = from.sel.Clone() // shared: trimmed on a copy
	default:
		return from.sel, nil // shared: made once with the remembered decisions
	}
	sel.Limit(limit)
	return sel, nil
}

// decideView decides a listing for p under v, records the decisions (trace,
// metrics, decision log) and returns them with the number allowed, and the
// remembered decisions they are (nil when they were not remembered). The decisions
// may be the remembered ones, shared: they must not be modified. With props, the
// property rule is applied to the allowed objects (withhold), and its outcome is
// returned and logged on the same line.
func (a *Authorizer) decideView(ctx context.Context, v *version, p dirgate.Principal, group dirgate.Object, opts dirgate.ListOptions, objs []dirgate.Object, limit int, props bool) ([]bool, int, *decided, *withheld, error) {
	start := time.Now()
	ctx, span := tracer().Start(ctx, "policy filter")
	defer span.End()
	recording := span.IsRecording() // attributes cost allocations even for a span nobody records
	if recording {
		span.SetAttributes(attribute.Int("dirgate.objects", len(objs)))
	}
	in := Input{Action: ActionView, Subject: p, Group: group, Request: requestOf(opts)}.normalize()
	allowed, st, err := v.decideShared(ctx, a.logger, in, objs, limit)
	if err != nil {
		span.SetStatus(codes.Error, "evaluation ended")
		return nil, 0, nil, nil, fmt.Errorf("policy: %w", err)
	}
	n := 0
	if st.from != nil {
		n = st.from.sel.Count() // a popcount per 64 decisions
	} else {
		for _, ok := range allowed {
			if ok {
				n++
			}
		}
	}
	var wh *withheld
	if props {
		if wh, err = a.withholdRemembered(ctx, v, in, objs, allowed, opts.SizeLimit, st.from); err != nil {
			span.SetStatus(codes.Error, "evaluation ended")
			return nil, 0, nil, nil, fmt.Errorf("policy: %w", err)
		}
	}
	denied := st.decided - n
	if recording {
		span.SetAttributes(attribute.String("dirgate.policy.revision", v.revision),
			attribute.Int("dirgate.policy.allowed", n), attribute.Int("dirgate.policy.denied", denied))
	}
	// One count per listing, however many objects it decided or hid: the number
	// hidden is what the caller must not learn (docs/auth.md), and a series counting
	// it would tell whoever reads the metrics.
	a.metrics.decisions.Add(ctx, 1, viewAllowed)
	// The candidate is asked before the answer returns, bounded by its budget (its
	// plan's building included): its comparison belongs in this request's decision
	// line, and asking it afterwards would need a bound of its own on the
	// comparisons in flight, which a slow candidate would fill.
	var cand *CandidateDiff
	if a.shadow != nil {
		var failed bool
		cand, failed = a.shadow.View(ctx, in, objs, allowed, st.decided)
		// Only the objects the caller sees are counted: that the candidate would show
		// one the active policy hides is in the decision line alone.
		a.shadow.Record(ctx, ActionView, cand.shownOnly(), failed)
	}
	a.logListing(ctx, v.revision, in, objs, allowed, n, st, start, cand, wh)
	return allowed, n, st.from, wh, nil
}

// AllowRemove returns an EFORBIDDEN error unless the policy allows p to remove
// member from group. An evaluation error denies, and is logged.
func (a *Authorizer) AllowRemove(ctx context.Context, p dirgate.Principal, group, member dirgate.Object) error {
	return a.allowChange(ctx, ActionRemove, p, group, member, "You are not allowed to remove this member from this group.")
}

// AllowAdd returns an EFORBIDDEN error unless the policy allows p to add member to
// group (action "add", member as input.object). An evaluation error denies, and is
// logged.
func (a *Authorizer) AllowAdd(ctx context.Context, p dirgate.Principal, group, member dirgate.Object) error {
	return a.allowChange(ctx, ActionAdd, p, group, member, "You are not allowed to add this member to this group.")
}

// allowChange decides one membership change: one evaluation, one decision-log line,
// one span and one count, whatever the action.
func (a *Authorizer) allowChange(ctx context.Context, action string, p dirgate.Principal, group, member dirgate.Object, denial string) error {
	start := time.Now()
	ctx, span := tracer().Start(ctx, "policy "+action+" decision")
	defer span.End()
	v := a.current.Load()
	in := Input{Action: action, Subject: p, Object: &member, Group: group, Request: requestOf(dirgate.ListOptions{})}.normalize()
	val, _, err := astValue(in)
	var out outcome
	if err == nil {
		out, err = v.decide(ctx, val)
	}
	allowed := out.allowed && err == nil
	if err != nil {
		if isContextErr(err) && ctx.Err() != nil {
			return fmt.Errorf("policy: %w", err)
		}
		a.logger.Error("policy: evaluation failed; "+action+" denied", "revision", v.revision,
			"group", group.GUID, "member", member.GUID, "err", err)
	}
	var cand *CandidateDiff
	candFailed := false
	if a.shadow != nil {
		cand, candFailed = a.shadow.Change(ctx, in, val, allowed)
	}
	a.logChange(ctx, v.revision, in, allowed, err, start, cand)
	decision := map[bool]string{true: "allow", false: "deny"}[allowed]
	span.SetAttributes(attribute.String("dirgate.policy.revision", v.revision), attribute.String("dirgate.policy.decision", decision))
	// A refusal of a member the caller may not view is answered as an unknown member
	// (MemberService.refusal), about which no decision is made: it is counted only
	// when the caller is told it (its 403), as are the candidate's comparison and
	// failures of that request.
	if allowed || a.mayView(ctx, v, in) {
		a.metrics.decisions.Add(ctx, 1, metric.WithAttributes(attribute.String("action", action), attribute.String("decision", decision)))
		if a.shadow != nil {
			a.shadow.Record(ctx, action, cand, candFailed)
		}
	}
	if !allowed {
		return &dirgate.Error{Code: dirgate.EFORBIDDEN, Message: denial, Err: err}
	}
	return nil
}
