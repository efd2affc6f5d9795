package translate_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/policy"
	"github.com/dirgate/dirgate/policy/internal/policytest"
	bundled "github.com/dirgate/dirgate/rego"
)

// The differential check: random Rego v1 policies over the documented input
// (docs/policy.md, "The input document"), random directories and callers; every
// decision of the Authorizer (listings and their properties, views of named
// objects, removals, additions) is compared with OPA evaluating the policy once
// per object (oracle_test.go). Each case is made from its seed alone: a failure
// names the seed and prints the policy and the object, and
//
//	DIRGATE_POLICY_DIFF_SEED=<seed> DIRGATE_POLICY_DIFF_N=1 go test -run TestDifferentialOPA ./policy/translate/
//
// decides that case again. DIRGATE_POLICY_DIFF_N sets how many decisions to
// compare; without it, the short run of TestDifferentialOPA.

// diffGen writes one random policy.
type diffGen struct {
	r      *rand.Rand
	funcs  []string // the helper functions' names, each of one argument
	funcs2 []string // the helper functions' names, each of two arguments
	rules  []string // the helper rules' names
	sets   []string // the helper partial sets' names
	// objs are references to helper objects built key by key (o0[k] := 1)
	// beside rules naming one of their keys (o0.user := 2), with the value each
	// may have: where OPA reports a conflict for the key both define.
	objs  []string
	depth int
	vars  int // local variables declared so far: each gets its own name
	// plain policies read only the members of input.object that the Go
	// translation reads, and have no helpers: they exercise the translated path.
	plain bool
}

func (g *diffGen) newVar(prefix string) string {
	g.vars++
	return prefix + strconv.Itoa(g.vars)
}

func (g *diffGen) pick(xs ...string) string { return xs[g.r.IntN(len(xs))] }

func (g *diffGen) chance(n int) bool { return g.r.IntN(n) == 0 }

// constants, of every JSON type, so that comparisons mix types.
func (g *diffGen) constant() string {
	return g.pick(`"user"`, `"computer"`, `"group"`, `"contact"`, `"CN=WS-01"`, `"2"`, `"a"`, `"x"`, `""`, `2`, `1`, `3.0`, `true`, `false`,
		`"corp.example.com"`, `"view"`, `"remove"`, `"add"`, `null`, `"ou=staff,dc=corp,dc=example,dc=com"`)
}

func (g *diffGen) stringConstant() string {
	return g.pick(`"CN=WS-"`, `"CN=A"`, `"OU=Workstations"`, `",OU=Staff,DC=corp,DC=example,DC=com"`, `",ou=staff,dc=corp,dc=example,dc=com"`,
		`"ws-"`, `"cn="`, `"\\,"`, `"Staff"`, `"IT"`, `"ö"`, `"x"`, `""`, `"{"`, `"user"`, `"corp"`, `"CN="`, `"DC=com"`, `","`, `"2"`, `"1"`)
}

// ref is a member of the input: the object's fields (some undefined for some
// objects, or of a type the builtins refuse), the subject's, the group's, the
// request's.
func (g *diffGen) ref() string {
	if g.plain {
		return g.pick("input.object.dn", "input.object.guid", "input.object.displayName", "input.object.objectType",
			"input.object.domainName", "input.object.objectTypeCode", "input.object.directoryType", "input.group.dn", "input.subject.dn",
			"input.subject.domainName")
	}
	return g.pick(
		"input.object.dn", "input.object.dn", "input.object.guid", "input.object.displayName", "input.object.objectType",
		"input.object.objectType", "input.object.domainName", "input.object.objectTypeCode", "input.object.directoryType",
		"input.object.properties.mail[0]", "input.object.properties.department[0]", "input.object.properties.nosuch",
		"input.object.accountStatus.isDisabled", "input.object.accountStatus.isLocked", "input.object.accountStatus.expirationDate",
		"input.object.passwordStatus.expirationStatus", "input.object.nosuch",
		"input.group.dn", "input.group.guid", "input.subject.dn", "input.subject.displayName", "input.subject.domainName", "input.action",
		"input.request.includeIndirect", "input.request.sizeLimit", "input.subject.accountStatus.isDisabled",
	)
}

