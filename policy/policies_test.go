package policy_test

import (
	"math/rand/v2"
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/policy/internal/policytest"
)

// TestPoliciesMatchEvaluation: policies other than the bundled one, each written to
// exercise a part of the listing engine (a builtin the translator implements, or a
// construct it must hand to Rego), decide exactly as per-object evaluation does,
// through the engine mode the test expects.
func TestPoliciesMatchEvaluation(t *testing.T) {
	const header = "package dirgate.authz\n\n"
	tests := []struct {
		name   string
		policy string
		data   map[string]any
		mode   string // the engine mode every listing must use
	}{
		// Equality, inequality and string builtins on several fields.
		{name: "string builtins", mode: "predicate", policy: `
allow if {
	input.object.objectType != "contact"
	startswith(lower(input.object.displayName), "a")
}
allow if contains(upper(input.object.dn), "OU=IT,")
allow if trim_prefix(input.object.guid, "0") == input.object.guid
allow if trim_suffix(input.object.domainName, ".com") == "corp.example"`},
		// Numbers compare numerically (1 == 1.0); a string never equals a number.
		{name: "numbers", mode: "predicate", policy: `
allow if input.object.objectTypeCode == 1.0
allow if input.object.directoryType == "1"
allow if input.object.objectTypeCode in {4, "5"}`},
		// Membership in arrays, sets and object values, with mixed element types.
		{name: "membership", mode: "predicate", policy: `
allow if input.object.objectType in ["user", 1, true]
allow if input.object.displayName in {"Ann": "x", "k": "bob"}
allow if input.object.objectTypeCode in {"a": 5}`},
		// Negation of a translated expression.
		{name: "negation", mode: "predicate", policy: `
allow if {
	not input.object.objectType == "user"
	not endswith(input.object.dn, ",DC=corp,DC=example,DC=com")
}
allow if not regex.match("^CN=[a-z]", input.object.dn)`},
		// A builtin given the wrong type is undefined, not an error; so is lower of a
		// number.
		{name: "type errors are undefined", mode: "predicate", policy: `
allow if lower(input.object.objectTypeCode) == "1"
allow if not startswith(input.object.objectTypeCode, "1")`},
		// A default of false leaves the residual inlined.
		{name: "default false", mode: "predicate", policy: `
default allow := false
allow if input.object.objectType == "computer"`},
		// A decision that is not a boolean denies. (Definitions with different
		// values may conflict, so the policy is evaluated in full.)
		{name: "non-boolean decision", mode: "rego", policy: `
allow := "yes" if input.object.objectType == "user"
allow := true if input.object.objectType == "group"`},
		// A decision that can only be a string is never true; it does not
		// type-check against true, so the engine evaluates it in Rego.
		{name: "non-boolean constant", mode: "rego", policy: `
allow := "yes" if input.object.objectType == "user"`},
		// Data and the caller fold into constants.
		{name: "data", mode: "predicate", data: map[string]any{"types": []any{"user", "group"}}, policy: `
allow if {
	some t in data.types
	input.object.objectType == t
	count(input.subject.groups) >= 0
}`},
		// A default of true needs support rules: the policy is evaluated in full.
		{name: "default true", mode: "rego", policy: `
default allow := true
allow := false if input.object.objectType == "user"`},
		// properties are not translated.
		{name: "properties", mode: "residual", policy: `
allow if "IT" in input.object.properties.department
allow if input.object.objectType == "group"`},
		// A helper whose value is computed is not inlined (its definitions may
		// conflict), so the residual refers to it: evaluated in full.
		{name: "computed helper", mode: "rego", policy: `
kind := input.object.objectType
allow if kind == "user"`},
		// Else chains are not partially evaluated: evaluated in full.
		{name: "else", mode: "rego", policy: `
allow := true if { input.object.objectType == "user" } else := false if { input.object.objectType == "group" }`},
		// Conflicting definitions: an error for the objects where both hold, which
		// denies them, and them only (the listing's evaluation fails, so each
		// object is evaluated alone).
		{name: "conflict", mode: "rego-per-object", policy: `
allow := true if input.object.objectType == "user"
allow := false if contains(lower(input.object.dn), "staff")`},
		// A conflict in a helper on the path of some objects only.
		{name: "helper conflict", mode: "rego-per-object", policy: `
level := 1 if input.object.objectType == "user"
level := 2 if contains(input.object.dn, "IT")
allow if level > 0`},
		// A non-deterministic builtin: evaluated in Rego on every request.
		{name: "nondeterministic", mode: "rego", policy: `
allow if {
	time.now_ns() > 0
	input.object.objectType == "user"
}`},
		// ... and when that evaluation fails for some object (a conflict), each
		// object is evaluated alone.
		{name: "nondeterministic conflict", mode: "rego-per-object", policy: `
allow := true if {
	time.now_ns() > 0
	input.object.objectType == "user"
}
allow := false if contains(lower(input.object.dn), "staff")`},
		// A conflict that does not depend on the object, on the path of some objects
		// only: each object is denied by its own evaluation only.
		{name: "known error", mode: "rego-per-object", policy: `
x := 1 if input.action == "view"
x := 2 if input.action == "view"
allow if input.object.objectType == "group"
allow if { input.object.objectType == "user"; x == 1 }`},
	}
	r := rand.New(rand.NewPCG(3, 4))
	groups := policytest.RandGroups(r, 6)
	objs := policytest.RandObjects(r, 40)
	for i := range objs {
		objs[i].ObjectTypeCode = r.IntN(6)
		objs[i].DisplayName = []string{"Ann", "bob", "x"}[r.IntN(3)]
		objs[i].Properties = map[string][]string{"department": {[]string{"IT", "HR"}[r.IntN(2)]}}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			modules := map[string]string{"p.rego": header + tt.policy}
			data := tt.data
			if data == nil {
				data = map[string]any{}
			}
			a, log := policytest.OpenDir(t, modules, data)
			ref := policytest.NewReference(t, modules, data)
			for range 3 {
				p := policytest.RandSubject(r, groups)
				g := groups[r.IntN(len(groups))]
				group := dirgate.Object{GUID: g.GUID, DN: g.DN, ObjectType: dirgate.TypeGroup}
				compare(t, a, ref, p, group, dirgate.ListOptions{}, objs)
				compareViews(t, a, ref, p, group, objs)
			}
			if m := policytest.Modes(t, log); m[tt.mode] != 3 {
				t.Errorf("engine modes %v, want %s for every listing", m, tt.mode)
			}
		})
	}
}
