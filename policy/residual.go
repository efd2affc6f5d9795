package policy

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/dirgate/dirgate"
)

// residualPackage holds a residual the translator does not understand, as one rule
// per residual query, compiled beside the policy and the support rules partial
// evaluation generated. The name cannot be a policy's: Rego packages do not start
// with an underscore by convention, and dirgate refuses nothing, so it is made
// unlikely rather than impossible, and compile reports a clash.
const residualPackage = "data.__dirgate_residual__"

var residualQuery = residualPackage + ".allow"

// beyondResidual says why a residual cannot decide objects exactly as evaluating
// the policy once per object does, or "" when it can. A residual that needs
// support rules or refers to rules and functions evaluates them in another
// context than the policy does, and OPA's evaluation of rules that may conflict
// depends on that context: it stops evaluating a complete rule's definitions
// that give the value it already has (so a conflict only they reach is never
// raised, and support rules come in another order), and a call whose output
// partial evaluation made a constant (f(x, "a")) skips the definitions giving
// other values (hiding their conflict). Only a residual of builtins over input
// and constants keeps every such meaning; the others are evaluated in full.
func beyondResidual(pq *rego.PartialQueries) string {
	if len(pq.Support) > 0 {
		return "residual needs support rules"
	}
	rules := false
	for _, q := range pq.Queries {
		ast.WalkRefs(q, func(r ast.Ref) bool {
			rules = rules || r[0].Equal(ast.DefaultRootDocument)
			return rules
		})
	}
	if rules {
		return "residual refers to rules"
	}
	return ""
}

// compileResidual prepares a residual for evaluation in Rego: it keeps the caller's
// part of the policy folded into constants (the expensive part of evaluating the
// policy) while letting OPA evaluate what the translator cannot. Conflicts and
// errors keep their meaning: the residual is made of builtins over input and
// constants (beyondResidual).
func (v *version) compileResidual(ctx context.Context, pq *rego.PartialQueries) (*rego.PreparedEvalQuery, error) {
	mod := &ast.Module{Package: &ast.Package{Path: ast.MustParseRef(residualPackage)}}
	for _, q := range pq.Queries {
		body := q.Copy()
		if len(body) == 0 {
			body = ast.NewBody(ast.NewExpr(ast.BooleanTerm(true)))
		}
		mod.Rules = append(mod.Rules, &ast.Rule{
			Head:   ast.NewHead(ast.Var("allow"), nil, ast.BooleanTerm(true)),
			Body:   body,
			Module: mod,
		})
	}
	return v.prepareBeside(ctx, mod, pq.Support, "__dirgate_support_%d__", residualQuery)
}

// prepareBeside compiles mod (a residual) beside the policy's modules and the
// support modules partial evaluation generated (named by supportName, a format
// taking their index), and prepares query on the result.
func (v *version) prepareBeside(ctx context.Context, mod *ast.Module, support []*ast.Module, supportName, query string) (*rego.PreparedEvalQuery, error) {
	modules := make(map[string]*ast.Module, len(v.modules)+len(support)+1)
	for k, m := range v.modules {
		modules[k] = m
	}
	for i, m := range support {
		modules[fmt.Sprintf(supportName, i)] = m
	}
	modules[strings.TrimPrefix(mod.Package.Path.String(), "data.")] = mod
	c := ast.NewCompiler().WithEnablePrintStatements(false)
	if c.Compile(modules); c.Failed() {
		return nil, fmt.Errorf("compile residual: %w", c.Errors)
	}
	q, err := rego.New(rego.Compiler(c), rego.Store(v.store), rego.StrictBuiltinErrors(false), rego.Query(query)).PrepareForEval(ctx)
	if err != nil {
		return nil, fmt.Errorf("prepare residual: %w", err)
	}
	return &q, nil
}

// filterResidual decides each object with the residual, evaluated in Rego. The
// input of each evaluation is the complete input (support rules may read any of
// it), built from the base input and the listing converted once.
func (v *version) filterResidual(ctx context.Context, logger *slog.Logger, q *rego.PreparedEvalQuery, in Input, objs []dirgate.Object, allowed []bool) (filterStats, error) {
	base, _, err := astValue(in)
	if err != nil {
		return filterStats{}, err
	}
	list, _, err := astValue(objs)
	if err != nil {
		return filterStats{}, err
	}
	baseObj, ok := base.(ast.Object)
	arr, ok2 := list.(*ast.Array)
	if !ok || !ok2 || arr.Len() != len(objs) {
		return filterStats{}, fmt.Errorf("convert policy input: unexpected shape")
	}
	st := filterStats{mode: modeResidual}
	objectKey := ast.InternedTerm("object")
	for i := range objs {
		input := ast.NewObject()
		baseObj.Foreach(func(k, v *ast.Term) { input.Insert(k, v) })
		input.Insert(objectKey, arr.Elem(i))
		rs, err := q.Eval(ctx, rego.EvalParsedInput(input))
		if err != nil {
			if err := st.objectFailed(ctx, logger, v.revision, objs[i].GUID, err); err != nil {
				return filterStats{}, err
			}
			continue
		}
		// The residual rules only ever have the value true.
		allowed[i] = len(rs) == 1
	}
	if st.errors > 1 {
		logger.Error("policy: evaluations failed in one listing; objects denied", "revision", v.revision, "count", st.errors)
	}
	return st, nil
}