// term is a value computed from the input, maybe through builtins and helper
// functions.
func (g *diffGen) term() string {
	x := g.ref()
	if g.depth > 2 {
		return x
	}
	g.depth++
	defer func() { g.depth-- }()
	switch g.r.IntN(9) {
	case 0:
		return "lower(" + g.term() + ")"
	case 1:
		return "upper(" + g.term() + ")"
	case 2:
		return g.pick("trim_prefix", "trim_suffix") + "(" + g.term() + ", " + g.stringConstant() + ")"
	case 3:
		return "trim(" + g.term() + `, "{}")`
	case 4:
		if len(g.funcs) > 0 {
			return g.pick(g.funcs...) + "(" + g.term() + ")"
		}
	case 5:
		return `concat("", [` + g.term() + ", " + g.stringConstant() + "])"
	case 6:
		if !g.plain {
			return g.pick(`object.get(input.object, "dn", 0)`, `split(`+g.term()+`, ",")[1]`, `sprintf("%v", [`+g.term()+`])`,
				`substring(`+g.term()+`, 0, 3)`, `replace(`+g.term()+`, "CN=", "")`)
		}
	}
	return x
}

// cond is one expression of a body.
func (g *diffGen) cond() string {
	if g.depth > 3 {
		return g.compare("==")
	}
	g.depth++
	defer func() { g.depth-- }()
	if len(g.objs) > 0 && g.chance(4) {
		return g.pick(g.objs...)
	}
	if g.chance(5) {
		// Conditions most objects meet, so that bodies of several hold together.
		return g.pick(`startswith(input.object.dn, "CN=")`, `contains(lower(input.object.dn), "dc=")`, `input.object.guid != ""`,
			`input.object.objectType != "x"`, `not input.object.nosuch`, `input.action == "view"`, `endswith(input.object.dn, "COM")`)
	}
	n := 28
	if g.plain {
		n = 8 // comparisons, string builtins, regular expressions, in, not
	}
	c := g.r.IntN(n)
	if g.plain && g.chance(8) {
		c = 19 // data-driven, still translated
	}
	switch c {
	case 0, 1:
		return g.compare("==")
	case 2:
		return g.compare("!=")
	case 3:
		return g.pick("startswith", "endswith", "contains") + "(" + g.term() + ", " + g.stringConstant() + ")"
	case 4:
		return `regex.match(` + g.pick("`^CN=[A-M]`", "`(?i)ou=staff`", "`^CN=WS-\\d+`", "`(^|[^\\\\])\\\\(\\\\\\\\)*$`", "`[`") + ", " + g.term() + ")"
	case 5, 6:
		x, c := g.term(), g.constant
		if !strings.HasPrefix(x, "input.") {
			c = g.stringConstant // typed: the type checker refuses other elements
		}
		if g.chance(2) {
			return x + " in {" + c() + ", " + c() + "}"
		}
		return x + " in [" + c() + ", " + g.stringConstant() + "]"
	case 7:
		// not applies to one expression: not of some, every or not is no Rego.
		for {
			c := g.cond()
			if !strings.HasPrefix(c, "some ") && !strings.HasPrefix(c, "every ") && !strings.HasPrefix(c, "not ") {
				return "not " + c
			}
		}
	case 8:
		v := g.newVar("grp")
		return "some " + v + " in input.subject.groups; " + g.pick(v+".dn", "lower("+v+".dn)", v+".guid") + " == " + g.pick("input.object.dn", "lower(input.object.dn)", "input.object.guid", "input.group.guid")
	case 9:
		v := g.newVar("grp")
		return g.pick("input.object.dn", "input.object.guid", g.term()) + " in {" + v + ".dn | some " + v + " in input.subject.groups}"
	case 10:
		v := g.newVar("p")
		return "every " + v + " in input.request.properties { " + v + " != " + g.stringConstant() + " }"
	case 11:
		v := g.newVar("grp")
		return "every " + v + " in input.subject.groups { " + g.pick("startswith("+v+`.dn, "CN=G")`, v+".dn != input.object.dn", "endswith(input.object.dn, "+v+".dn)", "upper("+v+".dn) != "+g.term()) + " }"
	case 12:
		if len(g.rules) > 0 {
			r := g.pick(g.rules...)
			return g.pick(r, r, r+" == "+g.pick(`"x"`, `"y"`), "not "+r)
		}
	case 13:
		if len(g.funcs) > 0 {
			f := g.pick(g.funcs...)
			arg := g.term()
			if g.chance(2) {
				arg = g.pick("input.object.dn", "input.object.displayName", "lower(input.object.dn)")
			}
			return g.pick(f+"("+arg+")", f+"("+arg+") == "+g.pick(`"a"`, `"b"`), "not "+f+"("+arg+")")
		}
	case 14:
		if len(g.sets) > 0 {
			return g.pick(`"x"`, `"y"`, g.term()) + " in " + g.pick(g.sets...)
		}
	case 15:
		return "count(input.object.properties) " + g.pick(">", "==", "<") + " " + strconv.Itoa(g.r.IntN(3))
	case 16:
		return g.pick("input.object.accountStatus.isDisabled", "not input.object.accountStatus.isLocked",
			"input.object.accountStatus.expirationDate == null", "input.subject.accountStatus.isDisabled == false")
	case 17:
		return "input.action == " + g.pick(`"view"`, `"remove"`, `"add"`)
	case 18:
		return `lower(input.object.dn) == lower(input.group.dn)`
	case 19:
		// Data, which partial evaluation folds into constants.
		v := g.newVar("d")
		return g.pick("input.object.objectType in data.types", "lower(input.object.objectType) in data.types",
			"some "+v+" in data.suffixes; endswith(lower(input.object.dn), "+v+")",
			"not input.object.objectType in data.types", "data.flag", "count("+g.term()+") > data.limit")
	case 20, 21:
		if len(g.objs) > 0 {
			return g.pick(g.objs...)
		}
	case 22:
		if len(g.funcs2) > 0 {
			f := g.pick(g.funcs2...)
			return g.pick(f+"("+g.term()+", "+g.stringConstant()+") == "+g.pick(`"a"`, `"b"`), "not "+f+"("+g.term()+", "+g.stringConstant()+")")
		}
	case 23:
		// with: the expression decided with a member of the input replaced.
		for {
			c := g.cond()
			if !strings.Contains(c, ";") && !strings.HasPrefix(c, "some ") && !strings.HasPrefix(c, "every ") && !strings.Contains(c, " with ") {
				return c + " with " + g.pick("input.object.displayName as "+g.pick(`"Ann"`, `"user"`, "1"),
					"input.object.dn as "+g.stringConstant(), `input.action as "remove"`, "input.subject.groups as []",
					"input.object.objectType as "+g.pick(`"user"`, `"group"`))
			}
		}
	case 24:
		// in over an object: its values.
		return g.pick(`["mail-value"] in input.object.properties`, `input.object.objectType in {"a": "user", "b": "group"}`,
			g.term()+` in {"k": "Ann", "l": "CN=WS-01"}`, `not ["department-value"] in input.object.properties`)
	case 25:
		// Equality of sets and arrays.
		return g.pick(`{input.object.objectType, "x"} == {"user", "x"}`, `[input.object.objectType] == ["computer"]`,
			`input.object.properties.mail == ["mail-value"]`, `{x | some x in input.object.properties.mail} == {"mail-value"}`,
			`[lower(input.object.displayName)] != ["ann"]`, `object.keys(input.object.properties) == {"mail"}`)
	case 26:
		// every over the object's fields.
		v := g.newVar("v")
		return g.pick("every "+v+", _ in input.object.properties { startswith("+v+`, "m") }`,
			"every "+v+" in input.object.properties.mail { "+v+` != "" }`,
			"every _, "+v+" in input.object.accountStatus { "+v+" != true }",
			"every "+v+" in input.object.properties { count("+v+") == 1 }")
	case 27:
		// not over a comprehension.
		v := g.newVar("x")
		return g.pick("not {"+v+" | some "+v+" in input.subject.groups; "+v+".dn == input.object.dn} == set()",
			"not count(["+v+" | some "+v+" in input.object.properties.mail]) == 0",
			"not ["+v+" | some "+v+" in input.object.properties; count("+v+") > 1] == []")
	}
	return g.term() + " == " + g.term()
}

