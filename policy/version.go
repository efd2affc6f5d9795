package policy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
)

// The decision dirgate asks for, and the package that must define it.
const (
	packagePath   = "data.dirgate.authz"
	decisionPath  = packagePath + ".allow"
	decisionQuery = decisionPath
)

var decisionRef = ast.MustParseRef(decisionPath)

// version is one compiled policy: its queries are prepared once, when it is loaded,
// and the Authorizer swaps whole versions atomically, so a request sees one version
// from start to end.
type version struct {
	revision string
	loadedAt time.Time
	files    int

	compiler *ast.Compiler
	store    storage.Store
	modules  map[string]*ast.Module // as parsed, to compile residuals beside them
	data     map[string]any         // as read, for drafts compiled beside the modules (Compiled.Draft, compare.go)

	// allow evaluates the decision for one complete input.
	allow rego.PreparedEvalQuery
	// batch evaluates it for every object of a listing in one evaluation.
	batch rego.PreparedEvalQuery
	// partial evaluates it with input.object unknown, once per caller and request
	// shape; the residual becomes a Go predicate.
	partial    rego.PreparedPartialQuery
	partialErr error // why partial evaluation is unavailable

	// nondeterministic names the non-deterministic builtins the policy calls (time,
	// randomness, HTTP...). Their results must not be reused across requests, so such
	// a policy is evaluated per request and no residual is cached.
	nondeterministic []string
	// noInline are rules partial evaluation must not inline: single-value rules
	// whose definitions can produce different values, where OPA raises a conflict
	// error at evaluation that an inlined residual would not.
	noInline []string
	// prone are noInline's paths, which a plan's partial evaluation watches for
	// (conflictTracer).
	prone []ast.Ref
	// reads are the members of input the policy reads (nil: the whole input, or a
	// member chosen at evaluation). A plan's cache key leaves the others out, so that
	// listings differing only in what the policy ignores (sizeLimit, say) share it.
	reads map[string]bool

	plans *planCache
	// hasPropertyRule: the policy defines the property rule (properties.go).
	hasPropertyRule bool
	// propCollection: every definition of the property rule gives a set or an
	// array (propertyRuleCollection), a condition of translating it.
	propCollection bool
	// propPlans are the property rule's plans, keyed as plans are.
	propPlans     *planCache
	propQueryOnce sync.Once
	propQuery     *rego.PreparedEvalQuery
	propQueryErr  error
	// draft marks a draft tried through the decisions API (Compiled.Draft, compare.go).
	draft bool
	// planBudget, when positive, bounds the building of each listing plan: a
	// candidate's budget (policy/candidate, LoadOptions.PlanBudget), so that a candidate whose partial
	// evaluation is slow or loops cannot delay the listings it shadows.
	planBudget time.Duration
}

// batchQuery evaluates the decision for each input.objects[i] in one evaluation,
// giving every object exactly the input a single evaluation would see.
const batchQuery = `allowed := [i |
	some i, obj in input.objects
	doc := object.union(input.base, {"object": obj})
	data.dirgate.authz.allow == true with input as doc
]`

// outsideBuiltins reach outside dirgate: the network (an HTTP request, a DNS
// query, either of which can carry input.object's properties away) and OPA's
// runtime (its environment and configuration). Named rather than taken from
// the non-deterministic flag, which also covers time and randomness.
var outsideBuiltins = map[string]bool{"http.send": true, "net.lookup_ip_addr": true, "opa.runtime": true}

// PolicyCapabilities are the builtins a policy may call: nil (every builtin of
// this OPA) with network, else every builtin but outsideBuiltins, with no
// network host allowed (which also keeps json.match_schema and
// json.verify_schema from fetching a remote $ref). A policy that calls a builtin
// left out does not compile.
func PolicyCapabilities(network bool) *ast.Capabilities {
	if network {
		return nil
	}
	caps := ast.CapabilitiesForThisVersion()
	caps.Builtins = slices.DeleteFunc(caps.Builtins, func(b *ast.Builtin) bool { return outsideBuiltins[b.Name] })
	caps.AllowNet = []string{}
	return caps
}

