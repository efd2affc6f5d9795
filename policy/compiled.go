package policy

import (
	"context"
	"io/fs"
	"log/slog"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/dirgate/dirgate"
)

// Shadow is a second policy decided beside the one in force, whose decisions are
// compared with the active ones and never answer (package policy/candidate,
// docs/policy.md, "Trying a change in shadow"). Each method returns what it
// decided differently (nil when it did not decide) and whether its evaluation
// failed; it counts nothing but in Record, which the Authorizer calls only for
// the outcomes a caller sees.
type Shadow interface {
	// View decides a listing and compares it with the active decisions of its
	// first decided objects (allowed[:decided]).
	View(ctx context.Context, in Input, objs []dirgate.Object, allowed []bool, decided int) (*CandidateDiff, bool)
	// ViewOne decides the view of in.Object, as AllowView does.
	ViewOne(ctx context.Context, in Input, allowed bool) (*CandidateDiff, bool)
	// Change decides a removal or an addition; val is in as the policy reads it.
	Change(ctx context.Context, in Input, val ast.Value, allowed bool) (*CandidateDiff, bool)
	// Record counts a compared request.
	Record(ctx context.Context, action string, d *CandidateDiff, failed bool)
	// Current is the shadow's policy in force, nil while none has loaded: the
	// decisions API compares it with the active one.
	Current() *Compiled
}

// Compiled is one compiled policy, loaded by Load: what a Shadow decides with.
// It is immutable but for the plans it caches.
type Compiled struct{ v *version }

// LoadOptions are Load's options.
type LoadOptions struct {
	// PlanCacheSize bounds the plans kept (0: DefaultPlanCacheSize).
	PlanCacheSize int
	// NetworkBuiltins lets the policy call the builtins that reach outside
	// dirgate (PolicyCapabilities).
	NetworkBuiltins bool
	// PlanBudget, when positive, bounds the building of each listing plan, from
	// its start: a shadow's plan must not delay the listings it shadows. A plan
	// that runs out of it is an error, not a plan.
	PlanBudget time.Duration
	// PlanRetry, when positive, is how long a plan whose building failed answers
	// its error at once instead of being built again.
	PlanRetry time.Duration
	// Now is the clock of the load's time (nil: time.Now).
	Now func() time.Time
}

// Load reads and compiles the policy in fsys (a policy directory's layout). It
// returns prev itself when the files have not changed.
func Load(ctx context.Context, fsys fs.FS, prev *Compiled, o LoadOptions) (*Compiled, error) {
	var cur *version
	if prev != nil {
		cur = prev.v
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	v, err := loadVersion(ctx, fsys, cur, o.PlanCacheSize, PolicyCapabilities(o.NetworkBuiltins), now)
	if err != nil {
		return nil, err
	}
	if v == cur {
		return prev, nil
	}
	// Set before the version is shared.
	v.planBudget = o.PlanBudget
	v.plans.retryAfter = o.PlanRetry
	return &Compiled{v: v}, nil
}

// Revision names the policy: a hash of its modules and data.
func (c *Compiled) Revision() string { return c.v.revision }

// Modules counts its Rego modules.
func (c *Compiled) Modules() int { return c.v.files }

// DecideListing decides every object of a listing for in (an input without an
// object), marking the allowed ones in allowed (as long as objs), exactly as
// evaluating the decision once per object would. An object whose evaluation
// fails is denied and logged on logger. The only error is ctx ending, or the
// plan running out of LoadOptions.PlanBudget.
func (c *Compiled) DecideListing(ctx context.Context, logger *slog.Logger, in Input, objs []dirgate.Object, allowed []bool) error {
	_, err := c.v.filterView(ctx, logger, in, objs, allowed, 0)
	return err
}

// DecideOne decides the view of in.Object as a listing's objects are decided,
// without remembering the decision with the listing's.
func (c *Compiled) DecideOne(ctx context.Context, logger *slog.Logger, in Input) (bool, error) {
	return c.v.decideOne(ctx, logger, in)
}

// Decide evaluates the decision for one complete input: allowed only when it is
// the boolean true.
func (c *Compiled) Decide(ctx context.Context, val ast.Value) (bool, error) {
	out, err := c.v.decide(ctx, val)
	return out.allowed, err
}