// keyedObject writes a helper object built key by key from the input (o0[k] :=
// 1 if k := input.object.displayName) and rules naming one of its keys by path
// (o0.Ann := 2, o0["user"] := 2, o0.Ann.x := 2, o0.Ann contains 2), maybe nested
// (q0.r[k] := ...): OPA reports a conflict for the key both define when their
// values differ. It returns the conditions reading the object.
func (g *diffGen) keyedObject(b *strings.Builder, i int) []string {
	obj := fmt.Sprintf("o%d", i)
	if g.chance(3) {
		obj = fmt.Sprintf("q%d.r", i)
	}
	// The key the object's rule computes, and names of keys it takes for some
	// objects (and callers).
	var key, name string
	switch g.r.IntN(4) {
	case 0:
		key, name = "input.object.displayName", g.pick("Ann", "WS-01", "bob")
	case 1:
		key, name = "input.object.objectType", g.pick("user", "computer", "group")
	case 2:
		key, name = "lower(input.object.displayName)", g.pick("ann", "ws-01", "Ann")
	default:
		key, name = "input.subject.displayName", "Caller"
	}
	// Values of one type (the type checker refuses comparing a key's value
	// with a value of another type), equal or not.
	v1, v2 := "1", g.pick("1", "2", "2")
	if g.chance(3) {
		v1, v2 = `"a"`, g.pick(`"a"`, `"b"`, `"b"`)
	}
	if g.plain || g.chance(2) {
		fmt.Fprintf(b, "%s[k] := %s if k := %s\n\n", obj, v1, key)
	} else {
		fmt.Fprintf(b, "%s[k] := %s if {\n\tk := %s\n\t%s\n}\n\n", obj, v1, key, g.cond())
	}
	by := `["` + name + `"]`
	if !strings.Contains(name, "-") && g.chance(2) {
		by = "." + name
	}
	read := obj + `["` + name + `"]`
	switch g.r.IntN(5) {
	case 0:
		fmt.Fprintf(b, "%s%s.x := %s\n\n", obj, by, v2)
		read += `.x`
	case 1:
		fmt.Fprintf(b, "%s%s contains %s if %s\n\n", obj, by, v2, g.body())
		return []string{v2 + " in " + read, v1 + " in " + read}
	case 2:
		if !g.plain {
			fmt.Fprintf(b, "%s%s := %s if %s\n\n", obj, by, v2, g.body())
			break
		}
		fallthrough
	default:
		fmt.Fprintf(b, "%s%s := %s\n\n", obj, by, v2)
	}
	return []string{read + " == " + v2, read + " == " + v2, read + " == " + v1, read, "not " + read + " == " + v2,
		obj + "[" + key + "] == " + v1, "count(" + obj + ") > 1"}
}

