// Package translate turns the residual of a partially evaluated policy decision
// into a Go predicate over one dirgate.Object: the fast path by which package
// policy decides a listing's objects (docs/policy.md, "Performance").
// It translates only what it can evaluate exactly as OPA's evaluator does, and
// refuses the rest, which policy then evaluates in Rego. The differential test
// (policy/translate/differential_test.go) compares the two on random policies.
package translate

import (
	"fmt"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/dirgate/dirgate"
)

// Predicate decides one object of a listing in Go. It is the residual of partially
// evaluating data.dirgate.authz.allow with input.object unknown: a disjunction of
// queries, each a conjunction of expressions over input.object's fields. Residual
// accepts only residuals whose every expression it can evaluate with exactly the
// semantics of OPA's evaluator (same builtins, same undefined-on-type-error rule of
// non-strict builtin errors); anything else is refused and the caller evaluates Rego
// instead.
type Predicate struct {
	queries [][]cond
	// byType lists, for each object type some query requires, the queries that can
	// hold for an object of that type; untyped lists them for any other type. A
	// listing mixes users, computers and groups, and most roles name types, so an
	// object is tested against the few queries that concern it.
	byType  map[string][]int
	untyped []int
	memos   int // common sub-expressions cached per object
	vars    int // local variables across all queries
	scratch int // buffers of lower-casing nodes
}

// cond is one expression of a query: true when it succeeds.
type cond func(*Env) bool

// node computes a term's value for the current object.
type node func(*Env) value

// Env is the per-listing evaluation state: the object being decided, its memoised
// sub-expressions (valid for the current generation) and local variables.
type Env struct {
	obj     *dirgate.Object
	gen     uint32
	memoGen []uint32
	memo    []value
	vars    []value
	scratch [][]byte
}

// NewEnv makes the state in which p decides the objects of one listing, one after
// the other: an Env is used by one goroutine at a time.
func (p *Predicate) NewEnv() *Env {
	return &Env{memoGen: make([]uint32, p.memos), memo: make([]value, p.memos), vars: make([]value, p.vars),
		scratch: make([][]byte, p.scratch)}
}

// lower is strings.ToLower without an allocation per object for ASCII text (DNs,
// nearly always): the result is written to the node's own buffer and is valid until
// that node runs again, which is for the next object. Each node occurs in one query
// and runs at most once per object, its memo and variables are read only while that
// object is decided, and no translated value outlives the decision; so no live
// value is overwritten.
func (e *Env) lower(slot int, s string) string {
	upper := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			return strings.ToLower(s)
		}
		upper = upper || 'A' <= c && c <= 'Z'
	}
	if !upper {
		return s
	}
	buf := e.scratch[slot][:0]
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf = append(buf, c)
	}
	e.scratch[slot] = buf
	return unsafe.String(unsafe.SliceData(buf), len(buf))
}

