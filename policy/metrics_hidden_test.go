package policy_test

import (
	"context"
	"io"
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/policy"
	"github.com/dirgate/dirgate/policy/candidate"
	"github.com/dirgate/dirgate/policy/internal/policytest"
)

// TestMetricsCountWhatTheCallerIsTold: dirgate_policy_decisions and the candidate's
// counters move only with outcomes the caller is told. A listing counts one view,
// however many objects it hid; a view refused (answered as an unknown object) and a
// change refused on a member the caller may not view (answered so too) count nothing,
// as an unknown object does, and neither do the candidate's differences about them;
// a change refused on a member the caller views (its 403) counts as a deny.
func TestMetricsCountWhatTheCallerIsTold(t *testing.T) {
	active := map[string]string{"authz.rego": `package dirgate.authz
allow if {
	input.action == "view"
	input.object.objectType in {"user", "group"}
}
`}
	cand := map[string]string{"authz.rego": "package dirgate.authz\n\nallow := true\n"}
	reader := newMetricReader(t)
	cfg, _ := policytest.Shadowed(t, policy.Config{Dir: policytest.WriteDir(t, active, nil), Logger: policytest.QuietLogger(), DecisionLog: policytest.LineLog(io.Discard)},
		candidate.Config{Dir: policytest.WriteDir(t, cand, nil)})
	a, err := policy.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	obj := func(guid, typ string) dirgate.Object {
		return dirgate.Object{GUID: guid, DN: "CN=" + guid + ",DC=example,DC=com", ObjectType: typ}
	}
	user := obj("00000000-0000-0000-0000-0000000000a1", dirgate.TypeUser)
	contact1 := obj("00000000-0000-0000-0000-0000000000c1", dirgate.TypeContact)
	contact2 := obj("00000000-0000-0000-0000-0000000000c2", dirgate.TypeContact)
	group := obj("00000000-0000-0000-0000-0000000000b1", dirgate.TypeGroup)
	caller := dirgate.Principal{DN: "CN=Caller,DC=example,DC=com", GUID: "00000000-0000-0000-0000-0000000000e1"}
	ctx := context.Background()

	got, err := a.FilterView(ctx, caller, group, dirgate.ListOptions{}, []dirgate.Object{user, contact1, contact2})
	if err != nil || len(got) != 1 {
		t.Fatalf("listing: %v %v, want the user alone", got, err)
	}
	if a.AllowView(ctx, caller, group, contact1) == nil {
		t.Fatal("the contact's view is allowed")
	}
	for _, decide := range []func(context.Context, dirgate.Principal, dirgate.Object, dirgate.Object) error{a.AllowRemove, a.AllowAdd} {
		if decide(ctx, caller, group, contact1) == nil || decide(ctx, caller, group, user) == nil {
			t.Fatal("a change is allowed")
		}
	}
	for _, want := range []struct {
		name  string
		attrs []attribute.KeyValue
		n     int64
	}{
		{"dirgate_policy_decisions", []attribute.KeyValue{attribute.String("action", "view"), attribute.String("decision", "allow")}, 1},
		{"dirgate_policy_decisions", []attribute.KeyValue{attribute.String("action", "view"), attribute.String("decision", "deny")}, 0},
		{"dirgate_policy_decisions", []attribute.KeyValue{attribute.String("action", "remove"), attribute.String("decision", "deny")}, 1},
		{"dirgate_policy_decisions", []attribute.KeyValue{attribute.String("action", "add"), attribute.String("decision", "deny")}, 1},
		{"dirgate_policy_candidate_differences", []attribute.KeyValue{attribute.String("action", "view"), attribute.String("change", "newly_allowed")}, 0},
		{"dirgate_policy_candidate_differences", []attribute.KeyValue{attribute.String("action", "remove"), attribute.String("change", "newly_allowed")}, 1},
		{"dirgate_policy_candidate_differences", []attribute.KeyValue{attribute.String("action", "add"), attribute.String("change", "newly_allowed")}, 1},
	} {
		if n := metricValue(t, reader, want.name, want.attrs...); n != want.n {
			t.Errorf("%s%v = %d, want %d", want.name, want.attrs, n, want.n)
		}
	}
}