// compare compares a term with a constant: of any type when the term is a
// member of the input (mismatches are decided at evaluation), a string when it
// is computed (the type checker refuses a string compared with a number).
func (g *diffGen) compare(op string) string {
	x := g.term()
	if strings.HasPrefix(x, "input.") {
		return x + " " + op + " " + g.constant()
	}
	return x + " " + op + " " + g.pick(g.stringConstant(), `"a"`, `"b"`)
}

func (g *diffGen) body() string {
	var cs []string
	for range 1 + g.r.IntN(3) {
		cs = append(cs, g.cond())
	}
	return "{\n\t" + strings.Join(cs, "\n\t") + "\n}"
}

// value is a rule's value: mostly constants that may conflict.
func (g *diffGen) value(choices ...string) string {
	if g.chance(8) {
		return g.term()
	}
	return g.pick(choices...)
}

// policy writes a module: helper functions and rules (several definitions that
// may conflict, else chains, defaults), allow, and maybe the property rule.
func (g *diffGen) policy() (module string, hasRule bool) {
	var b strings.Builder
	b.WriteString("package dirgate.authz\n\n")
	g.plain = g.chance(3)
	helpers := 3
	if g.plain {
		helpers = 0
	}
	for i := range g.r.IntN(helpers + 1) {
		name := fmt.Sprintf("f%d", i)
		for range 1 + g.r.IntN(3) {
			c := g.stringConstant()
			if g.chance(2) {
				c = g.pick(`"CN="`, `""`, `","`, `"="`) // most names: definitions that hold together
			}
			fmt.Fprintf(&b, "%s(x) := %s if {\n\t%s(x, %s)\n}", name, g.value(`"a"`, `"a"`, `"b"`),
				g.pick("startswith", "contains", "endswith"), c)
			if g.chance(3) {
				fmt.Fprintf(&b, " else := %s if %s", g.value(`"a"`, `"b"`), g.body())
			}
			b.WriteString("\n\n")
		}
		if g.chance(5) {
			fmt.Fprintf(&b, "%s(x) := %s if lower(x) == %s\n\n", name, g.value(`"a"`, `"b"`), g.stringConstant())
		}
		if g.chance(5) {
			fmt.Fprintf(&b, "default %s(_) := %s\n\n", name, g.pick(`"a"`, `"b"`, "false"))
		}
		g.funcs = append(g.funcs, name)
	}
	if !g.plain && g.chance(4) {
		// A function of two arguments, maybe with a default.
		name := "g0"
		for range 1 + g.r.IntN(2) {
			fmt.Fprintf(&b, "%s(x, y) := %s if %s(x, y)\n\n", name, g.pick(`"a"`, `"a"`, `"b"`), g.pick("startswith", "contains", "endswith"))
		}
		if g.chance(3) {
			fmt.Fprintf(&b, "default %s(_, _) := \"b\"\n\n", name)
		}
		g.funcs2 = append(g.funcs2, name)
	}
	if g.chance(2) {
		// Plain policies too: each rule alone has one constant value, which
		// partial evaluation may inline.
		for i := range 1 + g.r.IntN(2) {
			g.objs = append(g.objs, g.keyedObject(&b, i)...)
		}
	}
	for i := range g.r.IntN(helpers + 1) {
		name := fmt.Sprintf("h%d", i)
		if g.chance(4) {
			fmt.Fprintf(&b, "default %s := %s\n\n", name, g.pick(`"x"`, "false", "true"))
		}
		for range 1 + g.r.IntN(3) {
			fmt.Fprintf(&b, "%s := %s if %s", name, g.value(`"x"`, `"x"`, `"y"`, "true", "1"), g.body())
			if g.chance(4) {
				fmt.Fprintf(&b, " else := %s if %s", g.value(`"x"`, `"y"`, "false"), g.body())
			}
			b.WriteString("\n\n")
		}
		g.rules = append(g.rules, name)
	}
	if !g.plain && g.chance(3) {
		name := "s0"
		for range 1 + g.r.IntN(2) {
			fmt.Fprintf(&b, "%s contains %s if %s\n\n", name, g.value(`"x"`, `"y"`), g.body())
		}
		g.sets = append(g.sets, name)
	}
	if len(g.objs) > 0 && (g.plain || g.chance(2)) {
		fmt.Fprintf(&b, "allow if %s\n\n", g.pick(g.objs...))
	}
	switch g.r.IntN(6) {
	case 0:
		b.WriteString("default allow := false\n\n")
	case 1:
		b.WriteString("default allow := true\n\n")
	}
	for range 1 + g.r.IntN(4) {
		switch g.r.IntN(9) {
		case 8:
			// A decision resting on a helper alone, beside others that hold for
			// some objects: where OPA may stop before the helper's conflicts.
			if len(g.rules)+len(g.funcs) > 0 {
				fmt.Fprintf(&b, "allow if input.object.guid == input.group.guid\n\n")
				for _, h := range g.rules {
					fmt.Fprintf(&b, "allow if %s\n\n", h)
				}
				for _, f := range g.funcs {
					fmt.Fprintf(&b, "allow if %s(input.object.dn) == \"a\"\n\n", f)
				}
			}
		case 0:
			fmt.Fprintf(&b, "allow := %s if %s\n\n", g.pick("false", "false", `"yes"`, "1", "true"), g.body())
		case 1:
			fmt.Fprintf(&b, "allow := true if %s else := %s if %s\n\n", g.body(), g.pick("false", "true"), g.body())
		case 2:
			if c := g.cond(); !strings.Contains(c, ";") {
				fmt.Fprintf(&b, "allow if %s\n\n", c)
			}
		default:
			fmt.Fprintf(&b, "allow if %s\n\n", g.body())
		}
	}
	if g.chance(3) {
		return b.String(), false
	}
	switch g.r.IntN(6) {
	case 0:
		// An object, entry by entry, maybe with keys computed from the input.
		if g.chance(2) {
			fmt.Fprintf(&b, "properties[k] := \"ms-mcs-admpwd\" if k := %s\n\n", g.pick("input.object.displayName", "lower(input.object.objectType)", `"k"`))
		} else {
			b.WriteString("properties[\"k\"] := \"ms-mcs-admpwd\"\n\n")
		}
		fmt.Fprintf(&b, "properties.%s := \"mail\" if %s\n\n", g.pick("mail", "Ann", "user"), g.body())
	case 1, 2:
		// A complete rule, of any shape: a set, an array, an object, a string,
		// maybe conflicting or computed, with a default or an else.
		if g.chance(3) {
			fmt.Fprintf(&b, "default properties := %s\n\n", g.pick(`{"*"}`, `["mail"]`, `{"k": "ms-mcs-admpwd"}`, `"mail"`))
		}
		if g.chance(4) {
			fmt.Fprintf(&b, "properties := %s if %s else := %s\n\n", g.pick(`{"mail"}`, `["*"]`), g.body(),
				g.pick(`{"mail"}`, `{"ms-mcs-admpwd"}`, `{"k": "unicodepwd"}`))
		}
		for range 1 + g.r.IntN(2) {
			val := g.pick(`{"mail", "ms-mcs-admpwd"}`, `["*", "unicodepwd"]`, `{"note": "ms-mcs-admpwd"}`, `{"n": "unicodepwd", "m": "mail"}`, `"ms-mcs-admpwd"`,
				`{"*"}`, `[x | some x in ["mail", "department"]]`, `{lower(input.object.displayName)}`, `input.object.properties.mail`)
			if g.chance(2) {
				fmt.Fprintf(&b, "properties := %s if %s\n\n", val, g.body())
			} else {
				fmt.Fprintf(&b, "properties := %s\n\n", val)
				break
			}
		}
	default:
		// A partial set: constants, computed elements, iteration.
		names := []string{`"*"`, `"mail"`, `"department"`, `"ms-mcs-admpwd"`, `"ms-mcs-admpwd"`, `"unicodepwd"`, `"memberof"`, `"memberof"`,
			`"1.2.840.113556.1.4.90"`, `"MAIL"`, "1"}
		if len(g.objs) > 0 && g.chance(2) {
			fmt.Fprintf(&b, "properties contains \"ms-mcs-admpwd\" if %s\n\n", g.pick(g.objs...))
		}
		for range 1 + g.r.IntN(3) {
			switch g.r.IntN(6) {
			case 0, 1, 2:
				fmt.Fprintf(&b, "properties contains %s if %s\n\n", g.pick(names...), g.body())
			case 3:
				fmt.Fprintf(&b, "properties contains %s\n\n", g.pick(`"ms-mcs-admpwd"`, `"memberof"`, `"unicodepwd"`, g.pick(names...)))
			case 4:
				fmt.Fprintf(&b, "properties contains lower(%s) if %s\n\n", g.term(), g.body())
			case 5:
				v := g.newVar("n")
				fmt.Fprintf(&b, "properties contains %s if {\n\tsome %s in [%s, %s]\n\t%s\n}\n\n", v, v, g.pick(names...), g.pick(names...), g.cond())
			}
		}
	}
	return b.String(), true
}