// compileWith builds a version from a policy directory's modules and data,
// restricted to the builtins of caps (nil: every builtin). It fails on anything
// that would make decisions unreliable: a module that does not compile, data
// that collides with a rule, or a policy that does not define the decision.
func compileWith(ctx context.Context, src *source, planCacheSize int, caps *ast.Capabilities) (*version, error) {
	store := inmem.NewFromObject(src.data)
	txn, err := store.NewTransaction(ctx)
	if err != nil {
		return nil, fmt.Errorf("compile policy: %w", err)
	}
	defer store.Abort(ctx, txn)
	c := ast.NewCompiler().
		WithEnablePrintStatements(false).
		WithPathConflictsCheck(storage.NonEmpty(ctx, store, txn))
	if caps != nil {
		c = c.WithCapabilities(caps)
	}
	if c.Compile(src.modules); c.Failed() {
		return nil, fmt.Errorf("compile policy: %w", c.Errors)
	}
	if len(c.GetRulesExact(decisionRef)) == 0 {
		return nil, fmt.Errorf("compile policy: no rule defines %s", decisionPath)
	}
	v := &version{
		revision:         src.revision,
		files:            len(src.modules),
		compiler:         c,
		store:            store,
		modules:          src.modules,
		data:             src.data,
		nondeterministic: nondeterministicBuiltins(c),
		noInline:         conflictProneRules(c),
		reads:            inputReads(c),
		plans:            newPlanCache(planCacheSize),
		hasPropertyRule:  hasPropertyRule(c),
		propCollection:   propertyRuleCollection(c),
		propPlans:        newPlanCache(planCacheSize),
	}
	v.prone = proneRefs(v.noInline)
	common := []func(*rego.Rego){rego.Compiler(c), rego.Store(store), rego.StrictBuiltinErrors(false)}
	if v.allow, err = rego.New(append(common, rego.Query(decisionQuery))...).PrepareForEval(ctx); err != nil {
		return nil, fmt.Errorf("prepare decision query: %w", err)
	}
	if v.batch, err = rego.New(append(common, rego.Query(batchQuery))...).PrepareForEval(ctx); err != nil {
		return nil, fmt.Errorf("prepare batch query: %w", err)
	}
	// Unifying the decision with true does not type-check when the policy's decision
	// can only be something else (allow := "yes"); such a policy never allows, and
	// is evaluated in Rego like any policy the engine cannot partially evaluate.
	v.partial, err = rego.New(append(common,
		rego.Query(decisionPath+" = true"),
		rego.Unknowns([]string{"input.object"}),
		rego.DisableInlining(v.noInline),
	)...).PrepareForPartial(ctx)
	v.partialErr = err
	return v, nil
}

