package policy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/adattr"
	"github.com/dirgate/dirgate/policy"
	"github.com/dirgate/dirgate/policy/internal/policytest"
	"github.com/dirgate/dirgate/render"
)

func findDN(objs []dirgate.Object, dn string) *dirgate.Object {
	for i := range objs {
		if strings.EqualFold(objs[i].DN, dn) {
			return &objs[i]
		}
	}
	return nil
}

// TestLAPSWithheldOnMemoryUpstream reproduces a finding of a security review: the help desk,
// allowed to view WS-0001, read its LAPS password through properties. The bundled
// policy gives it every attribute that is not secret; the directory admins' role
// names ms-Mcs-AdmPwd and gets it.
func TestLAPSWithheldOnMemoryUpstream(t *testing.T) {
	var log bytes.Buffer
	authz, err := policy.Open(context.Background(), policy.Config{Logger: policytest.QuietLogger(), DecisionLog: policytest.LineLog(&log)})
	if err != nil {
		t.Fatal(err)
	}
	svc := &dirgate.MemberService{Dir: policytest.LAPSDemo(t), Authz: authz}
	opts := dirgate.ListOptions{Properties: []string{"description", "ms-mcs-admpwd"}}
	group := dirgate.MustParseIdentifier(mixedMembers)

	hugo := policytest.Principal(t, svc, hugoDN)
	objs, err := svc.List(context.Background(), hugo, group, opts)
	if err != nil {
		t.Fatal(err)
	}
	ws := findDN(objs, policytest.WS0001)
	if ws == nil {
		t.Fatalf("the help desk does not see WS-0001: %v", names(objs))
	}
	if v, ok := ws.Properties["ms-mcs-admpwd"]; ok {
		t.Errorf("the help desk reads WS-0001's LAPS password: %v", v)
	}
	if got := ws.Properties["description"]; !slices.Equal(got, []string{"Office workstation"}) {
		t.Errorf("description = %v, want the public attribute kept", got)
	}
	var line struct {
		Result struct {
			WithheldObjects    int      `json:"withheldObjects"`
			WithheldProperties []string `json:"withheldProperties"`
		} `json:"result"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(log.Bytes()), &line); err != nil {
		t.Fatalf("decision line %q: %v", log.String(), err)
	}
	if !slices.Equal(line.Result.WithheldProperties, []string{"ms-mcs-admpwd"}) || line.Result.WithheldObjects == 0 {
		t.Errorf("decision line %s: want ms-mcs-admpwd named as withheld", log.String())
	}
	// The body the service renders says the same.
	b, _, err := render.NewLister(svc, nil).ListBody(context.Background(), hugo, group, opts)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b.JSON()), policytest.LAPSPass) {
		t.Errorf("the help desk's body holds the LAPS password: %s", b.JSON())
	}

	dana := policytest.Principal(t, svc, danaDN)
	objs, err = svc.List(context.Background(), dana, group, opts)
	if err != nil {
		t.Fatal(err)
	}
	if ws := findDN(objs, policytest.WS0001); ws == nil || !slices.Equal(ws.Properties["ms-mcs-admpwd"], []string{policytest.LAPSPass}) {
		t.Errorf("the directory admins' role names ms-Mcs-AdmPwd but does not read it: %+v", ws)
	}
}

// writePolicy writes a policy directory holding one module.
func writePolicy(t testing.TB, module string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "authz.rego"), []byte(module), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

type fakeSchema map[string]bool

func (s fakeSchema) NamedOnlyProperties() map[string]bool { return s }

// propObjects is a listing whose objects carry public, secret and confidential
// attributes.
func propObjects() []dirgate.Object {
	mk := func(guid, dn, typ string) dirgate.Object {
		return dirgate.Object{GUID: guid, DN: dn, DisplayName: guid, ObjectType: typ, Properties: map[string][]string{
			"mail": {guid + "@corp.example.com"}, "ms-mcs-admpwd": {"p-" + guid}, "unicodepwd": {},
			"msds-keycredentiallink": {"k"}, "msfve-recoverypassword": {"r"}, "department": {"IT"},
		}}
	}
	return []dirgate.Object{
		mk("00000000-0000-0000-0000-000000000001", "CN=A,OU=Staff,DC=corp,DC=example,DC=com", "user"),
		mk("00000000-0000-0000-0000-000000000002", "CN=B,OU=Workstations,DC=corp,DC=example,DC=com", "computer"),
		mk("00000000-0000-0000-0000-000000000003", "CN=C,OU=Groups,DC=corp,DC=example,DC=com", "group"),
	}
}

func propKeys(o dirgate.Object) []string {
	var ks []string
	for k := range o.Properties {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

var allPropNames = []string{"department", "mail", "ms-mcs-admpwd", "msds-keycredentiallink", "msfve-recoverypassword", "unicodepwd"}

// TestSecretsWithheldWithoutRule: a policy without the property rule behaves as
// {"*"}: the built-in secret attributes and those the schema marks confidential
// are left out, the others returned; the shared objects are not modified.
func TestSecretsWithheldWithoutRule(t *testing.T) {
	dir := writePolicy(t, "package dirgate.authz\n\nallow if input.action == \"view\"\n")
	var log bytes.Buffer
	authz, err := policy.Open(context.Background(), policy.Config{Dir: dir, Logger: policytest.QuietLogger(), DecisionLog: policytest.LineLog(&log),
		Schema: fakeSchema{"department": true}})
	if err != nil {
		t.Fatal(err)
	}
	objs := propObjects()
	before := propObjects()
	opts := dirgate.ListOptions{Properties: allPropNames}
	if !authz.MayWithhold(dirgate.Principal{}, opts) {
		t.Fatal("MayWithhold = false with secret properties requested")
	}
	if _, err := authz.SelectView(context.Background(), dirgate.Principal{}, dirgate.Object{}, opts, objs, 0); !errors.Is(err, dirgate.ErrPropertiesWithheld) {
		t.Fatalf("SelectView = %v, want ErrPropertiesWithheld", err)
	}
	got, err := authz.FilterView(context.Background(), dirgate.Principal{}, dirgate.Object{}, opts, objs)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("%d objects, want 3", len(got))
	}
	for _, o := range got {
		if k := propKeys(o); !slices.Equal(k, []string{"mail"}) {
			t.Errorf("%s: properties %v, want only mail (the rest is secret or confidential)", o.DN, k)
		}
	}
	if !reflect.DeepEqual(objs, before) {
		t.Error("FilterView modified the listing's shared objects")
	}
	if !strings.Contains(log.String(), `"withheldObjects":3,"withheldProperties":["department","ms-mcs-admpwd","msds-keycredentiallink","msfve-recoverypassword","unicodepwd"]`) {
		t.Errorf("decision line %s: does not name the withheld properties", log.String())
	}
	// Nothing secret requested: nothing to withhold, the selection path stays.
	plain := dirgate.ListOptions{Properties: []string{"mail"}}
	if authz.MayWithhold(dirgate.Principal{}, plain) {
		t.Error("MayWithhold = true for mail alone, without a property rule")
	}
	if _, err := authz.SelectView(context.Background(), dirgate.Principal{}, dirgate.Object{}, plain, objs, 0); err != nil {
		t.Errorf("SelectView: %v", err)
	}
}

// TestPropertyRule: the rule's set decides per object, "*" excluding secrets, an
// explicit name granting even a secret one; translated (predicate) and Rego-only
// rules alike. A rule that fails to evaluate withholds every requested property.
func TestPropertyRule(t *testing.T) {
	const allowAll = "package dirgate.authz\n\nallow if input.action == \"view\"\n"
	tests := []struct {
		name string
		rule string
		want [3][]string // per object of propObjects
	}{
		{"explicit secret per type", `
properties contains "*" if input.object.objectType == "user"
properties contains "ms-mcs-admpwd" if input.object.objectType == "computer"
`, [3][]string{{"department", "mail"}, {"ms-mcs-admpwd"}, nil}},
		{"constant", `properties := {"mail", "unicodepwd"}`, [3][]string{{"mail", "unicodepwd"}, {"mail", "unicodepwd"}, {"mail", "unicodepwd"}}},
		{"from the subject", `properties contains "department" if input.subject.dn == "CN=S"`, [3][]string{{"department"}, {"department"}, {"department"}}},
		{"computed in Rego", `
properties contains lower(input.object.displayName) if true
properties contains "*" if count(input.object.properties) > 5
`, [3][]string{{"department", "mail"}, {"department", "mail"}, {"department", "mail"}}},
		{"docs/policy.md's example", `
properties contains "*"

properties contains "ms-mcs-admpwd" if {
	some g in input.subject.groups
	g.dn == "CN=Help Desk,OU=Groups,DC=corp,DC=example,DC=com"
	input.object.objectType == "computer"
}
`, [3][]string{{"department", "mail"}, {"department", "mail"}, {"department", "mail"}}},
		{"empty set", `properties contains "x" if false`, [3][]string{nil, nil, nil}},
		{"undefined complete rule", `properties := {"mail"} if false`, [3][]string{nil, nil, nil}},
		{"conflict", `
properties := {"mail"} if input.object.objectType == "user"
properties := {"department"} if input.object.objectType != "group"
`, [3][]string{nil, {"department"}, nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			authz, err := policy.Open(context.Background(), policy.Config{Dir: writePolicy(t, allowAll+tt.rule), Logger: policytest.QuietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			opts := dirgate.ListOptions{Properties: allPropNames}
			if !authz.MayWithhold(dirgate.Principal{}, dirgate.ListOptions{Properties: []string{"mail"}}) {
				t.Error("MayWithhold = false with a property rule")
			}
			for round := range 2 { // the second time from the cached plan
				got, err := authz.FilterView(context.Background(), dirgate.Principal{DN: "CN=S"}, dirgate.Object{}, opts, propObjects())
				if err != nil {
					t.Fatal(err)
				}
				for i, o := range got {
					if k := propKeys(o); !slices.Equal(k, tt.want[i]) {
						t.Errorf("round %d, %s: properties %v, want %v", round, o.ObjectType, k, tt.want[i])
					}
				}
			}
		})
	}
}

// TestPropertyRuleSizeLimit: with a size limit, the objects returned are the first
// sizeLimit allowed ones, all filtered.
func TestPropertyRuleSizeLimit(t *testing.T) {
	authz, err := policy.Open(context.Background(), policy.Config{Dir: writePolicy(t,
		"package dirgate.authz\n\nallow if input.object.objectType != \"user\"\n"), Logger: policytest.QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	got, err := authz.FilterView(context.Background(), dirgate.Principal{}, dirgate.Object{},
		dirgate.ListOptions{Properties: allPropNames, SizeLimit: 1}, propObjects())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ObjectType != "computer" || slices.Contains(propKeys(got[0]), "ms-mcs-admpwd") {
		t.Errorf("got %+v, want the computer alone without its LAPS password", got)
	}
}

// TestDecideProperties: `dirgate policy eval` shows the property rule's value for an
// allowed view, computed both by evaluation and the way listings compute it.
func TestDecideProperties(t *testing.T) {
	authz, err := policy.Open(context.Background(), policy.Config{Logger: policytest.QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	svc := &dirgate.MemberService{Dir: policytest.LAPSDemo(t), Authz: authz}
	ws, err := svc.Dir.Lookup(context.Background(), dirgate.MustParseIdentifier(policytest.WS0001), []string{"ms-mcs-admpwd"})
	if err != nil {
		t.Fatal(err)
	}
	group, err := svc.Group(context.Background(), dirgate.MustParseIdentifier(mixedMembers))
	if err != nil {
		t.Fatal(err)
	}
	for who, want := range map[string][]string{hugoDN: {"*"}, danaDN: {"*", "directreports", "managedby", "managedobjects", "manager", "member", "memberof", "ms-ds-creatorsid", "ms-mcs-admpwd", "mslaps-password", "primarygroupid"}} {
		d, err := authz.Decide(context.Background(), policy.Input{Action: policy.ActionView, Subject: policytest.Principal(t, svc, who), Object: &ws, Group: group,
			Request: policy.Request{Properties: []string{"ms-mcs-admpwd"}}})
		if err != nil || !d.Allow || !slices.Equal(d.Properties, want) {
			t.Errorf("%s: %+v, %v; want allowed with properties %v", who, d, err, want)
		}
	}
}

// TestRandomPropertyRolesMatchEvaluation: on random roles carrying random property
// lists, each object's property set computed the way listings compute it (the
// caller's translated plan) equals the rule's value evaluated in Rego (Decide
// compares the two), and FilterView keeps exactly the properties that set allows.
func TestRandomPropertyRolesMatchEvaluation(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 3))
	names := []string{"*", "mail", "Department", "ms-Mcs-AdmPwd", "unicodePwd"}
	props := []string{"department", "mail", "ms-mcs-admpwd", "title", "unicodepwd"}
	var viewed, secretKept, withheld int
	defer func() {
		if viewed == 0 || secretKept == 0 || withheld == 0 {
			t.Errorf("the random cases decided %d views, kept a secret %d times, withheld %d times: all must happen", viewed, secretKept, withheld)
		}
	}()
	for round := range 6 {
		groups := policytest.RandGroups(r, 12)
		roles := policytest.RandRoles(r, groups, 1+r.IntN(8))
		for _, role := range roles {
			if r.IntN(4) == 0 {
				continue // the default, ["*"]
			}
			var ps []any
			for _, n := range names {
				if r.IntN(3) == 0 {
					ps = append(ps, n)
				}
			}
			role.(map[string]any)["properties"] = ps
		}
		a, _ := policytest.OpenDir(t, policytest.BundledModules(t), map[string]any{"dirgate": map[string]any{"roles": roles}})
		objs := policytest.RandObjects(r, 30)
		policytest.RandomizeDomains(r, objs)
		for i := range objs {
			objs[i].Properties = map[string][]string{}
			for _, p := range props {
				objs[i].Properties[p] = []string{p + "-value"}
			}
		}
		for range 3 {
			p := policytest.RandSubject(r, groups)
			g := groups[r.IntN(len(groups))]
			group := dirgate.Object{GUID: g.GUID, DN: g.DN, ObjectType: dirgate.TypeGroup, DisplayName: "g"}
			opts := dirgate.ListOptions{Properties: props}
			got, err := a.FilterView(context.Background(), p, group, opts, objs)
			if err != nil {
				t.Fatal(err)
			}
			j := 0
			for i := range objs {
				d, err := a.Decide(context.Background(), policy.Input{Action: policy.ActionView, Subject: p, Object: &objs[i], Group: group,
					Request: policy.Request{Properties: props}})
				if err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				if !d.Allow {
					continue
				}
				var want []string
				for _, k := range props {
					secret := adattr.IsSecretProperty(k)
					if slices.Contains(d.Properties, k) || (!secret && slices.Contains(d.Properties, "*")) {
						want = append(want, k)
					}
				}
				if j >= len(got) || got[j].GUID != objs[i].GUID {
					t.Fatalf("round %d: FilterView's objects differ from Decide's", round)
				}
				viewed++
				if slices.Contains(want, "ms-mcs-admpwd") {
					secretKept++
				}
				if len(want) < len(props) {
					withheld++
				}
				if k := propKeys(got[j]); !slices.Equal(k, want) {
					t.Errorf("round %d: %s keeps %v, want %v (set %v)", round, objs[i].DN, k, want, d.Properties)
				}
				j++
			}
		}
	}
}

// TestPolicyTestQueriesThePropertyRule: `dirgate policy test` runs tests of the
// property rule like any other, and reports a wrong expectation as a failure.
func TestPolicyTestQueriesThePropertyRule(t *testing.T) {
	rule := "package dirgate.authz\n\nallow if input.action == \"view\"\n\n" +
		"properties contains \"ms-mcs-admpwd\" if input.object.objectType == \"computer\"\n"
	for _, tc := range []struct {
		want string
		ok   bool
	}{{`{"ms-mcs-admpwd"}`, true}, {`{"*"}`, false}} {
		test := "package dirgate.authz_test\n\nimport data.dirgate.authz\n\n" +
			"test_computers if authz.properties == " + tc.want + " with input as {\"action\": \"view\", \"object\": {\"objectType\": \"computer\"}}\n"
		dir := policytest.WriteDir(t, map[string]string{"authz.rego": rule, "authz_test.rego": test}, nil)
		var out bytes.Buffer
		sum, err := policy.RunTests(context.Background(), dir, policy.TestOptions{}, &out)
		if err != nil {
			t.Fatal(err)
		}
		if sum.OK() != tc.ok || sum.Passed+sum.Failed != 1 {
			t.Errorf("want %s: %+v\n%s", tc.want, sum, out.String())
		}
	}
}
