package policy

// What the decisions API (package policy/explain) asks of a compiled policy
// beyond its decisions: the reasons rule's values, a draft compiled beside the
// policy in force, and what the property policy shows of a listing.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/dirgate/dirgate"
)

// reasonsPath is the optional rule that says what granted a decision.
const reasonsPath = packagePath + ".reasons"

// Active is the policy in force.
func (a *Authorizer) Active() *Compiled { return &Compiled{v: a.current.Load()} }

// Candidate is the shadow's policy in force, nil without a shadow or while none
// has loaded.
func (a *Authorizer) Candidate() *Compiled {
	if a.shadow == nil {
		return nil
	}
	return a.shadow.Current()
}

// CallersView returns objs, group's unfiltered listing with opts, as caller may
// see them in it under c, with a's property policy: those it may view with the
// properties it may read, the others with none. The decisions API shows the
// objects' decisions and reasons, which a policy (a draft above all) can compute
// from input.object.properties, so the caller must not be able to learn through
// them a property it may not read.
func (a *Authorizer) CallersView(ctx context.Context, c *Compiled, caller dirgate.Principal, group dirgate.Object, opts dirgate.ListOptions, objs []dirgate.Object) ([]dirgate.Object, error) {
	v := c.v
	in := Input{Action: ActionView, Subject: caller, Group: group, Request: requestOf(opts)}.normalize()
	allowed := make([]bool, len(objs))
	if _, err := v.filterView(ctx, a.logger, in, objs, allowed, 0); err != nil {
		return nil, err
	}
	wh, err := a.withhold(ctx, v, in, objs, allowed, 0)
	if err != nil {
		return nil, err
	}
	out := make([]dirgate.Object, len(objs))
	j := 0
	for i, o := range objs {
		if allowed[i] {
			out[i] = wh.objs[j]
			j++
			continue
		}
		if len(o.Properties) > 0 {
			o.Properties = map[string][]string{}
		}
		out[i] = o
	}
	return out, nil
}

// WithheldProperties returns, for each object of objs that view allows, the
// names of its properties c's property rule leaves out of in.Subject's listing
// (in.Action view), sorted, with a's secret attributes (nil when none, and for
// objects not viewed).
func (a *Authorizer) WithheldProperties(ctx context.Context, c *Compiled, in Input, objs []dirgate.Object, view []bool) ([][]string, error) {
	v := c.v
	in = in.normalize()
	out := make([][]string, len(objs))
	if !a.mayWithhold(v, in.Request.Properties) {
		return out, nil
	}
	var idx []int
	for i, ok := range view {
		if ok {
			idx = append(idx, i)
		}
	}
	sets, _, err := v.propertySets(ctx, a.logger, in, objs, idx)
	if err != nil {
		return nil, err
	}
	secret := a.secretFunc()
	for j, i := range idx {
		for k := range objs[i].Properties {
			if !sets[j].allows(k, secret) {
				out[i] = append(out[i], k)
			}
		}
		slices.Sort(out[i])
	}
	return out, nil
}

// reasonsQuery evaluates the reasons rule for every object in one evaluation.
const reasonsQuery = `reasons := {i: r |
	some i, obj in input.objects
	doc := object.union(input.base, {"object": obj})
	r := data.dirgate.authz.reasons with input as doc
}`

// Reasons returns, per object of all, the values of the policy's reasons rule
// (data.dirgate.authz.reasons, docs/policy.md, "The decisions API") for in with
// that object: its elements when it is a collection, else the value alone; nil
// when the policy has no such rule, when it is undefined for the object, and for
// the objects allowed does not allow (nothing granted them, and evaluating the
// rule in Rego costs about as much as the decision itself).
func (c *Compiled) Reasons(ctx context.Context, in Input, all []dirgate.Object, allowed []bool) ([][]any, error) {
	return c.v.reasons(ctx, in, all, allowed)
}

func (v *version) reasons(ctx context.Context, in Input, all []dirgate.Object, allowed []bool) ([][]any, error) {
	out := make([][]any, len(all))
	var objs []dirgate.Object
	var index []int // objs[j] is all[index[j]]
	for i := range out {
		if allowed[i] {
			objs, index = append(objs, all[i]), append(index, i)
		}
	}
	if len(objs) == 0 || len(v.compiler.GetRulesForVirtualDocument(ast.MustParseRef(reasonsPath))) == 0 {
		return out, nil
	}
	base, _, err := astValue(in)
	if err != nil {
		return nil, err
	}
	list, _, err := astValue(objs)
	if err != nil {
		return nil, err
	}
	if len(v.nondeterministic) == 0 {
		if rq, err := v.reasonsResidual(ctx, base); err == nil {
			return v.reasonsFromResidual(ctx, rq, base, list, index, out)
		} else if ctx.Err() != nil {
			return nil, fmt.Errorf("reasons: %w", ctx.Err())
		}
	}
	pq, err := rego.New(rego.Compiler(v.compiler), rego.Store(v.store), rego.Query(reasonsQuery)).PrepareForEval(ctx)
	if err != nil {
		return nil, fmt.Errorf("prepare reasons query: %w", err)
	}
	doc := ast.NewObject(
		[2]*ast.Term{ast.InternedTerm("base"), ast.NewTerm(base)},
		[2]*ast.Term{ast.InternedTerm("objects"), ast.NewTerm(list)},
	)
	rs, err := pq.Eval(ctx, rego.EvalParsedInput(doc))
	if err != nil {
		return nil, fmt.Errorf("evaluate %s: %w", reasonsPath, err)
	}
	if len(rs) != 1 {
		return out, nil
	}
	byIndex, _ := rs[0].Bindings["reasons"].(map[string]any)
	for k, val := range byIndex {
		var i int
		if _, err := fmt.Sscan(k, &i); err != nil || i < 0 || i >= len(index) {
			continue
		}
		out[index[i]] = reasonItems(val)
	}
	return out, nil
}