// nondeterministicBuiltins lists the non-deterministic builtins called anywhere in
// the policy (ast.Builtin.Nondeterministic).
func nondeterministicBuiltins(c *ast.Compiler) []string {
	found := map[string]bool{}
	check := func(op ast.Ref) {
		if bi, ok := ast.BuiltinMap[op.String()]; ok && bi.Nondeterministic {
			found[bi.Name] = true
		}
	}
	for _, m := range c.Modules {
		ast.WalkExprs(m, func(e *ast.Expr) bool {
			if e.IsCall() {
				check(e.Operator())
			}
			return false
		})
		ast.WalkTerms(m, func(t *ast.Term) bool {
			if call, ok := t.Value.(ast.Call); ok {
				if op, ok := call[0].Value.(ast.Ref); ok {
					check(op)
				}
			}
			return false
		})
	}
	names := make([]string, 0, len(found))
	for n := range found {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// inputReads returns the top-level members of input that the policy's references
// name, or nil when a reference reaches input as a whole (input, input[x]), which
// could read any member. The compiler has turned every mention of input, f(input)
// included, into a reference rooted at it.
func inputReads(c *ast.Compiler) map[string]bool {
	reads := map[string]bool{}
	whole := false
	for _, m := range c.Modules {
		ast.WalkRefs(m, func(r ast.Ref) bool {
			if !r[0].Equal(ast.InputRootDocument) {
				return false
			}
			if len(r) < 2 {
				whole = true
				return false
			}
			s, ok := r[1].Value.(ast.String)
			if !ok {
				whole = true
				return false
			}
			reads[string(s)] = true
			return false
		})
	}
	if whole {
		return nil
	}
	return reads
}

// outcome is one evaluation of the decision.
type outcome struct {
	allowed bool // the decision is the boolean true
	defined bool
	result  any // the decision's value when defined
}

// decide evaluates the decision for one complete input.
func (v *version) decide(ctx context.Context, input ast.Value) (outcome, error) {
	rs, err := v.allow.Eval(ctx, rego.EvalParsedInput(input))
	if err != nil {
		return outcome{}, fmt.Errorf("evaluate %s: %w", decisionPath, err)
	}
	switch len(rs) {
	case 0:
		return outcome{}, nil
	case 1:
		result := rs[0].Expressions[0].Value
		b, ok := result.(bool)
		return outcome{allowed: ok && b, defined: true, result: result}, nil
	}
	return outcome{}, fmt.Errorf("evaluate %s: %d results", decisionPath, len(rs))
}

// decideBatch evaluates the decision for every object in one evaluation and marks
// the allowed ones. One object whose evaluation fails makes the whole batch fail.
func (v *version) decideBatch(ctx context.Context, base, objects ast.Value, allowed []bool) error {
	in := ast.NewObject(
		[2]*ast.Term{ast.InternedTerm("base"), ast.NewTerm(base)},
		[2]*ast.Term{ast.InternedTerm("objects"), ast.NewTerm(objects)},
	)
	rs, err := v.batch.Eval(ctx, rego.EvalParsedInput(in))
	if err != nil {
		return fmt.Errorf("evaluate %s for a listing: %w", decisionPath, err)
	}
	if len(rs) != 1 {
		return fmt.Errorf("evaluate %s for a listing: %d results", decisionPath, len(rs))
	}
	idx, ok := rs[0].Bindings["allowed"].([]any)
	if !ok {
		return errors.New("evaluate listing: unexpected result type")
	}
	for _, x := range idx {
		i, err := strconv.Atoi(fmt.Sprint(x))
		if err != nil || i < 0 || i >= len(allowed) {
			return fmt.Errorf("evaluate listing: unexpected index %v", x)
		}
		allowed[i] = true
	}
	return nil
}

// residual partially evaluates the decision for a base input (everything but
// input.object). full is why the residual must not decide objects (conflictTracer),
// or "".
func (v *version) residual(ctx context.Context, base ast.Value) (pq *rego.PartialQueries, full string, err error) {
	if v.partialErr != nil {
		return nil, "", fmt.Errorf("prepare partial query: %w", v.partialErr)
	}
	opts := []rego.EvalOption{rego.EvalParsedInput(base)}
	tr := newConflictTracer(v.prone)
	if tr != nil {
		opts = append(opts, rego.EvalQueryTracer(tr))
	}
	pq, err = partialEval(func() (*rego.PartialQueries, error) { return v.partial.Partial(ctx, opts...) })
	if err != nil {
		return nil, "", fmt.Errorf("partially evaluate %s: %w", decisionPath, err)
	}
	return pq, tr.whyFull(), nil
}

// errPartialPanic reports a panic of OPA's partial evaluation.
var errPartialPanic = errors.New("partial evaluation panicked")

// partialWith is partialEval of a query built from opts, in a transaction of its
// own that is closed even when the evaluation panics.
func (v *version) partialWith(ctx context.Context, opts ...func(*rego.Rego)) (*rego.PartialQueries, error) {
	txn, err := v.store.NewTransaction(ctx)
	if err != nil {
		return nil, err
	}
	defer v.store.Abort(ctx, txn)
	opts = append(opts, rego.Transaction(txn))
	return partialEval(func() (*rego.PartialQueries, error) { return rego.New(opts...).Partial(ctx) })
}

// partialEval runs one partial evaluation, turning a panic into an error. OPA
// v1.22.2's partial evaluation can panic on some policies (sorting the support
// rules it makes for a set under an object built key by key, `o[k] := 1 if …`
// beside `o.Caller contains "a" if …`, which are not inlined); every
// caller falls back to evaluating the policy in full when it fails, which decides
// what OPA decides, instead of the panic ending the process.
func partialEval(f func() (*rego.PartialQueries, error)) (pq *rego.PartialQueries, err error) {
	defer func() {
		if r := recover(); r != nil {
			pq, err = nil, fmt.Errorf("%w: %v", errPartialPanic, r)
		}
	}()
	return f()
}
