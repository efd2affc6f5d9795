package translate_test

import (
	"testing"

	"github.com/dirgate/dirgate"
)

// A small directory for the cases below: workstations in and out of their OU, a
// sales user, groups, a contact.
func oracleCaseWorld(module string, props []string, hasRule bool) world {
	const dc = "DC=corp,DC=example,DC=com"
	admins := dirgate.Object{GUID: "00000000-0000-0000-0000-00000000000a", DN: "CN=Admins,OU=Groups," + dc,
		DisplayName: "Admins", ObjectType: dirgate.TypeGroup, ObjectTypeCode: 3, DirectoryType: 1}
	zeta := dirgate.Object{GUID: "00000000-0000-0000-0000-00000000000b", DN: "CN=Zeta,OU=Groups," + dc,
		DisplayName: "Zeta", ObjectType: dirgate.TypeGroup, ObjectTypeCode: 3, DirectoryType: 1}
	secrets := map[string][]string{"ms-mcs-admpwd": {"Laps-Secret"}, "mail": {"x@corp.example.com"}}
	objs := []dirgate.Object{
		{GUID: "00000000-0000-0000-0000-000000000001", DN: "CN=WS-01,OU=Workstations," + dc, DisplayName: "WS-01",
			ObjectType: dirgate.TypeComputer, ObjectTypeCode: 2, DirectoryType: 1, Properties: secrets},
		{GUID: "00000000-0000-0000-0000-000000000002", DN: "CN=WS-02,OU=Servers," + dc, DisplayName: "WS-02",
			ObjectType: dirgate.TypeComputer, ObjectTypeCode: 2, DirectoryType: 1, Properties: secrets},
		{GUID: "00000000-0000-0000-0000-000000000003", DN: "CN=PC-03,OU=Workstations," + dc, DisplayName: "PC-03",
			ObjectType: dirgate.TypeComputer, ObjectTypeCode: 2, DirectoryType: 1, Properties: secrets},
		{GUID: "00000000-0000-0000-0000-000000000004", DN: "CN=Bella,OU=Sales,OU=Staff," + dc, DisplayName: "Bella",
			ObjectType: dirgate.TypeUser, ObjectTypeCode: 1, DirectoryType: 1, Properties: secrets},
		{GUID: "00000000-0000-0000-0000-000000000005", DN: "CN=Carl,OU=Contacts," + dc, DisplayName: "Carl",
			ObjectType: dirgate.TypeContact, ObjectTypeCode: 4, DirectoryType: 1},
		admins, zeta,
	}
	subject := dirgate.Principal{DN: "CN=Caller,OU=IT,OU=Staff," + dc, GUID: "00000000-0000-0000-0000-0000000000ff",
		SID: "S-1-5-21-1-2-3-999", DisplayName: "Caller",
		Groups:        []dirgate.GroupRef{{DN: admins.DN, GUID: admins.GUID, SID: "S-1-5-21-1-2-3-1000"}},
		AccountStatus: &dirgate.AccountStatus{}}
	return world{
		modules:  map[string]string{"p.rego": "package dirgate.authz\n\n" + module},
		subjects: []dirgate.Principal{subject},
		groups:   []dirgate.Object{admins, zeta},
		objs:     objs,
		props:    props,
		hasRule:  hasRule,
	}
}

// TestConflictingFunctionOutputsDeny: a function whose definitions give
// different values for the same argument is a conflict, and the decision that
// calls it an error, which denies, although one definition gives the value the
// caller compares with.
func TestConflictingFunctionOutputsDeny(t *testing.T) {
	checkWorld(t, oracleCaseWorld(`
allow if input.object.guid == input.group.guid
allow if f(input.object.dn) == "a"
f(x) := "a" if startswith(x, "CN=WS-")
f(x) := "b" if contains(x, "OU=Workstations")
`, nil, false))
}

// TestConflictFullEvaluationNeverReaches: OPA stops evaluating a rule's
// definitions that give the value it already has, so a conflict in a helper only
// they call is never reached; deciding the rule's definitions in another order
// must not reach it either.
func TestConflictFullEvaluationNeverReaches(t *testing.T) {
	checkWorld(t, oracleCaseWorld(`
allow if input.object.guid == input.group.guid
allow := false if endswith(input.object.dn, ",ou=sales,ou=staff,dc=corp,dc=example,dc=com")
allow if h
h := "x" if input.object.dn in {g.dn | some g in input.subject.groups}
h := "y" if regex.match("^CN=[A-M]", input.object.dn)
`, nil, false))
}

// TestObjectValuedPropertyRuleGrantsNothing: a property rule whose value is an
// object (not a set or an array) grants nothing, its values are not property names.
func TestObjectValuedPropertyRuleGrantsNothing(t *testing.T) {
	for _, rule := range []string{
		`properties := {"note": "ms-mcs-admpwd"}`,
		`properties["note"] := "ms-mcs-admpwd"`,
		`properties.note := "ms-mcs-admpwd"`,
		`properties := "ms-mcs-admpwd"`,
	} {
		t.Run(rule, func(t *testing.T) {
			checkWorld(t, oracleCaseWorld("allow := true\n"+rule+"\n", []string{"mail", "ms-mcs-admpwd"}, true))
		})
	}
}