// Awkward names: escaped commas and backslashes, letter case, look-alike OUs,
// non-ASCII, and DNs that some groups of the subject share.
var diffCNs = []string{"Ann", "bob", `x\,OU=Staff`, `y\\`, `z\\\,OU=Staff`, "Zoë Ångström", "WS-01", "ws-02", "İ", `Kim Lee\+Park`, "G1", "Admins", "M"}

func diffGroupsPool(r *rand.Rand) []dirgate.Object {
	gs := make([]dirgate.Object, 5)
	for i := range gs {
		cn := diffCNs[r.IntN(len(diffCNs))]
		gs[i] = dirgate.Object{GUID: policytest.RandGUID(r), DN: fmt.Sprintf("CN=%s%d,OU=Groups,DC=corp,DC=example,DC=com", cn, i),
			DisplayName: cn, ObjectType: dirgate.TypeGroup, ObjectTypeCode: 3, DomainName: "corp.example.com", DirectoryType: 1}
	}
	return gs
}

func diffAccount(r *rand.Rand) *dirgate.AccountStatus {
	switch r.IntN(5) {
	case 0:
		return nil
	case 1:
		return &dirgate.AccountStatus{IsDisabled: true}
	case 2:
		return &dirgate.AccountStatus{IsLocked: true}
	case 3:
		return &dirgate.AccountStatus{ExpirationDate: dirgate.NewTimestamp(time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC))}
	}
	return &dirgate.AccountStatus{}
}

