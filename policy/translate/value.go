package translate

// The values a translated predicate computes, the members of input.object it
// reads, and what a term's form alone says about its value.

import (
	"strconv"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/objectjson"
)

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
	"guid":           func(o *dirgate.Object) value { return value{kind: kString, s: objectjson.Decoded(o.GUID)} },
	"dn":             func(o *dirgate.Object) value { return value{kind: kString, s: objectjson.Decoded(o.DN)} },
	"displayName":    func(o *dirgate.Object) value { return value{kind: kString, s: objectjson.Decoded(o.DisplayName)} },
	"objectType":     func(o *dirgate.Object) value { return value{kind: kString, s: objectjson.Decoded(o.ObjectType)} },
	"domainName":     func(o *dirgate.Object) value { return value{kind: kString, s: objectjson.Decoded(o.DomainName)} },
	"objectTypeCode": func(o *dirgate.Object) value { return value{kind: kAST, v: ast.Number(strconv.Itoa(o.ObjectTypeCode))} },
	"directoryType":  func(o *dirgate.Object) value { return value{kind: kAST, v: ast.Number(strconv.Itoa(o.DirectoryType))} },
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

// nestedCalls returns the outermost calls among the operands of a call
// expression (or inside the term of a term expression): those OPA evaluates
// before the expression itself. An undefined inner call makes its outer one
// undefined, so the outermost ones tell.
func nestedCalls(expr *ast.Expr) []*ast.Term {
	var out []*ast.Term
	visit := func(x *ast.Term) {
		ast.WalkTerms(x, func(t *ast.Term) bool {
			if _, ok := t.Value.(ast.Call); ok {
				out = append(out, t)
				return true
			}
			return false
		})
	}
	switch terms := expr.Terms.(type) {
	case *ast.Term:
		visit(terms)
	case []*ast.Term:
		for _, a := range terms[1:] {
			visit(a)
		}
	}
	return out
}

// staticKind returns the kind a term's value always has and whether it is always
// defined (total), from its form alone: constants, input.object's fields (every
// rendered Object has them, with these JSON types) and the string builtins of
// builtins.go applied to strings. Anything else is not known total.
func staticKind(term *ast.Term) (kind, bool) {
	switch x := term.Value.(type) {
	case ast.String:
		return kString, true
	case ast.Boolean:
		return kBool, true
	case ast.Ref:
		if len(x) == 3 && x[0].Equal(ast.InputRootDocument) && x[1].Equal(ast.InternedTerm("object")) {
			if name, ok := x[2].Value.(ast.String); ok {
				switch string(name) {
				case "objectTypeCode", "directoryType":
					return kAST, true
				}
				if _, ok := objectFields[string(name)]; ok {
					return kString, true
				}
			}
		}
		return undefined, false
	case ast.Call:
		args := x[1:]
		strs := func(n int) bool {
			if len(args) != n {
				return false
			}
			for _, a := range args {
				if k, total := staticKind(a); !total || k != kString {
					return false
				}
			}
			return true
		}
		switch x[0].String() {
		case "lower", "upper":
			return kString, strs(1)
		case "trim_prefix", "trim_suffix":
			return kString, strs(2)
		case "startswith", "endswith", "contains":
			return kBool, strs(2)
		}
		return undefined, false
	}
	if ast.IsConstant(term.Value) {
		return kAST, true
	}
	return undefined, false
}