// TestNegatedFailingCallDenies: in `not f(x) == y`, OPA evaluates f(x) before
// the negation, so a call that fails (a type error) fails the whole expression
// rather than making the negation hold.
func TestNegatedFailingCallDenies(t *testing.T) {
	t.Run("allow", func(t *testing.T) {
		checkWorld(t, oracleCaseWorld(`allow if not upper(input.object.objectTypeCode) == "2"`, nil, false))
	})
	t.Run("properties", func(t *testing.T) {
		checkWorld(t, oracleCaseWorld(`
allow := true
properties contains "ms-mcs-admpwd" if not upper(input.object.objectTypeCode) == "2"
`, []string{"mail", "ms-mcs-admpwd"}, true))
	})
}

// TestOverlappingRulePathsConflict: a rule that builds an object key by key
// (p[k] := ...) and one that defines a key of the same object by name (p.user
// := ...) conflict when k names that key with another value; OPA's evaluation
// then fails ("object keys must be unique"), which denies, and a property rule
// that reads the object grants nothing. Each rule alone has one constant value.
func TestOverlappingRulePathsConflict(t *testing.T) {
	props := []string{"mail", "ms-mcs-admpwd"}
	for _, c := range []struct{ name, helpers string }{
		{"by name", "p[k] := 1 if k := input.object.displayName\np.Bella := 2"},
		{"by string key", "p[k] := 1 if k := input.object.displayName\np[\"Bella\"] := 2"},
		{"object type", "p[k] := 1 if k := input.object.objectType\np.user := 2"},
		{"nested", "q.r[k] := 1 if k := input.object.displayName\nq.r.Bella := 2"},
		{"deeper key", "p[k] := 1 if k := input.object.displayName\np.Bella.x := 2"},
		{"set under the object", "p[k] := 1 if k := input.object.displayName\np.Bella contains 2"},
	} {
		reads := map[string]string{"object type": "p.user == 2", "nested": "q.r.Bella == 2", "deeper key": "p.Bella.x == 2", "set under the object": "2 in p.Bella"}[c.name]
		if reads == "" {
			reads = "p.Bella == 2"
		}
		t.Run(c.name+"/allow", func(t *testing.T) {
			checkWorld(t, oracleCaseWorld(c.helpers+"\nallow if "+reads+"\n", props, false))
		})
		t.Run(c.name+"/properties", func(t *testing.T) {
			checkWorld(t, oracleCaseWorld(c.helpers+"\nallow := true\nproperties contains \"ms-mcs-admpwd\" if "+reads+"\n", props, true))
		})
	}
}

// TestPartialEvaluationPanicDecidesInFull: OPA's partial evaluation panics on a
// rule adding to a set under an object built key by key (sorting the support
// rules it makes); the listing, the properties and the views are then decided in
// full, as OPA decides them, instead of the panic ending the process.
func TestPartialEvaluationPanicDecidesInFull(t *testing.T) {
	helpers := `
o[k] := 1 if {
	k := input.subject.displayName
	input.object.nosuch == input.object.displayName
}
o.Caller contains "a" if input.object.objectTypeCode != 1
`
	t.Run("allow", func(t *testing.T) {
		checkWorld(t, oracleCaseWorld(helpers+`allow if "a" in o.Caller`+"\n", nil, false))
	})
	t.Run("properties", func(t *testing.T) {
		checkWorld(t, oracleCaseWorld(helpers+"allow := true\n"+`properties contains "ms-mcs-admpwd" if "a" in o.Caller`+"\n",
			[]string{"mail", "ms-mcs-admpwd"}, true))
	})
}

// TestConflictBeforeUndefinedCaller: OPA evaluates a body in order, so a call to
// a function whose definitions conflict for the object fails the decision even
// when a later expression, over the caller alone, is undefined. Partial
// evaluation with the object unknown drops such a body at the undefined
// expression without reaching the call; the decision must still fail, for allow
// and for the property rule, whose constant definitions then grant nothing.
func TestConflictBeforeUndefinedCaller(t *testing.T) {
	helpers := `
f(x) := "a" if contains(x, "")
f(x) := "a" if {
	startswith(x, "CN=")
} else := "b" if {
	true
}
`
	t.Run("allow", func(t *testing.T) {
		checkWorld(t, oracleCaseWorld(helpers+`
allow if {
	f(upper(input.object.displayName)) == "a"
	upper(input.subject.accountStatus.isDisabled) == "X"
}
allow if input.object.objectType == "computer"
`, nil, false))
	})
	t.Run("properties", func(t *testing.T) {
		checkWorld(t, oracleCaseWorld(helpers+`
allow := true
properties contains upper(input.subject.accountStatus.isDisabled) if {
	regex.match("(?i)ou=staff", f(upper(input.object.displayName)))
}
properties contains "ms-mcs-admpwd"
`, []string{"mail", "ms-mcs-admpwd"}, true))
	})
}
