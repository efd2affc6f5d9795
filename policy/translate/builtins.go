package translate

// The builtins the translator implements, each with the semantics of its
// implementation in OPA's topdown package.

import (
	"regexp"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
)

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
		return func(e *Env) value {
			a := ns[0](e)
			if a.kind != kString {
				return value{}
			}
			return f(a.s)
		}
	}
	str2 := func(f func(a, b string) value) node {
		return func(e *Env) value {
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
		return func(e *Env) value {
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
		return func(e *Env) value {
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
	return func(e *Env) value {
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
		return func(e *Env) value {
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
	return func(e *Env) value {
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
		return func(e *Env) bool {
			a := n(e)
			return a.kind == kString && test(a.s, k)
		}, true, nil
	case "internal.member_2":
		n, err := t.member(args)
		if err != nil {
			return nil, true, err
		}
		return func(e *Env) bool {
			v := n(e)
			return v.kind == kBool && v.b
		}, true, nil
	}
	return nil, false, nil
}
