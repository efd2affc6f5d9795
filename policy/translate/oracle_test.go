package translate_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/policy"
	"github.com/dirgate/dirgate/policy/internal/policytest"
)

// oracle is OPA evaluating the policy once per object with the complete input,
// independently of package policy: what every decision of the Authorizer must
// equal (docs/policy.md, "The contract" and "Which properties a caller may read").
type oracle struct {
	allowQ, propsQ rego.PreparedEvalQuery
	// allowed remembers each input's decision: the listings of a case repeat
	// their inputs (a listing served by its cached plan, a selection).
	allowed map[string]bool
}

func newOracle(modules map[string]string, data map[string]any) (*oracle, error) {
	prep := func(query string) (rego.PreparedEvalQuery, error) {
		opts := []func(*rego.Rego){rego.Query(query), rego.Store(inmem.NewFromObject(data))}
		for name, src := range modules {
			opts = append(opts, rego.Module(name, src))
		}
		return rego.New(opts...).PrepareForEval(context.Background())
	}
	o := oracle{allowed: map[string]bool{}}
	var err error
	if o.allowQ, err = prep("data.dirgate.authz.allow"); err != nil {
		return nil, err
	}
	if o.propsQ, err = prep("data.dirgate.authz.properties"); err != nil {
		return nil, err
	}
	return &o, nil
}

func inputDoc(in policy.Input) any {
	b, err := json.Marshal(in)
	if err != nil {
		panic(err)
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		panic(err)
	}
	return doc
}

// allow is true only when the decision is the boolean true; undefined, any other
// value and an evaluation error deny.
func (o *oracle) allow(in policy.Input) bool {
	key := jsonOf(in)
	if b, ok := o.allowed[key]; ok {
		return b
	}
	rs, err := o.allowQ.Eval(context.Background(), rego.EvalInput(inputDoc(in)))
	b := false
	if err == nil && len(rs) == 1 {
		v, ok := rs[0].Expressions[0].Value.(bool)
		b = ok && v
	}
	o.allowed[key] = b
	return b
}