// diffObjects makes n objects, and the groups, with some of props: a directory
// returns the properties a listing requests, no others.
func diffObjects(r *rand.Rand, groups []dirgate.Object, props []string, n int) []dirgate.Object {
	objs := make([]dirgate.Object, 0, n+len(groups))
	for range n {
		dn := "CN=" + diffCNs[r.IntN(len(diffCNs))] + "," + policytest.RandOUs[r.IntN(len(policytest.RandOUs))]
		if r.IntN(4) == 0 {
			dn = strings.ToUpper(dn)
		}
		o := dirgate.Object{GUID: policytest.RandGUID(r), DN: dn, DisplayName: diffCNs[r.IntN(len(diffCNs))],
			ObjectType:     []string{dirgate.TypeUser, dirgate.TypeComputer, dirgate.TypeGroup, dirgate.TypeContact, dirgate.TypeForeignPrincipal, "organizationalUnit"}[r.IntN(6)],
			ObjectTypeCode: r.IntN(5), DomainName: diffDomains[r.IntN(len(diffDomains))], DirectoryType: r.IntN(2)}
		if o.ObjectType == dirgate.TypeUser || o.ObjectType == dirgate.TypeComputer {
			o.AccountStatus = diffAccount(r)
			if r.IntN(2) == 0 {
				o.PasswordStatus = &dirgate.PasswordStatus{ExpirationStatus: r.IntN(3)}
			}
		}
		o.Properties = map[string][]string{}
		for _, p := range props {
			if r.IntN(3) != 0 {
				o.Properties[p] = []string{p + "-value"}
			}
		}
		objs = append(objs, o)
	}
	return append(objs, groups...)
}

// diffDomains are the domain names of objects and callers: "" is a DN without DC
// components (a subject's as well as an object's).
var diffDomains = []string{"corp.example.com", "", "CORP.example.com", "fabrikam.example.net"}

