package policy

// How the property rule is decided for a listing's objects: a plan per caller and
// request shape, as for allow (Go predicates, one per possible element), or the
// rule evaluated in Rego object by object.

import (
	"context"
	"fmt"
	"log/slog"
	"sort"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/policy/translate"
)

// propertySets evaluates the property rule on objs[i] for each i of idx. Without the
// rule every set is "*". An object whose evaluation fails gets the empty set (every
// requested property withheld) and is counted in failed; the failure is logged.
func (v *version) propertySets(ctx context.Context, logger *slog.Logger, in Input, objs []dirgate.Object, idx []int) (sets []propSet, failed int, err error) {
	sets = make([]propSet, len(idx))
	if !v.hasPropertyRule {
		for j := range sets {
			sets[j] = everyPublic
		}
		return sets, 0, nil
	}
	if len(idx) == 0 {
		return sets, 0, nil
	}
	var pp *propPlan
	if len(v.nondeterministic) == 0 {
		key, err := v.planKey(in)
		if err != nil {
			return nil, 0, err
		}
		p, _, err := v.propPlans.getOrBuild(key, func() (*plan, error) {
			base, _, err := astValue(in)
			if err != nil {
				return nil, err
			}
			// The plan outlives this request, as listings' plans do (planContext).
			pctx, cancel := v.planContext(ctx)
			defer cancel()
			pp := v.buildPropPlan(pctx, logger, base)
			if err := pctx.Err(); err != nil {
				return nil, fmt.Errorf("build property plan: %w", err) // stopped: not a plan
			}
			return &plan{props: pp}, nil
		})
		if err != nil {
			return nil, 0, err
		}
		pp = p.props
	}
	if pp != nil && !pp.rego {
		e := make([]*translate.Env, len(pp.preds))
		for k, pr := range pp.preds {
			if pr != nil {
				e[k] = pr.NewEnv()
			}
		}
		// Objects given the same elements share one set: a mask of the plan's
		// elements names it (beyond 64 elements, each object has its own).
		var memo map[uint64]propSet
		for j, i := range idx {
			var mask uint64
			for k := range pp.names {
				if pr := pp.preds[k]; pr == nil || pr.Allow(e[k], &objs[i]) {
					mask |= 1 << (k % 64)
					if len(pp.names) > 64 {
						sets[j].add(pp.names[k])
					}
				}
			}
			if len(pp.names) > 64 {
				continue
			}
			set, ok := memo[mask]
			if !ok {
				if memo == nil {
					memo = map[uint64]propSet{}
				}
				for k, name := range pp.names {
					if mask&(1<<k) != 0 {
						set.add(name)
					}
				}
				set.id = len(memo) + 1
				memo[mask] = set
			}
			sets[j] = set
		}
		return sets, 0, nil
	}
	return v.propertySetsRego(ctx, logger, in, objs, idx, sets)
}

// propertySetsRego evaluates the property rule in Rego, object by object, with the
// complete input.
func (v *version) propertySetsRego(ctx context.Context, logger *slog.Logger, in Input, objs []dirgate.Object, idx []int, sets []propSet) ([]propSet, int, error) {
	q, err := v.propertyQuery(ctx)
	if err != nil {
		return nil, 0, err
	}
	failed := 0
	for j, i := range idx {
		in.Object = &objs[i]
		val, _, err := astValue(in)
		if err != nil {
			return nil, 0, err
		}
		rs, err := q.Eval(ctx, rego.EvalParsedInput(val))
		if err != nil {
			if ctx.Err() != nil {
				return nil, 0, fmt.Errorf("property rule: %w", ctx.Err())
			}
			if failed == 0 {
				logger.Error("policy: property rule evaluation failed; every requested property withheld",
					"revision", v.revision, "object", objs[i].GUID, "err", err)
			}
			failed++
			continue
		}
		// Undefined (a complete rule whose conditions fail) grants nothing.
		if len(rs) == 1 && len(rs[0].Expressions) == 1 {
			if items, ok := rs[0].Expressions[0].Value.([]any); ok {
				for _, it := range items {
					if s, ok := it.(string); ok {
						sets[j].add(s)
					}
				}
			}
		}
	}
	return sets, failed, nil
}

