package policy

import (
	"context"
	"reflect"
	"slices"
	"sort"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/dirgate/dirgate"
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