// reasonsResidualPackage holds the reasons rule partially evaluated for one
// caller (see residualPackage).
const reasonsResidualPackage = "data.__dirgate_reasons__"

// reasonsResidual partially evaluates the reasons rule with input.object unknown,
// as listings do with allow: the caller's part (which roles it holds) is folded
// into constants once, instead of once per object.
func (v *version) reasonsResidual(ctx context.Context, base ast.Value) (*rego.PreparedEvalQuery, error) {
	pq, err := v.partialWith(ctx, rego.Compiler(v.compiler), rego.Store(v.store), rego.StrictBuiltinErrors(false),
		rego.Query("reason = "+reasonsPath+"[_]"), rego.Unknowns([]string{"input.object"}),
		rego.ParsedInput(base))
	if err != nil {
		return nil, fmt.Errorf("partially evaluate reasons: %w", err)
	}
	mod := &ast.Module{Package: &ast.Package{Path: ast.MustParseRef(reasonsResidualPackage)}}
	for _, q := range pq.Queries {
		mod.Rules = append(mod.Rules, &ast.Rule{Head: ast.NewHead(ast.Var("reasons"), ast.VarTerm("reason")), Body: q.Copy(), Module: mod})
	}
	q, err := v.prepareBeside(ctx, mod, pq.Support, "__dirgate_reasons_support_%d__", reasonsResidualPackage+".reasons")
	if err != nil {
		return nil, fmt.Errorf("reasons: %w", err)
	}
	return q, nil
}

// reasonsFromResidual evaluates the residual reasons for each object of list,
// whose reasons go to out[index[j]].
func (v *version) reasonsFromResidual(ctx context.Context, q *rego.PreparedEvalQuery, base, list ast.Value, index []int, out [][]any) ([][]any, error) {
	baseObj, ok := base.(ast.Object)
	arr, ok2 := list.(*ast.Array)
	if !ok || !ok2 || arr.Len() != len(index) {
		return nil, errors.New("reasons: unexpected input shape")
	}
	objectKey := ast.InternedTerm("object")
	for j := range index {
		input := ast.NewObject()
		baseObj.Foreach(func(k, v *ast.Term) { input.Insert(k, v) })
		input.Insert(objectKey, arr.Elem(j))
		rs, err := q.Eval(ctx, rego.EvalParsedInput(input))
		if err != nil {
			return nil, fmt.Errorf("evaluate %s: %w", reasonsPath, err)
		}
		if len(rs) == 1 {
			out[index[j]] = reasonItems(rs[0].Expressions[0].Value)
		}
	}
	return out, nil
}

// reasonItems is a reasons rule's value as a list: its elements when it is a
// collection (a set or an array, as the query returns them), else the value alone.
func reasonItems(val any) []any {
	if items, ok := val.([]any); ok {
		return items
	}
	return []any{val}
}

// Draft compiles mod beside c's modules, replacing those of its package, with
// c's data and the builtins of caps, under revision. A draft's plans end with the
// request that builds them (a draft may loop), and it caches few. The compiler
// cannot be interrupted: ctx is not consulted.
func (c *Compiled) Draft(ctx context.Context, mod *ast.Module, text string, caps *ast.Capabilities) (*Compiled, error) {
	active := c.v
	modules := make(map[string]*ast.Module, len(active.modules)+1)
	for p, m := range active.modules {
		if !m.Package.Path.Equal(mod.Package.Path) {
			modules[p] = m.Copy()
		}
	}
	modules["draft.rego"] = mod
	sum := sha256.Sum256([]byte(text))
	src := &source{modules: modules, data: active.data, revision: "draft-" + hex.EncodeToString(sum[:])[:10]}
	v, err := compileWith(context.WithoutCancel(ctx), src, 64, caps)
	if err != nil {
		return nil, err
	}
	v.draft = true
	return &Compiled{v: v}, nil
}

// ListingInput is the input of deciding a listing's objects for subject
// (in.Object unset), as the Authorizer builds its own.
func ListingInput(action string, subject dirgate.Principal, group dirgate.Object, opts dirgate.ListOptions) Input {
	return Input{Action: action, Subject: subject, Group: group, Request: requestOf(opts)}.normalize()
}
