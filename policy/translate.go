package policy

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/dirgate/dirgate"
)

// A predicate decides one object of a listing in Go. It is the residual of partially
// evaluating data.dirgate.authz.allow with input.object unknown: a disjunction of
// queries, each a conjunction of expressions over input.object's fields. translate
// accepts only residuals whose every expression it can evaluate with exactly the
// semantics of OPA's evaluator (same builtins, same undefined-on-type-error rule of
// non-strict builtin errors); anything else is refused and the caller evaluates Rego
// instead.
type predicate struct {
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
type cond func(*env) bool

// node computes a term's value for the current object.
type node func(*env) value

// env is the per-listing evaluation state: the object being decided, its memoised
// sub-expressions (valid for the current generation) and local variables.
type env struct {
	obj     *dirgate.Object
	gen     uint32
	memoGen []uint32
	memo    []value
	vars    []value
	scratch [][]byte
}

func (p *predicate) newEnv() *env {
	return &env{memoGen: make([]uint32, p.memos), memo: make([]value, p.memos), vars: make([]value, p.vars),
		scratch: make([][]byte, p.scratch)}
}

// lower is strings.ToLower without an allocation per object for ASCII text (DNs,
// nearly always): the result is written to the node's own buffer and is valid until
// that node runs again, which is for the next object. Each node occurs in one query
// and runs at most once per object, its memo and variables are read only while that
// object is decided, and no translated value outlives the decision; so no live
// value is overwritten.
func (e *env) lower(slot int, s string) string {
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

// allow decides one object.
func (p *predicate) allow(e *env, o *dirgate.Object) bool {
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

// value is a Rego value: strings and booleans natively (the common case, without
// allocation), anything else as an ast.Value. The zero value is undefined.
type value struct {
	kind kind
	s    string
	b    bool
	v    ast.Value
}

type kind uint8

const (
	undefined kind = iota
	kString
	kBool
	kAST
)

func (v value) defined() bool { return v.kind != undefined }

// truthy is how OPA treats an expression's value: it succeeds unless it is undefined
// or false.
func (v value) truthy() bool { return v.kind != undefined && !(v.kind == kBool && !v.b) }

func (v value) ast() ast.Value {
	switch v.kind {
	case kString:
		return ast.String(v.s)
	case kBool:
		return ast.Boolean(v.b)
	}
	return v.v
}

func fromAST(x ast.Value) value {
	switch x := x.(type) {
	case ast.String:
		return value{kind: kString, s: string(x)}
	case ast.Boolean:
		return value{kind: kBool, b: bool(x)}
	}
	return value{kind: kAST, v: x}
}

func boolean(b bool) value { return value{kind: kBool, b: b} }

// equal is OPA's equality of two defined values (Term.Equal: numbers numerically,
// composites structurally, different types never equal). Strings and booleans are
// never held as ast.Values (fromAST), so a mixed pair is unequal.
func equal(a, b value) bool {
	switch {
	case a.kind == kString && b.kind == kString:
		return a.s == b.s
	case a.kind == kBool && b.kind == kBool:
		return a.b == b.b
	case a.kind == kAST && b.kind == kAST:
		return ast.NewTerm(a.v).Equal(ast.NewTerm(b.v))
	}
	return false
}

// objectFields are the members of input.object the translator reads: those every
// rendered Object has, with their JSON types. Other members (properties,
// accountStatus, passwordStatus) send the residual to Rego evaluation.
var objectFields = map[string]func(*dirgate.Object) value{
	"guid":           func(o *dirgate.Object) value { return value{kind: kString, s: asJSON(o.GUID)} },
	"dn":             func(o *dirgate.Object) value { return value{kind: kString, s: asJSON(o.DN)} },
	"displayName":    func(o *dirgate.Object) value { return value{kind: kString, s: asJSON(o.DisplayName)} },
	"objectType":     func(o *dirgate.Object) value { return value{kind: kString, s: asJSON(o.ObjectType)} },
	"domainName":     func(o *dirgate.Object) value { return value{kind: kString, s: asJSON(o.DomainName)} },
	"objectTypeCode": func(o *dirgate.Object) value { return value{kind: kAST, v: ast.Number(strconv.Itoa(o.ObjectTypeCode))} },
	"directoryType":  func(o *dirgate.Object) value { return value{kind: kAST, v: ast.Number(strconv.Itoa(o.DirectoryType))} },
}

// asJSON returns s as a client (and a policy) receives it: encoding/json replaces
// each byte that is not valid UTF-8 with U+FFFD.
func asJSON(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteString("\uFFFD")
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// errUntranslatable reports a residual the translator does not handle.
type errUntranslatable struct{ what string }

func (e *errUntranslatable) Error() string { return "untranslatable residual: " + e.what }

func refuse(format string, args ...any) error {
	return &errUntranslatable{what: fmt.Sprintf(format, args...)}
}

// translator turns residual queries into a predicate.
type translator struct {
	p     *predicate
	memo  map[string]int // sub-expression text -> memo slot
	scope map[ast.Var]int
}

func translate(queries []ast.Body) (*predicate, error) {
	t := &translator{p: &predicate{}, memo: map[string]int{}}
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

// byCost orders a query's conditions cheapest first: a type check before a DN
// suffix test before a regular expression. Translated conditions are pure and
// cannot fail with an error, so a conjunction means the same in any order; queries
// with variables keep their order, as a binding must precede its uses.
func byCost(q ast.Body, conds []cond) []cond {
	type costed struct {
		c    cond
		cost int
	}
	cs := make([]costed, len(conds))
	for i, expr := range q {
		cost := 2
		ast.WalkTerms(expr, func(t *ast.Term) bool {
			if r, ok := t.Value.(ast.Ref); ok {
				switch r.String() {
				case "regex.match":
					cost += 10
				case "lower", "upper", "trim_suffix", "trim_prefix":
					cost++
				}
			}
			return false
		})
		if expr.IsCall() && expr.Operator().String() == "internal.member_2" || expr.IsEquality() {
			cost--
		}
		cs[i] = costed{conds[i], cost}
	}
	slices.SortStableFunc(cs, func(a, b costed) int { return a.cost - b.cost })
	out := make([]cond, len(cs))
	for i := range cs {
		out[i] = cs[i].c
	}
	return out
}

// bodyHasVars reports whether any expression of b mentions a variable.
func bodyHasVars(b ast.Body) bool {
	for _, expr := range b {
		switch terms := expr.Terms.(type) {
		case *ast.Term:
			if hasVars(terms.Value) {
				return true
			}
		case []*ast.Term:
			for _, t := range terms[1:] {
				if hasVars(t.Value) {
					return true
				}
			}
		default:
			return true
		}
	}
	return false
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
		c, err := t.scoped(func() (cond, error) { return t.expr(inner) })
		if err != nil {
			return nil, err
		}
		return func(e *env) bool { return !c(e) }, nil
	}
	switch terms := expr.Terms.(type) {
	case *ast.Term:
		n, err := t.term(terms)
		if err != nil {
			return nil, err
		}
		return func(e *env) bool { return n(e).truthy() }, nil
	case *ast.Not:
		c, err := t.scoped(func() (cond, error) {
			conds, err := t.body(terms.Body)
			if err != nil {
				return nil, err
			}
			return func(e *env) bool {
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
		return func(e *env) bool { return !c(e) }, nil
	case []*ast.Term:
		return t.call(expr, terms)
	}
	return nil, refuse("expression %v", expr)
}

// directCond translates the calls that dominate residuals (a string test against a
// constant, membership of a field in a constant collection) straight into a
// condition, without building values: a listing runs them for every object and
// role. ok is false when the call has another form.
func (t *translator) directCond(name string, args []*ast.Term) (c cond, ok bool, err error) {
	switch name {
	case "endswith", "startswith", "contains":
		lit, isConst := args[1].Value.(ast.String)
		if !isConst {
			return nil, false, nil
		}
		n, err := t.term(args[0])
		if err != nil {
			return nil, true, err
		}
		k := string(lit)
		test := map[string]func(string, string) bool{"endswith": strings.HasSuffix, "startswith": strings.HasPrefix, "contains": strings.Contains}[name]
		return func(e *env) bool {
			a := n(e)
			return a.kind == kString && test(a.s, k)
		}, true, nil
	case "internal.member_2":
		n, err := t.member(args)
		if err != nil {
			return nil, true, err
		}
		return func(e *env) bool {
			v := n(e)
			return v.kind == kBool && v.b
		}, true, nil
	}
	return nil, false, nil
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
		return func(e *env) bool { return n(e).truthy() }, nil
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
	return func(e *env) bool {
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
				return func(e *env) bool { return n(e).defined() }, nil
			}
			slot := t.p.vars
			t.p.vars++
			t.scope[v] = slot
			return func(e *env) bool {
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
	return func(e *env) bool {
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
		return func(e *env) value { return e.vars[slot] }, nil
	case ast.Ref:
		return t.ref(x)
	case ast.Call:
		return t.memoised(term, func() (node, error) { return t.builtin(x[0].String(), x[1:]) })
	}
	if !ast.IsConstant(term.Value) {
		return nil, refuse("non-constant term %v", term)
	}
	v := fromAST(term.Value)
	return func(*env) value { return v }, nil
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
	return func(e *env) value { return field(e.obj) }, nil
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
	return func(e *env) value {
		if e.memoGen[slot] == e.gen {
			return e.memo[slot]
		}
		v := n(e)
		e.memo[slot], e.memoGen[slot] = v, e.gen
		return v
	}, nil
}

// hasVars reports whether x mentions a variable, not counting the heads of
// references (input, or a builtin's name).
func hasVars(x ast.Value) bool {
	switch x := x.(type) {
	case ast.Var:
		return true
	case ast.Ref:
		for _, t := range x[1:] {
			if hasVars(t.Value) {
				return true
			}
		}
	case ast.Call:
		for _, t := range x[1:] {
			if hasVars(t.Value) {
				return true
			}
		}
	case *ast.Array, ast.Set, ast.Object:
		return !ast.IsConstant(x)
	}
	return false
}

// builtin translates a call of one of the builtins below, each with the semantics
// of its implementation in OPA's topdown package: a string operand of another type
// is a builtin error, which (without strict builtin errors) makes the call undefined.
func (t *translator) builtin(name string, args []*ast.Term) (node, error) {
	switch name {
	case "regex.match":
		return t.regexMatch(args)
	case "internal.member_2":
		return t.member(args)
	}
	ns := make([]node, len(args))
	for i, a := range args {
		n, err := t.term(a)
		if err != nil {
			return nil, err
		}
		ns[i] = n
	}
	str1 := func(f func(string) value) node {
		return func(e *env) value {
			a := ns[0](e)
			if a.kind != kString {
				return value{}
			}
			return f(a.s)
		}
	}
	str2 := func(f func(a, b string) value) node {
		return func(e *env) value {
			a, b := ns[0](e), ns[1](e)
			if a.kind != kString || b.kind != kString {
				return value{}
			}
			return f(a.s, b.s)
		}
	}
	switch {
	case name == "lower" && len(ns) == 1:
		slot := t.p.scratch
		t.p.scratch++
		return func(e *env) value {
			a := ns[0](e)
			if a.kind != kString {
				return value{}
			}
			return value{kind: kString, s: e.lower(slot, a.s)}
		}, nil
	case name == "upper" && len(ns) == 1:
		return str1(func(s string) value { return value{kind: kString, s: strings.ToUpper(s)} }), nil
	case name == "endswith" && len(ns) == 2:
		return str2(func(a, b string) value { return boolean(strings.HasSuffix(a, b)) }), nil
	case name == "startswith" && len(ns) == 2:
		return str2(func(a, b string) value { return boolean(strings.HasPrefix(a, b)) }), nil
	case name == "contains" && len(ns) == 2:
		return str2(func(a, b string) value { return boolean(strings.Contains(a, b)) }), nil
	case name == "trim_suffix" && len(ns) == 2:
		return str2(func(a, b string) value { return value{kind: kString, s: strings.TrimSuffix(a, b)} }), nil
	case name == "trim_prefix" && len(ns) == 2:
		return str2(func(a, b string) value { return value{kind: kString, s: strings.TrimPrefix(a, b)} }), nil
	case (name == "equal" || name == "neq") && len(ns) == 2:
		want := name == "equal"
		return func(e *env) value {
			a, b := ns[0](e), ns[1](e)
			if !a.defined() || !b.defined() {
				return value{}
			}
			return boolean(equal(a, b) == want)
		}, nil
	}
	return nil, refuse("call of %s/%d", name, len(args))
}

// regexMatch supports a constant pattern, compiled once as OPA compiles it (Go's
// regexp, RE2 syntax). A pattern that does not compile is left to OPA.
func (t *translator) regexMatch(args []*ast.Term) (node, error) {
	if len(args) != 2 {
		return nil, refuse("regex.match/%d", len(args))
	}
	pat, ok := args[0].Value.(ast.String)
	if !ok {
		return nil, refuse("regex.match with a pattern that is not a constant string")
	}
	match, ok := knownPatterns[string(pat)]
	if !ok {
		re, err := regexp.Compile(string(pat))
		if err != nil {
			return nil, refuse("regex.match with an invalid pattern")
		}
		match = re.MatchString
	}
	n, err := t.term(args[1])
	if err != nil {
		return nil, err
	}
	return func(e *env) value {
		s := n(e)
		if s.kind != kString {
			return value{}
		}
		return boolean(match(s.s))
	}, nil
}

// knownPatterns are regular expressions of the bundled policy with a hand-written
// equivalent: the residual runs them for every object below a scope, and Go's
// backtracking matcher costs more than the rest of the decision. FuzzKnownPatterns
// checks each against regexp.
var knownPatterns = map[string]func(string) bool{
	// dn_below: the text before a scope's suffix ends with an odd number of
	// backslashes, so its comma is escaped. A backslash (0x5C) never occurs inside a
	// multi-byte UTF-8 sequence, and [^\\] matches any other byte or rune.
	`(^|[^\\])\\(\\\\)*$`: func(s string) bool {
		n := 0
		for n < len(s) && s[len(s)-1-n] == '\\' {
			n++
		}
		return n%2 == 1
	},
}

// member is `x in collection` with a constant collection: membership among an
// array's or a set's elements or an object's values, by OPA's equality.
func (t *translator) member(args []*ast.Term) (node, error) {
	if len(args) != 2 || !ast.IsConstant(args[1].Value) {
		return nil, refuse("membership in a non-constant collection")
	}
	var elems []*ast.Term
	switch c := args[1].Value.(type) {
	case *ast.Array:
		c.Foreach(func(x *ast.Term) { elems = append(elems, x) })
	case ast.Set:
		c.Foreach(func(x *ast.Term) { elems = append(elems, x) })
	case ast.Object:
		c.Foreach(func(_, x *ast.Term) { elems = append(elems, x) })
	default:
		// OPA's member of a scalar is false, not undefined.
		n, err := t.term(args[0])
		if err != nil {
			return nil, err
		}
		return func(e *env) value {
			if !n(e).defined() {
				return value{}
			}
			return boolean(false)
		}, nil
	}
	strs := map[string]bool{}
	var list []string // the same strings, searched linearly when there are few
	var others []*ast.Term
	for _, x := range elems {
		if s, ok := x.Value.(ast.String); ok {
			if !strs[string(s)] {
				list = append(list, string(s))
			}
			strs[string(s)] = true
		} else {
			others = append(others, x)
		}
	}
	hasString := func(s string) bool { return strs[s] }
	if len(list) <= 8 {
		hasString = func(s string) bool { return slices.Contains(list, s) }
	}
	n, err := t.term(args[0])
	if err != nil {
		return nil, err
	}
	return func(e *env) value {
		x := n(e)
		switch x.kind {
		case undefined:
			return value{}
		case kString:
			return boolean(hasString(x.s))
		}
		xt := ast.NewTerm(x.ast())
		for _, o := range others {
			if xt.Equal(o) {
				return boolean(true)
			}
		}
		return boolean(false)
	}, nil
}

// indexTypes fills byType and untyped from the types each query requires (nil:
// any type).
func (p *predicate) indexTypes(types []map[string]bool) {
	mentioned := map[string]bool{}
	for _, ts := range types {
		for ty := range ts {
			mentioned[ty] = true
		}
	}
	p.byType = make(map[string][]int, len(mentioned))
	for i := range types {
		if types[i] == nil {
			p.untyped = append(p.untyped, i)
		}
	}
	for ty := range mentioned {
		for i := range types {
			if types[i] == nil || types[i][ty] {
				p.byType[ty] = append(p.byType[ty], i)
			}
		}
	}
}

var objectTypeRef = ast.MustParseRef("input.object.objectType")

// requiredTypes returns the object types a query can hold for, from its
// conditions `input.object.objectType in C` and `input.object.objectType == c`
// with constants (nil when it has none), and the query without those conditions.
// objectType is always a string, so only string constants can match.
func requiredTypes(q ast.Body) (map[string]bool, ast.Body) {
	var out map[string]bool
	constrain := func(allowed map[string]bool) {
		if out == nil {
			out = allowed
			return
		}
		for ty := range out {
			if !allowed[ty] {
				delete(out, ty)
			}
		}
	}
	stringsOf := func(c ast.Value) map[string]bool {
		m := map[string]bool{}
		add := func(x *ast.Term) {
			if s, ok := x.Value.(ast.String); ok {
				m[string(s)] = true
			}
		}
		switch c := c.(type) {
		case *ast.Array:
			c.Foreach(add)
		case ast.Set:
			c.Foreach(add)
		case ast.Object:
			c.Foreach(func(_, v *ast.Term) { add(v) })
		case ast.String:
			m[string(c)] = true
		}
		return m
	}
	isTypeRef := func(t *ast.Term) bool { r, ok := t.Value.(ast.Ref); return ok && r.Equal(objectTypeRef) }
	rest := make(ast.Body, 0, len(q))
	for _, expr := range q {
		terms, ok := expr.Terms.([]*ast.Term)
		if !ok || expr.Negated || len(expr.With) > 0 || len(terms) != 3 {
			rest = append(rest, expr)
			continue
		}
		a, b := terms[1], terms[2]
		switch terms[0].String() {
		case "internal.member_2":
			if isTypeRef(a) && ast.IsConstant(b.Value) {
				constrain(stringsOf(b.Value))
				continue
			}
		case "eq", "equal":
			if isTypeRef(b) {
				a, b = b, a
			}
			if isTypeRef(a) && ast.IsConstant(b.Value) {
				if _, scalar := b.Value.(ast.String); scalar {
					constrain(stringsOf(b.Value))
				} else {
					constrain(map[string]bool{})
				}
				continue
			}
		}
		rest = append(rest, expr)
	}
	return out, rest
}