// Allow decides one object.
func (p *Predicate) Allow(e *Env, o *dirgate.Object) bool {
	e.obj = o
	e.gen++
	if e.gen == 0 { // wrapped: stale memo generations could collide
		clear(e.memoGen)
		e.gen = 1
	}
	idx, typed := p.byType[o.ObjectType]
	if !typed {
		idx = p.untyped
	}
	for _, i := range idx {
		q := p.queries[i]
		ok := true
		for _, c := range q {
			if !c(e) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// errUntranslatable reports a residual the translator does not handle.
type errUntranslatable struct{ what string }

func (e *errUntranslatable) Error() string { return "untranslatable residual: " + e.what }

func refuse(format string, args ...any) error {
	return &errUntranslatable{what: fmt.Sprintf(format, args...)}
}

// translator turns residual queries into a predicate.
type translator struct {
	p     *Predicate
	memo  map[string]int // sub-expression text -> memo slot
	scope map[ast.Var]int
}

// Residual translates the queries of a residual (a disjunction) into a predicate,
// or refuses them with an error saying what it does not handle.
func Residual(queries []ast.Body) (*Predicate, error) {
	t := &translator{p: &Predicate{}, memo: map[string]int{}}
	types := make([]map[string]bool, len(queries))
	for i, q := range queries {
		// A query's conditions on the object type are decided by the type index
		// (indexTypes): an object only meets the queries whose types include its own.
		var rest ast.Body
		types[i], rest = requiredTypes(q)
		t.scope = map[ast.Var]int{}
		conds, err := t.body(rest)
		if err != nil {
			return nil, err
		}
		if !bodyHasVars(rest) {
			conds = byCost(rest, conds)
		}
		t.p.queries = append(t.p.queries, conds)
	}
	t.p.indexTypes(types)
	return t.p, nil
}

func (t *translator) body(b ast.Body) ([]cond, error) {
	conds := make([]cond, 0, len(b))
	for _, expr := range b {
		c, err := t.expr(expr)
		if err != nil {
			return nil, err
		}
		conds = append(conds, c)
	}
	return conds, nil
}

func (t *translator) expr(expr *ast.Expr) (cond, error) {
	if len(expr.With) > 0 {
		return nil, refuse("with modifier in %v", expr)
	}
	if expr.Negated {
		inner := expr.Copy()
		inner.Negated = false
		// OPA evaluates the calls nested in a negated expression's operands before
		// the negation (the compiler hoists them out of it: expandExpr in OPA's
		// ast/compile.go), so one that is undefined (a type error) fails the
		// expression instead of making the negation hold. Calls that cannot be
		// undefined (total) need no test.
		//
		// This relies on the shapes partial evaluation gives a negated expression
		// (OPA v1 topdown/eval.go, evalNotPartial and canInlineNegation):
		//   - the policy's own `not` expression, whose nested calls the compiler
		//     hoisted out before evaluation and copy propagation put back as
		//     operands (`not upper(input.object.x) = "2"`): OPA evaluates them
		//     outside the negation, as hoisted here;
		//   - the complement of an inlined rule or function body (`not p`, `not f(x)`),
		//     which OPA inlines only when no expression of the body has a nested call
		//     or reference, so its calls stand alone with their output as the last
		//     argument (`not upper(input.object.x, "2")`): nestedCalls finds none and
		//     the call is decided inside the negation, as OPA decides it;
		//   - any other negated body is kept as a support rule (`not
		//     data.partial.__not1_0_2__`), which the translator refuses.
		// Should partial evaluation ever inline a body with nested calls into a
		// negation, a call that fails there would deny where OPA allows (closed,
		// never open); the differential check (differential_test.go) would show it.
		var hoisted []node
		c, err := t.scoped(func() (cond, error) {
			for _, call := range nestedCalls(inner) {
				if _, total := staticKind(call); total {
					continue
				}
				n, err := t.term(call)
				if err != nil {
					return nil, err
				}
				hoisted = append(hoisted, n)
			}
			return t.expr(inner)
		})
		if err != nil {
			return nil, err
		}
		if len(hoisted) == 0 {
			return func(e *Env) bool { return !c(e) }, nil
		}
		return func(e *Env) bool {
			for _, n := range hoisted {
				if !n(e).defined() {
					return false
				}
			}
			return !c(e)
		}, nil
	}
	switch terms := expr.Terms.(type) {
	case *ast.Term:
		n, err := t.term(terms)
		if err != nil {
			return nil, err
		}
		return func(e *Env) bool { return n(e).truthy() }, nil
	case *ast.Not:
		c, err := t.scoped(func() (cond, error) {
			conds, err := t.body(terms.Body)
			if err != nil {
				return nil, err
			}
			return func(e *Env) bool {
				for _, c := range conds {
					if !c(e) {
						return false
					}
				}
				return true
			}, nil
		})
		if err != nil {
			return nil, err
		}
		return func(e *Env) bool { return !c(e) }, nil
	case []*ast.Term:
		return t.call(expr, terms)
	}
	return nil, refuse("expression %v", expr)
}

// scoped translates a negated part: variables it binds stay inside it.
func (t *translator) scoped(f func() (cond, error)) (cond, error) {
	saved := make(map[ast.Var]int, len(t.scope))
	for k, v := range t.scope {
		saved[k] = v
	}
	c, err := f()
	t.scope = saved
	return c, err
}

// call translates an expression that calls a builtin: unification binds a fresh
// variable or compares; a call with an output argument binds it and succeeds when
// the result is defined; a call without one succeeds unless the result is undefined
// or false (OPA's rule for expressions).
func (t *translator) call(expr *ast.Expr, terms []*ast.Term) (cond, error) {
	name := terms[0].String()
	args := terms[1:]
	if expr.IsEquality() {
		return t.unify(args[0], args[1])
	}
	bi, ok := ast.BuiltinMap[name]
	if !ok {
		return nil, refuse("call of %s", name)
	}
	arity := bi.Decl.Arity()
	switch len(args) {
	case arity:
		if c, ok, err := t.directCond(name, args); ok || err != nil {
			return c, err
		}
		n, err := t.builtin(name, args)
		if err != nil {
			return nil, err
		}
		return func(e *Env) bool { return n(e).truthy() }, nil
	case arity + 1:
		n, err := t.builtin(name, args[:arity])
		if err != nil {
			return nil, err
		}
		return t.bindOrCompare(args[arity], n)
	}
	return nil, refuse("call of %s with %d arguments", name, len(args))
}

func (t *translator) unify(a, b *ast.Term) (cond, error) {
	if v, ok := a.Value.(ast.Var); ok {
		if _, bound := t.scope[v]; !bound {
			n, err := t.term(b)
			if err != nil {
				return nil, err
			}
			return t.bindOrCompare(a, n)
		}
	}
	if _, ok := b.Value.(ast.Var); ok {
		return t.unify(b, a)
	}
	na, err := t.term(a)
	if err != nil {
		return nil, err
	}
	nb, err := t.term(b)
	if err != nil {
		return nil, err
	}
	return func(e *Env) bool {
		x, y := na(e), nb(e)
		return x.defined() && y.defined() && equal(x, y)
	}, nil
}

// bindOrCompare binds an unbound variable to n's value, or compares a bound one or
// a constant with it.
func (t *translator) bindOrCompare(out *ast.Term, n node) (cond, error) {
	if v, ok := out.Value.(ast.Var); ok {
		if _, bound := t.scope[v]; !bound {
			if v.IsWildcard() {
				return func(e *Env) bool { return n(e).defined() }, nil
			}
			slot := t.p.vars
			t.p.vars++
			t.scope[v] = slot
			return func(e *Env) bool {
				x := n(e)
				e.vars[slot] = x
				return x.defined()
			}, nil
		}
	}
	o, err := t.term(out)
	if err != nil {
		return nil, err
	}
	return func(e *Env) bool {
		x, y := n(e), o(e)
		return x.defined() && y.defined() && equal(x, y)
	}, nil
}

// term translates a term into a node: constants, input.object's fields, bound
// variables and calls of supported builtins.
func (t *translator) term(term *ast.Term) (node, error) {
	switch x := term.Value.(type) {
	case ast.Var:
		slot, ok := t.scope[x]
		if !ok {
			return nil, refuse("unbound variable %v", x)
		}
		return func(e *Env) value { return e.vars[slot] }, nil
	case ast.Ref:
		return t.ref(x)
	case ast.Call:
		return t.memoised(term, func() (node, error) { return t.builtin(x[0].String(), x[1:]) })
	}
	if !ast.IsConstant(term.Value) {
		return nil, refuse("non-constant term %v", term)
	}
	v := fromAST(term.Value)
	return func(*Env) value { return v }, nil
}

func (t *translator) ref(r ast.Ref) (node, error) {
	if len(r) != 3 || !r[0].Equal(ast.InputRootDocument) || !r[1].Equal(ast.InternedTerm("object")) {
		return nil, refuse("reference %v", r)
	}
	name, ok := r[2].Value.(ast.String)
	if !ok {
		return nil, refuse("reference %v", r)
	}
	field, ok := objectFields[string(name)]
	if !ok {
		return nil, refuse("reference %v", r)
	}
	return func(e *Env) value { return field(e.obj) }, nil
}

// memoised caches a call's value per object when it depends on nothing but the
// object: the residual repeats lower(input.object.dn) once per role and scope.
func (t *translator) memoised(term *ast.Term, build func() (node, error)) (node, error) {
	n, err := build()
	if err != nil {
		return nil, err
	}
	if hasVars(term.Value) {
		return n, nil
	}
	key := term.String()
	slot, ok := t.memo[key]
	if !ok {
		slot = t.p.memos
		t.p.memos++
		t.memo[key] = slot
	}
	return func(e *Env) value {
		if e.memoGen[slot] == e.gen {
			return e.memo[slot]
		}
		v := n(e)
		e.memo[slot], e.memoGen[slot] = v, e.gen
		return v
	}, nil
}
