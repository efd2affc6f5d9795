package policy

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sort"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/policy/translate"
)

// propertiesPath is the optional property rule (docs/policy.md, "Which properties
// a caller may read"): the set of lower-case attribute names the caller may read
// on input.object, "*" standing for every attribute that is not secret.
const propertiesPath = packagePath + ".properties"

var propertiesRef = ast.MustParseRef(propertiesPath)

// allProperties is the element of the property rule that grants every attribute
// that is not secret.
const allProperties = "*"

// propSet is the value of the property rule for one object.
type propSet struct {
	all   bool            // "*": every attribute that is not secret
	names map[string]bool // named explicitly (secret ones included)
	// id > 0 names a set shared by the objects a plan gives the same elements, so
	// that what it keeps of a listing's properties is worked out once (withhold).
	id int
}

// everyPublic is the property set of a policy without the rule.
var everyPublic = propSet{all: true}

func (s propSet) allows(name string, secret func(string) bool) bool {
	return s.names[name] || (s.all && !secret(name))
}

func (s *propSet) add(name string) {
	if name == allProperties {
		s.all = true
		return
	}
	if s.names == nil {
		s.names = map[string]bool{}
	}
	s.names[name] = true
}

// sorted lists the set's elements, "*" included, sorted.
func (s propSet) sorted() []string {
	out := make([]string, 0, len(s.names)+1)
	if s.all {
		out = append(out, allProperties)
	}
	for n := range s.names {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// hasPropertyRule reports whether the policy defines the property rule.
func hasPropertyRule(c *ast.Compiler) bool {
	return len(c.GetRulesForVirtualDocument(propertiesRef)) > 0 || len(c.GetRulesWithPrefix(propertiesRef)) > 0
}

// propertyRuleCollection reports whether every definition of the property rule
// gives a set or an array: a partial set rule (`properties contains x`), or a
// complete rule whose value is written as a set, an array or a comprehension of
// one. Only then are the elements partial evaluation finds (properties[_]) the
// rule's elements: properties[_] also iterates an object's values, which grant
// nothing (docs/policy.md), and a value computed elsewhere could be one.
func propertyRuleCollection(c *ast.Compiler) bool {
	rules := slices.Concat(c.GetRulesForVirtualDocument(propertiesRef), c.GetRulesWithPrefix(propertiesRef))
	for _, r := range rules {
		if !r.Ref().Equal(propertiesRef) {
			return false // properties.x or properties[k]: an object
		}
		for rr := r; rr != nil; rr = rr.Else {
			if rr.Head.RuleKind() == ast.MultiValue {
				continue
			}
			if rr.Head.Value == nil {
				return false
			}
			switch rr.Head.Value.Value.(type) {
			case *ast.Array, ast.Set, *ast.ArrayComprehension, *ast.SetComprehension:
			default:
				return false
			}
		}
	}
	return true
}

// secretFunc returns the test of an attribute "*" does not cover
// (dirgate.NamedOnlyProperty): the built-in lists, names given as OIDs, and the
// attributes the directory's schema marks confidential or DN-valued, as last read.
func (a *Authorizer) secretFunc() func(string) bool {
	return secretOf(a.confidential())
}

// confidential returns the attributes the directory's schema marks confidential,
// as last read: a map replaced, never changed, when the schema is read again
// (dirgate.PropertySchema: DN-valued ones too).
func (a *Authorizer) confidential() map[string]bool {
	if a.cfg.Schema == nil {
		return nil
	}
	return a.cfg.Schema.NamedOnlyProperties()
}

// secretOf is the test of a secret attribute given the confidential ones.
func secretOf(confidential map[string]bool) func(string) bool {
	return func(name string) bool { return dirgate.NamedOnlyProperty(name, confidential) }
}

// mayWithhold reports whether v could leave out some of props (a listing's
// requested properties) for some object: always when the policy has the property
// rule, otherwise only when a requested property is secret.
func (a *Authorizer) mayWithhold(v *version, props []string) bool {
	if len(props) == 0 {
		return false
	}
	if v.hasPropertyRule {
		return true
	}
	secret := a.secretFunc()
	return slices.ContainsFunc(props, secret)
}

// withheld is what the property policy left out of one listing, for its decision
// line.
type withheld struct {
	// objs are the allowed objects (at most the size limit), with altered copies
	// where properties were left out.
	objs []dirgate.Object
	// names are the properties left out of at least one object, sorted.
	names []string
	// count is the number of objects some property was left out of.
	count int
	// errors counts the objects whose property rule failed to evaluate: every
	// requested property was left out of them.
	errors int
	// altered are the properties kept of the objects some were left out of, by
	// position in objs: what a remembered outcome keeps (propOutcome).
	altered []alteredObject
}

type alteredObject struct {
	pos   int
	props map[string][]string // never modified: shared by the requests reusing it
}

// objects rebuilds w's objects over the listing objs it was worked out for from
// the allowed decisions and the remembered altered properties: the remembered
// outcome holds no object (its size is the altered properties, not the listing).
func (w *withheld) objects(objs []dirgate.Object, allowed []bool, limit int) []dirgate.Object {
	n := 0
	for _, ok := range allowed {
		if ok {
			n++
		}
	}
	if limit > 0 && n > limit {
		n = limit
	}
	out := make([]dirgate.Object, 0, n)
	alt := w.altered
	for i, ok := range allowed {
		if !ok {
			continue
		}
		if len(out) == n {
			break
		}
		o := objs[i]
		if len(alt) > 0 && alt[0].pos == len(out) {
			o.Properties = alt[0].props
			alt = alt[1:]
		}
		out = append(out, o)
	}
	return out
}

// propOutcome is a listing's remembered property outcome (decided.props): what
// withhold returned for the remembered decisions, under the plan that made them,
// for these requested properties, size limit and confidential attributes.
type propOutcome struct {
	props        []string
	limit        int
	confidential map[string]bool // compared by identity: replaced, never changed
	wh           *withheld       // without objs; shared, never modified
}

func (o *propOutcome) matches(props []string, limit int, confidential map[string]bool) bool {
	return o.limit == limit && slices.Equal(o.props, props) && sameMap(o.confidential, confidential)
}

// sameMap reports whether a and b are the same map (or both nil). The outcome
// holds its map, so no other map can be allocated at its address meanwhile.
func sameMap(a, b map[string]bool) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// withholdRemembered is withhold for a listing whose decisions allowed are d, the
// plan's remembered decisions (nil when they were not remembered): it reuses the
// outcome remembered with them for the same requested properties, size limit and
// confidential attributes (the altered properties made the first time, and the
// decision line's figures), and otherwise works it out and remembers it. Only what
// depends on nothing else is remembered: d exists only for a deterministic policy's
// translated plan (decideListing), and an outcome in which the rule failed to
// evaluate for some object is not kept. The outcome returned may be shared.
func (a *Authorizer) withholdRemembered(ctx context.Context, v *version, in Input, objs []dirgate.Object, allowed []bool, limit int, d *decided) (*withheld, error) {
	conf := a.confidential()
	if d != nil {
		if o := d.props.Load(); o != nil && o.matches(in.Request.Properties, limit, conf) {
			wh := *o.wh
			wh.objs = o.wh.objects(objs, allowed, limit)
			return &wh, nil
		}
	}
	wh, err := a.withholdWith(ctx, v, in, objs, allowed, limit, secretOf(conf))
	if err != nil {
		return nil, err
	}
	if d != nil && wh.errors == 0 {
		kept := *wh
		kept.objs = nil
		d.props.Store(&propOutcome{props: slices.Clone(in.Request.Properties), limit: limit, confidential: conf, wh: &kept})
	}
	return wh, nil
}

// rememberedWithheld returns the property outcome remembered with the plan's
// remembered decisions of objs for in, without deciding or evaluating anything;
// nil when there is none.
func (a *Authorizer) rememberedWithheld(v *version, in Input, objs []dirgate.Object, limit int) *withheld {
	if len(objs) == 0 || len(v.nondeterministic) > 0 || v.partialErr != nil {
		return nil
	}
	key, err := v.planKey(in)
	if err != nil {
		return nil
	}
	p, ok := v.plans.get(key)
	if !ok || p.pred == nil {
		return nil
	}
	d := p.reused(objs)
	if d == nil {
		return nil
	}
	o := d.props.Load()
	if o == nil || !o.matches(in.Request.Properties, limit, a.confidential()) {
		return nil
	}
	return o.wh
}

// withhold applies v's property rule to the allowed objects of a listing, the first
// limit of them when limit > 0 (the rest are not shown). The objects are shared
// (a cached listing): an object losing a property is copied, with a new
// properties map; the others are returned as they are.
func (a *Authorizer) withhold(ctx context.Context, v *version, in Input, objs []dirgate.Object, allowed []bool, limit int) (*withheld, error) {
	return a.withholdWith(ctx, v, in, objs, allowed, limit, a.secretFunc())
}

// withholdWith is withhold with the given test of a secret attribute.
func (a *Authorizer) withholdWith(ctx context.Context, v *version, in Input, objs []dirgate.Object, allowed []bool, limit int, secret func(string) bool) (*withheld, error) {
	var idx []int
	for i, ok := range allowed {
		if ok {
			if limit > 0 && len(idx) == limit {
				break
			}
			idx = append(idx, i)
		}
	}
	sets, failed, err := v.propertySets(ctx, a.logger, in, objs, idx)
	if err != nil {
		return nil, err
	}
	// What a shared set keeps of the requested properties, worked out once: the
	// objects of a listing fall into a few sets.
	var kept map[int]map[string]bool
	allows := func(s *propSet, k string) bool {
		if s.id == 0 {
			return s.allows(k, secret)
		}
		m, ok := kept[s.id]
		if !ok {
			if kept == nil {
				kept = map[int]map[string]bool{}
			}
			m = make(map[string]bool, len(in.Request.Properties))
			for _, p := range in.Request.Properties {
				m[p] = s.allows(p, secret)
			}
			kept[s.id] = m
		}
		if b, ok := m[k]; ok {
			return b
		}
		return s.allows(k, secret) // not requested: an upstream's extra key
	}
	w := &withheld{objs: make([]dirgate.Object, len(idx)), errors: failed}
	left := map[string]bool{}
	for j, i := range idx {
		o := objs[i]
		set := &sets[j]
		var keep map[string][]string
		for k := range o.Properties {
			if allows(set, k) {
				continue
			}
			left[k] = true
			if keep == nil {
				keep = make(map[string][]string, len(o.Properties))
				for k2, v2 := range o.Properties {
					if allows(set, k2) {
						keep[k2] = v2
					}
				}
			}
		}
		if keep != nil {
			o.Properties = keep
			w.count++
			w.altered = append(w.altered, alteredObject{pos: j, props: keep})
		}
		w.objs[j] = o
	}
	for k := range left {
		w.names = append(w.names, k)
	}
	sort.Strings(w.names)
	return w, nil
}

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
	pq, err := v.partialWith(ctx, rego.Compiler(v.compiler), rego.Store(v.store), rego.StrictBuiltinErrors(false),
		rego.Query(propVar+" = "+propertiesPath+"[_]"), rego.Unknowns([]string{"input.object"}),
		rego.DisableInlining(v.noInline), rego.ParsedInput(base))
	if err != nil {
		logger.Warn("policy: partial evaluation of the property rule failed; evaluating it in Rego", "revision", v.revision, "err", err)
		return &propPlan{rego: true, why: "partial evaluation failed"}
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
