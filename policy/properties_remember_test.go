package policy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/policy"
	"github.com/dirgate/dirgate/policy/internal/policytest"
)

// swapSchema is a schema whose confidential attributes are read again (replaced).
type swapSchema struct {
	m atomic.Pointer[map[string]bool]
}

func (s *swapSchema) NamedOnlyProperties() map[string]bool { return *s.m.Load() }

// logResults splits a decision log into its lines' "result" objects.
func logResults(t *testing.T, log *bytes.Buffer) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(log.String()), "\n") {
		if l == "" {
			continue
		}
		var line struct {
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Fatalf("decision line %q: %v", l, err)
		}
		out = append(out, string(line.Result))
	}
	return out
}

// TestPropertyOutcomeRemembered: a caller listing the same listing again with the
// same properties gets the property outcome remembered with the plan's remembered
// decisions. When nothing is withheld, the listing is then decided as a selection
// (a shared body); when something is, FilterView returns the same altered objects
// and writes the same decision line. A schema read again, or another size limit,
// is worked out anew. Every request writes exactly one decision line.
func TestPropertyOutcomeRemembered(t *testing.T) {
	const module = `package dirgate.authz

allow if input.action == "view"

properties contains "*" if input.object.objectType == "user"
properties contains "mail" if input.object.objectType != "user"
`
	var log bytes.Buffer
	schema := &swapSchema{}
	schema.m.Store(&map[string]bool{})
	authz, err := policy.Open(context.Background(), policy.Config{Dir: writePolicy(t, module), Logger: policytest.QuietLogger(),
		DecisionLog: policytest.LineLog(&log), Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	ctx, p, g := context.Background(), dirgate.Principal{DN: "CN=S"}, dirgate.Object{}
	// A listing carries the properties asked for.
	only := func(names ...string) []dirgate.Object {
		objs := propObjects()
		for i := range objs {
			for k := range objs[i].Properties {
				if !slices.Contains(names, k) {
					delete(objs[i].Properties, k)
				}
			}
		}
		return objs
	}
	mailObjs := only("mail")
	objs := mailObjs

	// Nothing withheld: mail is every object's.
	mail := dirgate.ListOptions{Properties: []string{"mail"}}
	if _, err := authz.SelectView(ctx, p, g, mail, objs, 0); !errors.Is(err, dirgate.ErrPropertiesWithheld) {
		t.Fatalf("first SelectView = %v, want ErrPropertiesWithheld (nothing known yet)", err)
	}
	if n := len(logResults(t, &log)); n != 0 {
		t.Fatalf("a SelectView that declined wrote %d decision lines", n)
	}
	got, err := authz.FilterView(ctx, p, g, mail, objs)
	if err != nil || len(got) != 3 {
		t.Fatalf("FilterView: %d objects, %v", len(got), err)
	}
	sel, err := authz.SelectView(ctx, p, g, mail, objs, 0)
	if err != nil || sel.Count() != 3 || sel.Len() != 3 {
		t.Fatalf("SelectView after the outcome is known: %d of %d, %v; want every object selected", sel.Count(), sel.Len(), err)
	}
	lines := logResults(t, &log)
	if len(lines) != 2 || lines[0] != lines[1] || strings.Contains(lines[1], "withheld") {
		t.Fatalf("decision lines %q: want two equal lines naming nothing withheld", lines)
	}

	// Something withheld: department from the objects that are not users.
	log.Reset()
	both := dirgate.ListOptions{Properties: []string{"mail", "department"}}
	bothObjs := only("mail", "department")
	objs = bothObjs
	before := only("mail", "department")
	first, err := authz.FilterView(ctx, p, g, both, objs)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		if _, err := authz.SelectView(ctx, p, g, both, objs, 0); !errors.Is(err, dirgate.ErrPropertiesWithheld) {
			t.Fatalf("round %d: SelectView = %v, want ErrPropertiesWithheld", round, err)
		}
		again, err := authz.FilterView(ctx, p, g, both, objs)
		if err != nil {
			t.Fatal(err)
		}
		// The altered properties are the ones made the first time.
		if !reflect.DeepEqual(again, first) || reflect.ValueOf(again[1].Properties).UnsafePointer() != reflect.ValueOf(first[1].Properties).UnsafePointer() {
			t.Errorf("round %d: the same listing's outcome was worked out again", round)
		}
	}
	for i, want := range [][]string{{"department", "mail"}, {"mail"}, {"mail"}} {
		if k := propKeys(first[i]); !slices.Equal(k, want) {
			t.Errorf("%s: properties %v, want %v", first[i].ObjectType, k, want)
		}
	}
	lines = logResults(t, &log)
	if len(lines) != 3 || lines[0] != lines[1] || lines[1] != lines[2] {
		t.Fatalf("decision lines %q: want three equal lines", lines)
	}
	if !strings.Contains(lines[0], `"withheldObjects":2,"withheldProperties":["department"]`) {
		t.Errorf("decision line %s: does not name the withheld properties", lines[0])
	}

	// The schema read again marks mail confidential: the user's "*" no longer
	// grants it; the others name it and keep it.
	objs = mailObjs
	if _, err := authz.FilterView(ctx, p, g, mail, objs); err != nil {
		t.Fatal(err)
	}
	if _, err := authz.SelectView(ctx, p, g, mail, objs, 0); err != nil {
		t.Fatal(err)
	}
	schema.m.Store(&map[string]bool{"mail": true})
	conf, err := authz.FilterView(ctx, p, g, mail, objs)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := conf[0].Properties["mail"]; ok {
		t.Error("a remembered outcome outlived the schema's confidential attributes")
	}
	if _, err := authz.SelectView(ctx, p, g, mail, objs, 0); !errors.Is(err, dirgate.ErrPropertiesWithheld) {
		t.Errorf("SelectView with mail now withheld = %v, want ErrPropertiesWithheld", err)
	}
	// Another size limit is another outcome.
	objs = bothObjs
	one, err := authz.FilterView(ctx, p, g, dirgate.ListOptions{Properties: []string{"mail", "department"}, SizeLimit: 1}, objs)
	if err != nil || len(one) != 1 {
		t.Errorf("size limit 1: %d objects, %v", len(one), err)
	}
	for round := range 2 { // the second time rebuilt from the remembered outcome
		// mail is still confidential: the user (its "*") loses it.
		two, err := authz.FilterView(ctx, p, g, dirgate.ListOptions{Properties: []string{"mail", "department"}, SizeLimit: 2}, objs)
		if err != nil || len(two) != 2 || !slices.Equal(propKeys(two[0]), []string{"department"}) ||
			!slices.Equal(propKeys(two[1]), []string{"mail"}) || two[1].GUID != objs[1].GUID {
			t.Errorf("round %d, size limit 2: %+v, %v", round, two, err)
		}
	}
	if !reflect.DeepEqual(objs, before) {
		t.Error("the listing's shared objects were modified")
	}
}

// TestPropertyOutcomeNotRememberedNondeterministic: a policy calling a
// non-deterministic builtin remembers no decisions, so no property outcome: the
// listing is never decided as a selection while the rule may withhold.
func TestPropertyOutcomeNotRememberedNondeterministic(t *testing.T) {
	const module = `package dirgate.authz

allow if {
	input.action == "view"
	time.now_ns() > 0
}

properties contains "*"
`
	authz, err := policy.Open(context.Background(), policy.Config{Dir: writePolicy(t, module), Logger: policytest.QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, p, g := context.Background(), dirgate.Principal{DN: "CN=S"}, dirgate.Object{}
	objs := propObjects()
	mail := dirgate.ListOptions{Properties: []string{"mail"}}
	for round := range 3 {
		if _, err := authz.FilterView(ctx, p, g, mail, objs); err != nil {
			t.Fatal(err)
		}
		if _, err := authz.SelectView(ctx, p, g, mail, objs, 0); !errors.Is(err, dirgate.ErrPropertiesWithheld) {
			t.Fatalf("round %d: SelectView = %v, want ErrPropertiesWithheld", round, err)
		}
	}
}