// kept returns the properties of obj a caller viewing it reads: the rule's value
// when it is a set or an array (its string elements; "*" every attribute that is
// not secret), nothing when it is undefined, of another type or fails, and "*"
// without the rule.
func (o *oracle) kept(in policy.Input, hasRule bool) []string {
	var set []string
	if !hasRule {
		set = []string{"*"}
	} else if rs, err := o.propsQ.Eval(context.Background(), rego.EvalInput(inputDoc(in))); err == nil && len(rs) == 1 {
		if items, ok := rs[0].Expressions[0].Value.([]any); ok {
			for _, it := range items {
				if s, ok := it.(string); ok {
					set = append(set, s)
				}
			}
		}
	}
	var out []string
	for k := range in.Object.Properties {
		if slices.Contains(set, k) || (slices.Contains(set, "*") && !dirgate.NamedOnlyProperty(k, nil)) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// world is one case of the differential check: a policy, its data, callers,
// groups and objects.
type world struct {
	modules  map[string]string
	data     map[string]any
	subjects []dirgate.Principal
	groups   []dirgate.Object
	objs     []dirgate.Object
	// props are the properties each listing requests.
	props []string
	// hasRule: the policy defines data.dirgate.authz.properties.
	hasRule bool
}

// String renders the case so that a failure can be reproduced by hand.
func (w world) String() string {
	var b strings.Builder
	names := make([]string, 0, len(w.modules))
	for n := range w.modules {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "--- %s\n%s\n", n, w.modules[n])
	}
	d, _ := json.Marshal(w.data)
	fmt.Fprintf(&b, "--- data\n%s\n", d)
	return b.String()
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// compareStats counts what a comparison decided.
type compareStats struct {
	decisions int // compared with OPA
	allowed   int // of them, allowed by OPA
	secrets   int // secret properties OPA lets a listing keep
	// modes counts the listings by engine mode (the decision log's).
	modes map[string]int
}

// compareWorld decides every object of w, for every subject and group, as a
// listing (with w.props requested), as a view named by a request, as a removal
// and as an addition, with the Authorizer and with the oracle, and returns the
// differences (nil when there are none) and what it compared.
func compareWorld(a *policy.Authorizer, o *oracle, w world) (diffs []string, st compareStats) {
	ctx := context.Background()
	report := func(what string, p dirgate.Principal, g, obj dirgate.Object, got, want any) {
		if len(diffs) < 20 {
			diffs = append(diffs, fmt.Sprintf("%s: dirgate %v, OPA %v\n  subject %s\n  group %s\n  object %s",
				what, got, want, jsonOf(p), jsonOf(g), jsonOf(obj)))
		}
	}
	props := w.props
	if props == nil {
		props = []string{}
	}
	for _, p := range w.subjects {
		for _, g := range w.groups {
			// The second listing reuses the plan and its decisions; the third is a
			// nested listing, a plan of its own for a policy that reads the request;
			// the fourth is selected with a size limit of 2 (deciding stops at the
			// second object allowed), without properties.
			for round := range 4 {
				opts := dirgate.ListOptions{Properties: props, IncludeIndirect: round == 2}
				byGUID := map[string]dirgate.Object{}
				if round < 3 {
					got, err := a.FilterView(ctx, p, g, opts, w.objs)
					if err != nil {
						diffs = append(diffs, fmt.Sprintf("FilterView: %v", err))
						return diffs, st
					}
					for _, x := range got {
						byGUID[x.GUID] = x
					}
				} else {
					opts = dirgate.ListOptions{Properties: []string{}, SizeLimit: 2}
					sel, err := a.SelectView(ctx, p, g, opts, w.objs, opts.SizeLimit)
					if err != nil {
						diffs = append(diffs, fmt.Sprintf("SelectView: %v", err))
						return diffs, st
					}
					sel.Each(func(i int) { byGUID[w.objs[i].GUID] = w.objs[i] })
				}
				shown := 0
				for i := range w.objs {
					in := policy.Input{Action: policy.ActionView, Subject: p, Object: &w.objs[i], Group: g,
						Request: policy.Request{Properties: opts.Properties, IncludeIndirect: opts.IncludeIndirect, SizeLimit: opts.SizeLimit}}
					want := o.allow(in)
					if want && opts.SizeLimit > 0 {
						shown++
						want = shown <= opts.SizeLimit
					}
					x, listed := byGUID[w.objs[i].GUID]
					st.decisions++
					if want {
						st.allowed++
					}
					if listed != want {
						report(fmt.Sprintf("listing %d", round+1), p, g, w.objs[i], listed, want)
						continue
					}
					if want && len(opts.Properties) > 0 {
						wantProps := o.kept(in, w.hasRule)
						for _, k := range wantProps {
							if dirgate.NamedOnlyProperty(k, nil) {
								st.secrets++
							}
						}
						var gotProps []string
						for k := range x.Properties {
							gotProps = append(gotProps, k)
						}
						sort.Strings(gotProps)
						if !slices.Equal(gotProps, wantProps) {
							report(fmt.Sprintf("properties of listing %d", round+1), p, g, w.objs[i], gotProps, wantProps)
						}
					}
				}
			}
			for i := range w.objs {
				obj := w.objs[i]
				for _, action := range []string{policy.ActionView, policy.ActionRemove, policy.ActionAdd} {
					var err error
					switch action {
					case policy.ActionView:
						err = a.AllowView(ctx, p, g, obj)
					case policy.ActionRemove:
						err = a.AllowRemove(ctx, p, g, obj)
					default:
						err = a.AllowAdd(ctx, p, g, obj)
					}
					var de *dirgate.Error
					if err != nil && (!errors.As(err, &de) || de.Code != dirgate.EFORBIDDEN) {
						diffs = append(diffs, fmt.Sprintf("%s: %v", action, err))
						return diffs, st
					}
					in := policy.Input{Action: action, Subject: p, Object: &obj, Group: g, Request: policy.Request{Properties: []string{}}}
					st.decisions++
					want := o.allow(in)
					if want {
						st.allowed++
					}
					if (err == nil) != want {
						report(action, p, g, obj, err == nil, want)
					}
				}
			}
		}
	}
	return diffs, st
}

// checkWorld opens w's policy in an Authorizer and fails t on any difference
// with the oracle.
func checkWorld(t *testing.T, w world) int {
	t.Helper()
	data := w.data
	if data == nil {
		data = map[string]any{}
	}
	a, _ := policytest.OpenDir(t, w.modules, data)
	o, err := newOracle(w.modules, data)
	if err != nil {
		t.Fatal(err)
	}
	diffs, st := compareWorld(a, o, w)
	for _, d := range diffs {
		t.Error(d)
	}
	if len(diffs) > 0 {
		t.Logf("policy:\n%s", w)
	}
	return st.decisions
}
