package translate

// How a translated residual is laid out for speed: conditions ordered by cost, and
// queries indexed by the object types they require.

import (
	"slices"

	"github.com/open-policy-agent/opa/v1/ast"
)

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

// indexTypes fills byType and untyped from the types each query requires (nil:
// any type).
func (p *Predicate) indexTypes(types []map[string]bool) {
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
