package policy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/policy"
	"github.com/dirgate/dirgate/policy/candidate"
	"github.com/dirgate/dirgate/policy/internal/policytest"
)

// compareViews asks AllowView about each object, named with group, and checks each
// answer against the reference's evaluation of the same view (the request's
// parameters at their zero values): whatever the engine mode the policy takes, an
// object's visibility is its listing decision.
func compareViews(t *testing.T, a *policy.Authorizer, ref *policytest.Reference, p dirgate.Principal, group dirgate.Object, objs []dirgate.Object) {
	t.Helper()
	for i := range objs {
		err := a.AllowView(context.Background(), p, group, objs[i])
		if err != nil && dirgate.ErrorCode(err) != dirgate.EFORBIDDEN {
			t.Fatalf("AllowView: %v", err)
		}
		in := policy.Input{Action: policy.ActionView, Subject: p, Object: &objs[i], Group: group,
			Request: policy.Request{Properties: []string{}}}
		if want := ref.Allow(t, in); (err == nil) != want {
			t.Errorf("subject %s, group %s, object %s (%s): AllowView allowed %v, evaluation %v",
				p.DN, group.DN, objs[i].DN, objs[i].ObjectType, err == nil, want)
		}
	}
}

// BenchmarkAllowView is what a listing pays for its group's visibility on the fast
// path: the caller's plan found by its key, and the decision it remembers.
func BenchmarkAllowView(b *testing.B) {
	svc, authz := demoService(b, io.Discard)
	p := policytest.Principal(b, svc, hugoDN)
	group, err := svc.Dir.Lookup(context.Background(), dirgate.MustParseIdentifier(mixedMembers), nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		if err := authz.AllowView(ctx, p, group, group); err != nil {
			b.Fatal(err)
		}
	}
}

// TestAllowViewLogged: a denied view is the request's decision line (action view,
// the object, allowed false); an allowed one writes no line of its own unless a
// candidate policy decides it differently, and then says so.
func TestAllowViewLogged(t *testing.T) {
	type viewLine struct {
		Input struct {
			Action string                    `json:"action"`
			Group  struct{ GUID string }     `json:"group"`
			Object struct{ GUID, DN string } `json:"object"`
		} `json:"input"`
		Result    struct{ Allowed *bool } `json:"result"`
		Candidate *struct {
			NewlyDenied []string `json:"newly_denied"`
		} `json:"candidate"`
	}
	lines := func(log *bytes.Buffer) []viewLine {
		t.Helper()
		var out []viewLine
		for _, l := range strings.Split(strings.TrimSpace(log.String()), "\n") {
			if l == "" {
				continue
			}
			var v viewLine
			if err := json.Unmarshal([]byte(l), &v); err != nil {
				t.Fatalf("line %q: %v", l, err)
			}
			out = append(out, v)
		}
		log.Reset()
		return out
	}
	var log bytes.Buffer
	svc, authz := demoService(t, &log)
	ctx := context.Background()
	lookup := func(dn string) dirgate.Object {
		o, err := svc.Dir.Lookup(ctx, dirgate.MustParseIdentifier(dn), nil)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	hugo, bella := policytest.Principal(t, svc, hugoDN), policytest.Principal(t, svc, bellaDN)
	mixed := lookup(mixedMembers)
	if err := authz.AllowView(ctx, hugo, mixed, mixed); err != nil {
		t.Fatal(err)
	}
	if l := lines(&log); len(l) != 0 {
		t.Errorf("an allowed view wrote %d lines", len(l))
	}
	err := authz.AllowView(ctx, bella, mixed, mixed)
	if dirgate.ErrorCode(err) != dirgate.EFORBIDDEN {
		t.Fatalf("a caller without roles viewing a group: %v", err)
	}
	l := lines(&log)
	if len(l) != 1 || l[0].Input.Action != "view" || l[0].Input.Object.GUID != mixed.GUID || l[0].Input.Group.GUID != mixed.GUID ||
		l[0].Result.Allowed == nil || *l[0].Result.Allowed {
		t.Fatalf("a denied view logged %+v", l)
	}

	// A candidate that denies every view: the allowed view is logged, with the difference.
	cand := policytest.WriteDir(t, map[string]string{"p.rego": "package dirgate.authz\n\nallow if input.action == \"remove\"\n"}, nil)
	cfg, _ := policytest.Shadowed(t, policy.Config{Logger: policytest.QuietLogger(), DecisionLog: policytest.LineLog(&log)}, candidate.Config{Dir: cand})
	withCand, err := policy.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer withCand.Close()
	if err := withCand.AllowView(ctx, hugo, mixed, mixed); err != nil {
		t.Fatal(err)
	}
	l = lines(&log)
	if len(l) != 1 || l[0].Result.Allowed == nil || !*l[0].Result.Allowed || l[0].Candidate == nil ||
		len(l[0].Candidate.NewlyDenied) != 1 || l[0].Candidate.NewlyDenied[0] != mixed.GUID {
		t.Fatalf("an allowed view the candidate denies logged %+v", l)
	}
}
