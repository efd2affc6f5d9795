package policy

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/dirgate/dirgate"
)

// AllowView returns an EFORBIDDEN error unless the policy allows p to view obj
// itself, named by a request about group (obj is group when the group itself is
// named): action "view", obj as input.object, group as input.group and the
// request's parameters at their zero values, as for a removal. The service answers
// an object p may not view exactly as an unknown one (docs/api.md, "Objects the
// caller may not view"). An evaluation error denies, and is logged.
//
// It is decided by the plan that decides p's listings of group (the same input
// but the object and the request, which the bundled policy does not read), which
// remembers its last such decision: a listing pays the plan's lookup and a
// comparison of the group, and no partial evaluation of its own.
func (a *Authorizer) AllowView(ctx context.Context, p dirgate.Principal, group, obj dirgate.Object) error {
	// No span of its own: on the fast path it is a comparison of a few strings, and
	// a span would cost more than the decision. A denial is in the decision log.
	start := time.Now()
	v := a.current.Load()
	in := Input{Action: ActionView, Subject: p, Object: &obj, Group: group, Request: requestOf(dirgate.ListOptions{})}.normalize()
	allowed, err := v.decideOne(ctx, a.logger, in)
	if err != nil {
		if isContextErr(err) && ctx.Err() != nil {
			return fmt.Errorf("policy: %w", err)
		}
		a.logger.Error("policy: evaluation failed; view denied", "revision", v.revision,
			"group", group.GUID, "object", obj.GUID, "err", err)
		allowed = false
	}
	// A denial ends the request, so its line is the request's one line; an allowed
	// view is followed by the request's own decision (its listing, removal or
	// addition), whose line names the same group and object.
	var cand *CandidateDiff
	candFailed := false
	if a.shadow != nil {
		cand, candFailed = a.shadow.ViewOne(ctx, in, allowed)
	}
	if !allowed || cand.differs() {
		a.logChange(ctx, v.revision, in, allowed, err, start, cand)
	}
	// Not counted in dirgate_policy_decisions: an allowed view is followed by the
	// request's own decision, which is; a denied one is answered as an unknown object,
	// about which nothing is counted, so neither is it, nor the candidate's view of it.
	if allowed && a.shadow != nil {
		a.shadow.Record(ctx, ActionView, cand, candFailed)
	}
	if !allowed {
		return &dirgate.Error{Code: dirgate.EFORBIDDEN, Message: "You are not allowed to view this object.", Err: err}
	}
	return nil
}

// decideOne decides the view of in.Object the way a listing's objects are decided
// (filterView), through the plan for in without its object, but neither reuses
// nor remembers decisions: a one-object decision must not push a listing's
// decisions out of the plan's memory.
func (v *version) decideOne(ctx context.Context, logger *slog.Logger, in Input) (bool, error) {
	obj := in.Object
	in.Object = nil
	var p *plan
	if len(v.nondeterministic) == 0 && v.partialErr == nil {
		var err error
		if p, _, err = v.planFor(ctx, logger, in); err != nil {
			return false, err
		}
		if p.pred != nil {
			return p.allowOne(obj), nil
		}
	}
	allowed := []bool{false}
	var err error
	if p != nil && p.residual != nil {
		_, err = v.filterResidual(ctx, logger, p.residual, in, []dirgate.Object{*obj}, allowed)
	} else {
		_, err = v.filterRego(ctx, logger, in, []dirgate.Object{*obj}, allowed)
	}
	return allowed[0], err
}

// mayView tells whether in's subject may view in's object (its member) under v: a
// refused change is told to the caller only then (MemberService.refusal). An
// evaluation error is a denial, as in AllowView.
func (a *Authorizer) mayView(ctx context.Context, v *version, in Input) bool {
	in.Action, in.Request = ActionView, requestOf(dirgate.ListOptions{})
	ok, err := v.decideOne(ctx, a.logger, in.normalize())
	return ok && err == nil
}

// shownOnly is d without the objects the active policy hid (those the candidate
// would newly allow): what may be counted of a listing's comparison.
func (d *CandidateDiff) shownOnly() *CandidateDiff {
	if d == nil || d.NAllowed == 0 {
		return d
	}
	c := *d
	c.NAllowed = 0
	return &c
}

// differs reports whether the candidate decided differently (false without one).
func (d *CandidateDiff) differs() bool { return d != nil && d.NAllowed+d.NDenied > 0 }

// viewedObject is a predicate's decision on one object, known by every member the
// predicate can read (objectFields in translate/value.go): a listing's plan is asked about
// the same group by every request of its caller.
type viewedObject struct {
	guid, dn, displayName, objectType, domainName string
	objectTypeCode, directoryType                 int
	allowed                                       bool
}

// allowOne decides o with the plan's predicate, or answers the decision it made
// last if o is the same object to the predicate; a deterministic predicate gives
// it again.
func (p *plan) allowOne(o *dirgate.Object) bool {
	key := viewedObject{guid: o.GUID, dn: o.DN, displayName: o.DisplayName, objectType: o.ObjectType,
		domainName: o.DomainName, objectTypeCode: o.ObjectTypeCode, directoryType: o.DirectoryType}
	if last := p.viewed.Load(); last != nil {
		k := *last
		k.allowed = false
		if k == key {
			return last.allowed
		}
	}
	key.allowed = p.pred.Allow(p.pred.NewEnv(), o)
	p.viewed.Store(&key)
	return key.allowed
}
