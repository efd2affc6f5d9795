package policy_test

import (
	"context"
	"io"
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/policy"
)

// compareViews asks AllowView about each object, named with group, and checks each
// answer against the reference's evaluation of the same view (the request's
// parameters at their zero values): whatever the engine mode the policy takes, an
// object's visibility is its listing decision.
func compareViews(t *testing.T, a *policy.Authorizer, ref *reference, p dirgate.Principal, group dirgate.Object, objs []dirgate.Object) {
	t.Helper()
	for i := range objs {
		err := a.AllowView(context.Background(), p, group, objs[i])
		if err != nil && dirgate.ErrorCode(err) != dirgate.EFORBIDDEN {
			t.Fatalf("AllowView: %v", err)
		}
		in := policy.Input{Action: policy.ActionView, Subject: p, Object: &objs[i], Group: group,
			Request: policy.Request{Properties: []string{}}}
		if want := ref.allow(t, in); (err == nil) != want {
			t.Errorf("subject %s, group %s, object %s (%s): AllowView allowed %v, evaluation %v",
				p.DN, group.DN, objs[i].DN, objs[i].ObjectType, err == nil, want)
		}
	}
}

// BenchmarkAllowView is what a listing pays for its group's visibility on the fast
// path: the caller's plan found by its key, and the decision it remembers.
func BenchmarkAllowView(b *testing.B) {
	svc, authz := demoService(b, io.Discard)
	p := principal(b, svc, hugoDN)
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