// propertyQuery prepares the complete evaluation of the property rule, once per
// version.
func (v *version) propertyQuery(ctx context.Context) (*rego.PreparedEvalQuery, error) {
	v.propQueryOnce.Do(func() {
		q, err := rego.New(rego.Compiler(v.compiler), rego.Store(v.store), rego.StrictBuiltinErrors(false),
			rego.Query(propertiesPath)).PrepareForEval(context.WithoutCancel(ctx))
		v.propQuery, v.propQueryErr = &q, err
	})
	if v.propQueryErr != nil {
		return nil, fmt.Errorf("prepare property rule: %w", v.propQueryErr)
	}
	return v.propQuery, nil
}

// propPlan is the property rule partially evaluated for one caller and request
// shape, as listings' plans are for allow: the set's possible elements, each with
// the Go predicate saying for which objects it is in the set.
type propPlan struct {
	names []string
	preds []*translate.Predicate // nil: the element is in every object's set
	// rego: the residual is beyond the translator; evaluate the rule per object.
	rego bool
	why  string
}

// propVar is the query variable that the residual binds to each element.
const propVar = "dirgate_property"

// buildPropPlan partially evaluates the property rule with input.object unknown.
// Each residual query binds the element to a constant under conditions on the
// object; the conditions of each element become one predicate. Anything else (an
// element computed from the object, support rules, a condition the translator
// refuses, a rule whose value may not be a collection) makes a plan that
// evaluates the rule in Rego.
func (v *version) buildPropPlan(ctx context.Context, logger *slog.Logger, base ast.Value) *propPlan {
	if !v.propCollection {
		return &propPlan{rego: true, why: "the property rule's value may not be a set or an array"}
	}
	opts := []func(*rego.Rego){rego.Compiler(v.compiler), rego.Store(v.store), rego.StrictBuiltinErrors(false),
		rego.Query(propVar + " = " + propertiesPath + "[_]"), rego.Unknowns([]string{"input.object"}),
		rego.DisableInlining(v.noInline), rego.ParsedInput(base)}
	tr := newConflictTracer(v.prone)
	if tr != nil {
		opts = append(opts, rego.QueryTracer(tr))
	}
	pq, err := v.partialWith(ctx, opts...)
	if err != nil {
		logger.Warn("policy: partial evaluation of the property rule failed; evaluating it in Rego", "revision", v.revision, "err", err)
		return &propPlan{rego: true, why: "partial evaluation failed"}
	}
	if why := tr.whyFull(); why != "" {
		return &propPlan{rego: true, why: why}
	}
	if len(pq.Support) > 0 {
		return &propPlan{rego: true, why: "residual needs support rules"}
	}
	byName := map[string][]ast.Body{}
	unconditional := map[string]bool{}
	for _, q := range pq.Queries {
		name, rest, ok := splitBinding(q)
		if !ok {
			return &propPlan{rego: true, why: "an element is not a constant"}
		}
		if name == nil {
			continue // not a string: never a property name
		}
		if len(rest) == 0 {
			unconditional[*name] = true
		}
		byName[*name] = append(byName[*name], rest)
	}
	pp := &propPlan{}
	for name := range byName {
		pp.names = append(pp.names, name)
	}
	sort.Strings(pp.names)
	for _, name := range pp.names {
		if unconditional[name] {
			pp.preds = append(pp.preds, nil)
			continue
		}
		pred, err := translate.Residual(byName[name])
		if err != nil {
			return &propPlan{rego: true, why: err.Error()}
		}
		pp.preds = append(pp.preds, pred)
	}
	return pp
}

// splitBinding finds, in one residual query, the expression binding propVar to a
// constant, and returns the constant (nil when it is not a string) and the other
// expressions. ok is false when there is no such single binding.
func splitBinding(q ast.Body) (name *string, rest ast.Body, ok bool) {
	found := false
	for _, e := range q {
		if !found && e.IsEquality() && !e.Negated && len(e.With) == 0 {
			a, b := e.Operand(0), e.Operand(1)
			if v, isVar := b.Value.(ast.Var); isVar && v == propVar {
				a, b = b, a
			}
			if v, isVar := a.Value.(ast.Var); isVar && v == propVar {
				if !ast.IsConstant(b.Value) {
					return nil, nil, false
				}
				found = true
				if s, isStr := b.Value.(ast.String); isStr {
					str := string(s)
					name = &str
				}
				continue
			}
		}
		// Every other expression must not mention the element.
		mentions := false
		ast.WalkVars(e, func(v ast.Var) bool {
			mentions = mentions || v == propVar
			return mentions
		})
		if mentions {
			return nil, nil, false
		}
		rest = append(rest, e)
	}
	return name, rest, found
}
