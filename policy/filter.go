package policy

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/policy/translate"
)

// Modes of deciding a listing, as the decision log reports them.
const (
	modeNone      = "none"      // an empty listing: nothing to decide
	modePredicate = "predicate" // the residual, translated to Go
	modeResidual  = "residual"  // the residual, evaluated in Rego per object
	modeRego      = "rego"      // one Rego evaluation over the whole listing
	modePerObject = "rego-per-object"
)

type filterStats struct {
	mode   string
	cached bool
	reused bool // the decisions of the same listing's previous request were reused
	// from holds every decision of the listing, remembered by the plan (nil when
	// they were not): the decision line names the denied objects from it.
	from   *decided
	errors int
	// decided is how many objects, from the first, were decided: all of them unless
	// a size limit was reached first.
	decided int
}

// filterView decides every object of a listing for one caller, marking the allowed
// ones. It gives exactly the decisions of evaluating data.dirgate.authz.allow once
// per object with the complete input, only faster:
//
//  1. the caller's part of the policy is partially evaluated once per (version,
//     caller, request shape) with input.object unknown, and the residual is
//     translated into a Go predicate that is cached for the next requests;
//  2. a residual the translator does not understand, but that refers to none of the
//     policy's rules (beyondResidual), is evaluated in Rego, object by object (the
//     caller's part still folded into constants);
//  3. a policy that calls non-deterministic builtins, that partial evaluation fails
//     on, whose residual refers to its rules, or whose partial evaluation left a
//     rule that may conflict for the object (conflictTracer), is evaluated in Rego,
//     in full, once over the whole listing;
//  4. if that evaluation fails (a conflict or another error for some object), each
//     object is evaluated on its own.
//
// An object whose evaluation fails is denied. With limit > 0 the predicate stops
// once limit objects are allowed; the objects after it are left undecided (false),
// which stats.decided tells.
//
// The only error returned is the request's context ending, or, for a candidate,
// its listing plan running out of the candidate's budget (decideListing).
func (v *version) filterView(ctx context.Context, logger *slog.Logger, in Input, objs []dirgate.Object, allowed []bool, limit int) (filterStats, error) {
	st, err := v.decideListing(ctx, logger, in, objs, &allowed, limit)
	if st.reused {
		copy(allowed, st.from.allowed)
	}
	return st, err
}

// decideShared is filterView deciding into a slice of its own, or, when it reuses
// remembered decisions, answering with those (st.from.allowed): the slice returned
// must not be modified.
func (v *version) decideShared(ctx context.Context, logger *slog.Logger, in Input, objs []dirgate.Object, limit int) ([]bool, filterStats, error) {
	var allowed []bool
	st, err := v.decideListing(ctx, logger, in, objs, &allowed, limit)
	if st.reused {
		allowed = st.from.allowed
	}
	return allowed, st, err
}

// decideListing decides into *into, which it makes when nil, except when it reuses
// remembered decisions (stats.reused): then it writes nothing, and stats.from holds
// them. stats.decided is set.
func (v *version) decideListing(ctx context.Context, logger *slog.Logger, in Input, objs []dirgate.Object, into *[]bool, limit int) (st filterStats, err error) {
	defer func() {
		if st.decided == 0 {
			st.decided = len(objs)
		}
	}()
	// made is where the decisions go, made on first use.
	made := func() []bool {
		if *into == nil {
			*into = make([]bool, len(objs))
		}
		return *into
	}
	if len(objs) == 0 {
		return filterStats{mode: modeNone}, nil
	}
	if len(v.nondeterministic) > 0 || v.partialErr != nil {
		return v.filterRego(ctx, logger, in, objs, made())
	}
	p, cached, err := v.planFor(ctx, logger, in)
	if err != nil {
		return filterStats{}, err
	}
	if p.residual != nil {
		st, err := v.filterResidual(ctx, logger, p.residual, in, objs, made())
		st.cached = cached
		return st, err
	}
	if p.pred == nil {
		st, err := v.filterRego(ctx, logger, in, objs, made())
		st.cached = cached
		return st, err
	}
	// A caller listing the same cached listing again (the same shared slice, which
	// the cache never modifies) gets the same decisions from a deterministic
	// predicate: reuse them rather than visiting every object again.
	if d := p.reused(objs); d != nil {
		return filterStats{mode: modePredicate, cached: cached, reused: true, from: d}, nil
	}
	allowed := made()
	e := p.pred.NewEnv()
	n := 0
	for i := range objs {
		if allowed[i] = p.pred.Allow(e, &objs[i]); allowed[i] {
			if n++; n == limit && i+1 < len(objs) {
				// Enough for the size limit: the rest cannot be shown.
				return filterStats{mode: modePredicate, cached: cached, decided: i + 1}, nil
			}
		}
	}
	d := p.remember(objs, allowed)
	return filterStats{mode: modePredicate, cached: cached, from: d}, nil
}