func diffSubjects(r *rand.Rand, groups []dirgate.Object, objs []dirgate.Object) []dirgate.Principal {
	ps := make([]dirgate.Principal, 1+r.IntN(3))
	for i := range ps {
		p := dirgate.Principal{DN: "CN=Caller" + strconv.Itoa(i) + ",OU=IT,OU=Staff,DC=corp,DC=example,DC=com", GUID: policytest.RandGUID(r),
			SID: "S-1-5-21-1-2-3-" + strconv.Itoa(900+i), DisplayName: "Caller", DomainName: diffDomains[r.IntN(len(diffDomains))],
			AccountStatus: diffAccount(r), Groups: []dirgate.GroupRef{}}
		for j, g := range groups {
			if r.IntN(2) == 0 {
				p.Groups = append(p.Groups, dirgate.GroupRef{DN: g.DN, GUID: g.GUID, SID: "S-1-5-21-1-2-3-" + strconv.Itoa(1000+j)})
			}
		}
		// A "group" named like an object of the listing, so that membership tests hit.
		if o := objs[r.IntN(len(objs))]; r.IntN(2) == 0 {
			p.Groups = append(p.Groups, dirgate.GroupRef{DN: o.DN, GUID: o.GUID, SID: "S-1-5-21-1-2-3-2000"})
		}
		ps[i] = p
	}
	return ps
}

// diffWorld makes the case of one seed: a random policy, or (one case in four)
// the bundled policy with random roles.
func diffWorld(seed uint64) world {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	groups := diffGroupsPool(r)
	// The properties listings request: none in one case of five, otherwise some
	// of them, secret and DN-valued ones among them.
	var props []string
	if r.IntN(5) != 0 {
		for _, p := range []string{"department", "mail", "ms-mcs-admpwd", "unicodepwd", "memberof", "1.2.840.113556.1.4.90"} {
			if r.IntN(3) != 0 {
				props = append(props, p)
			}
		}
	}
	objs := diffObjects(r, groups, props, 8)
	w := world{subjects: diffSubjects(r, groups, objs), objs: objs, data: map[string]any{}, props: props}
	w.groups = []dirgate.Object{groups[r.IntN(len(groups))], groups[r.IntN(len(groups))]}[:1+r.IntN(2)]
	if r.IntN(4) == 0 {
		src, err := bundled.FS.ReadFile("authz.rego")
		if err != nil {
			panic(err)
		}
		w.modules = map[string]string{"authz.rego": string(src)}
		rg := make([]policytest.RandGroup, len(groups))
		for i, g := range groups {
			rg[i] = policytest.RandGroup{DN: g.DN, GUID: g.GUID, SID: "S-1-5-21-1-2-3-" + strconv.Itoa(1000+i)}
		}
		roles := policytest.RandRoles(r, rg, 1+r.IntN(5))
		for _, role := range roles {
			m := role.(map[string]any)
			m["permissions"] = [][]any{{"view"}, {"remove"}, {"view", "remove", "add"}, {"add"}}[r.IntN(4)]
			if r.IntN(3) != 0 {
				// Secret and DN-valued attributes, which a role must name, often.
				var names []any
				for _, n := range []any{"*", "mail", "ms-Mcs-AdmPwd", "unicodePwd", "memberOf"} {
					if r.IntN(2) == 0 {
						names = append(names, n)
					}
				}
				m["properties"] = names
			}
		}
		w.data = map[string]any{"dirgate": map[string]any{"roles": roles}}
		w.hasRule = true
		return w
	}
	g := &diffGen{r: r}
	mod, hasRule := g.policy()
	w.modules = map[string]string{"p.rego": mod}
	w.data = map[string]any{"types": []any{"user", "computer", 3}[:r.IntN(4)], "suffixes": []any{",ou=staff,dc=corp,dc=example,dc=com", "ou=workstations,dc=corp,dc=example,dc=com", `\,ou=staff,dc=corp,dc=example,dc=com`}[:r.IntN(4)],
		"flag": r.IntN(2) == 0, "limit": r.IntN(40)}
	w.hasRule = hasRule
	return w
}

// diffCase compares one seed's case; it reports the decisions compared, and
// skipped when the policy does not compile (for dirgate and OPA alike).
func diffCase(t *testing.T, seed uint64) (st compareStats, skipped, differs bool) {
	t.Helper()
	w := diffWorld(seed)
	dir := t.TempDir()
	for name, src := range w.modules {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "data.json"), []byte(jsonOf(w.data)), 0o644); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	a, aErr := policy.Open(context.Background(), policy.Config{Dir: dir, Logger: policytest.QuietLogger(), DecisionLog: policytest.LineLog(&log, -1)})
	o, oErr := newOracle(w.modules, w.data)
	switch {
	case aErr != nil && oErr != nil:
		t.Logf("seed %d: skipped: %v\n%s", seed, oErr, w)
		return st, true, false
	case oErr != nil:
		t.Errorf("seed %d: dirgate loads a policy OPA refuses: %v\n%s", seed, oErr, w)
		return st, false, true
	case aErr != nil:
		// A policy without allow is refused, not only evaluated as undefined.
		if !strings.Contains(aErr.Error(), "no rule defines") {
			t.Errorf("seed %d: dirgate refuses a policy OPA compiles: %v\n%s", seed, aErr, w)
			return st, false, true
		}
		return st, true, false
	}
	defer a.Close()
	diffs, st := compareWorld(a, o, w)
	st.modes = policytest.Modes(t, &log)
	for _, d := range diffs {
		t.Errorf("seed %d: %s", seed, d)
	}
	if len(diffs) > 0 {
		t.Logf("seed %d: the policy:\n%s\nreproduce with DIRGATE_POLICY_DIFF_SEED=%d DIRGATE_POLICY_DIFF_N=1", seed, w, seed)
	}
	return st, false, len(diffs) > 0
}