// planFor returns the plan that decides objects for in, an input without an object
// (the plan leaves input.object unknown), built once per key and cached.
func (v *version) planFor(ctx context.Context, logger *slog.Logger, in Input) (*plan, bool, error) {
	key, err := v.planKey(in)
	if err != nil {
		return nil, false, err
	}
	return v.plans.getOrBuild(key, func() (*plan, error) {
		base, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("encode policy input: %w", err)
		}
		// Built in planContext. A build that runs out of a candidate's budget is an error, not a plan
		// (buildPlan), so it is never kept as one; the failure is remembered for
		// LoadOptions.PlanRetry (planCache.retryAfter; 30 s for a candidate, policy/candidate), so that a permanently slow plan
		// costs one listing its budget every 30 s rather than every listing, while a
		// build that was only slow for a moment (a busy CPU, a garbage collection)
		// is tried again soon.
		pctx, cancel := v.planContext(ctx)
		defer cancel()
		return v.buildPlan(pctx, logger, base)
	})
}

// buildPlan partially evaluates the decision for one base input and translates the
// residual. Failures are not errors: they make a plan that evaluates Rego.
func (v *version) buildPlan(ctx context.Context, logger *slog.Logger, base []byte) (*plan, error) {
	val, err := ast.ValueFromReader(bytes.NewReader(base))
	if err != nil {
		return nil, fmt.Errorf("convert policy input: %w", err)
	}
	pq, full, err := v.residual(ctx, val)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			// Stopped (a candidate's budget, a draft's request), not failed: no
			// plan, so none is cached.
			return nil, fmt.Errorf("build listing plan: %w", ctxErr)
		}
		logger.Warn("policy: partial evaluation failed; evaluating listings in Rego", "revision", v.revision, "err", err)
		return &plan{why: "partial evaluation failed"}, nil
	}
	p := &plan{queries: len(pq.Queries)}
	if why := cmp.Or(full, beyondResidual(pq)); why != "" {
		// Evaluated in full, object by object (filterRego): exact by definition.
		p.why = why
		logger.Debug("policy: residual evaluated in full", "revision", v.revision, "reason", why)
		return p, nil
	}
	pred, err := translate.Residual(pq.Queries)
	if err == nil {
		p.pred = pred
		return p, nil
	}
	p.why = err.Error()
	if p.residual, err = v.compileResidual(ctx, pq); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, fmt.Errorf("build listing plan: %w", ctxErr)
		}
		logger.Warn("policy: residual does not compile; evaluating listings in Rego", "revision", v.revision, "err", err)
		return p, nil
	}
	logger.Debug("policy: residual evaluated in Rego", "revision", v.revision, "reason", p.why)
	return p, nil
}

// filterRego evaluates the decision in Rego for every object: once over the whole
// listing, or, when that fails, object by object.
func (v *version) filterRego(ctx context.Context, logger *slog.Logger, in Input, objs []dirgate.Object, allowed []bool) (filterStats, error) {
	base, _, err := astValue(in)
	if err != nil {
		return filterStats{}, err
	}
	list, _, err := astValue(objs)
	if err != nil {
		return filterStats{}, err
	}
	err = v.decideBatch(ctx, base, list, allowed)
	if err == nil {
		return filterStats{mode: modeRego}, nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return filterStats{}, fmt.Errorf("decide listing: %w", ctxErr)
	}
	clear(allowed)
	st := filterStats{mode: modePerObject}
	for i := range objs {
		in.Object = &objs[i]
		val, _, err := astValue(in)
		if err != nil {
			return filterStats{}, err
		}
		out, err := v.decide(ctx, val)
		if err != nil {
			if err := st.objectFailed(ctx, logger, v.revision, objs[i].GUID, err); err != nil {
				return filterStats{}, err
			}
			continue
		}
		allowed[i] = out.allowed
	}
	if st.errors > 1 {
		logger.Error("policy: evaluations failed in one listing; objects denied", "revision", v.revision, "count", st.errors)
	}
	return st, nil
}

// objectFailed counts a failed evaluation of the object guid, which is denied, and
// logs the first of a listing; it returns the context's error instead when the
// request ended, which fails the whole listing.
func (st *filterStats) objectFailed(ctx context.Context, logger *slog.Logger, revision, guid string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("decide listing: %w", ctxErr)
	}
	if st.errors == 0 {
		logger.Error("policy: evaluation failed; object denied", "revision", revision, "object", guid, "err", err)
	}
	st.errors++
	return nil
}

// isContextErr reports whether err is the end of a request's context.
func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// planContext is the context a plan is built in. A plan outlives the request that
// builds it: its cancellation must not fail the other requests waiting for the same
// plan. A draft's plans are its one request's, and a draft may loop: they end with
// the request. A candidate's plan is bounded by the candidate's budget, counted from
// the build's start rather than from one request's, so a request that joins a build
// waits at most until the build's own deadline, which falls before its own budget
// ends.
func (v *version) planContext(ctx context.Context) (context.Context, context.CancelFunc) {
	switch {
	case v.draft:
		return ctx, func() {}
	case v.planBudget > 0:
		return context.WithTimeout(context.WithoutCancel(ctx), v.planBudget)
	}
	return context.WithoutCancel(ctx), func() {}
}