// The short run (plain go test, DIRGATE_POLICY_DIFF_N unset) compares the cases
// of diffFixedSeeds, then diffRandomCases cases from a start seed drawn at random
// for each run (logged; DIRGATE_POLICY_DIFF_SEED sets it). The fixed seeds keep
// every run from becoming vacuous: the run fails when its listings reach the
// predicate mode fewer than diffMinPredicate times or when it never keeps a
// property that "*" does not cover (diffMinNamedOnly), so that a change to the
// generator or to the engine's modes cannot silently stop the check from
// covering the translated path and the properties only a name grants.
const (
	diffFixedSeeds   = 24
	diffRandomCases  = 8
	diffMinPredicate = 40
	diffMinNamedOnly = 10
)

// TestDifferentialOPA runs the differential check: the short run by default;
// with DIRGATE_POLICY_DIFF_N set, the cases of consecutive seeds from
// DIRGATE_POLICY_DIFF_SEED (random when unset) until that many decisions are
// compared.
func TestDifferentialOPA(t *testing.T) {
	want := 0
	if s := os.Getenv("DIRGATE_POLICY_DIFF_N"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("DIRGATE_POLICY_DIFF_N=%q: want a positive number", s)
		}
		want = n
	}
	start := 1 + rand.Uint64N(1<<40)
	if s := os.Getenv("DIRGATE_POLICY_DIFF_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("DIRGATE_POLICY_DIFF_SEED=%q: want a number", s)
		}
		start = n
	}
	t.Logf("start seed %d (DIRGATE_POLICY_DIFF_SEED=%d repeats this run)", start, start)
	var seeds func(yield func(uint64) bool)
	if want == 0 {
		seeds = func(yield func(uint64) bool) {
			for s := uint64(1); s <= diffFixedSeeds; s++ {
				if !yield(s) {
					return
				}
			}
			for s := start; s < start+diffRandomCases; s++ {
				if !yield(s) {
					return
				}
			}
		}
	} else {
		seeds = func(yield func(uint64) bool) {
			for s := start; ; s++ {
				if !yield(s) {
					return
				}
			}
		}
	}
	var total compareStats
	cases, skipped, failed := 0, 0, 0
	last := uint64(0)
	for seed := range seeds {
		if (want > 0 && total.decisions >= want) || failed >= 5 {
			break
		}
		st, skip, differs := diffCase(t, seed)
		if differs {
			failed++
			t.Logf("seed %d: decisions differ", seed)
		}
		total.decisions += st.decisions
		total.allowed += st.allowed
		total.secrets += st.secrets
		for m, n := range st.modes {
			if total.modes == nil {
				total.modes = map[string]int{}
			}
			total.modes[m] += n
		}
		cases++
		if skip {
			skipped++
		}
		last = seed
	}
	t.Logf("%d decisions compared with OPA (%d allowed, %d properties kept that \"*\" does not cover) in %d cases (%d policies that do not compile skipped), last seed %d; listings by engine mode: %v",
		total.decisions, total.allowed, total.secrets, cases, skipped, last, total.modes)
	if skipped*4 > cases {
		t.Errorf("%d of %d random policies do not compile: the generator is off", skipped, cases)
	}
	if want == 0 && failed == 0 {
		if n := total.modes["predicate"]; n < diffMinPredicate {
			t.Errorf("%d listings in predicate mode, want at least %d: the check no longer covers the translated path", n, diffMinPredicate)
		}
		if total.secrets < diffMinNamedOnly {
			t.Errorf("%d properties kept that \"*\" does not cover, want at least %d: the check no longer covers the properties only a name grants", total.secrets, diffMinNamedOnly)
		}
	}
}

// FuzzDifferentialOPA is the differential check as a fuzz target: each input
// is a seed, whose case is compared as TestDifferentialOPA compares it.
func FuzzDifferentialOPA(f *testing.F) {
	for _, seed := range []uint64{1, 19, 35, 94, 170, 181, 229} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		diffCase(t, seed)
	})
}
