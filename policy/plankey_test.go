package policy_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/policy/internal/policytest"
)

// TestPlanKeyFollowsWhatThePolicyReads: listings that differ only in input members
// the policy never reads share a plan; a policy that reads a member, directly,
// through a function argument or a computed key, gets a plan per value.
func TestPlanKeyFollowsWhatThePolicyReads(t *testing.T) {
	tests := []struct {
		name       string
		policy     string
		wantShared bool
	}{
		// Reads input.request: a plan per sizeLimit.
		{name: "direct", policy: "allow if input.request.sizeLimit > 1"},
		// Passes the whole input to a function.
		{name: "whole input", policy: "allow if f(input)\nf(x) if x.request.sizeLimit > 1"},
		// Chooses the member at evaluation.
		{name: "computed member", policy: "allow if { some k in [\"request\"]; input[k].sizeLimit > 1 }"},
		// Never reads input.request: one plan serves every sizeLimit.
		{name: "not read", policy: "allow if input.object.objectType == \"user\"\nallow if input.subject.dn == \"CN=Boss\"", wantShared: true},
	}
	user := []dirgate.Object{{GUID: "u", DN: "CN=u,DC=x", ObjectType: dirgate.TypeUser}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, log := policytest.OpenDir(t, map[string]string{"p.rego": "package dirgate.authz\n" + tt.policy}, map[string]any{})
			ref := policytest.NewReference(t, map[string]string{"p.rego": "package dirgate.authz\n" + tt.policy}, map[string]any{})
			for _, size := range []int{0, 5} {
				compare(t, a, ref, dirgate.Principal{DN: "CN=Caller"}, dirgate.Object{DN: "CN=G"}, dirgate.ListOptions{SizeLimit: size}, user)
			}
			lines := bytes.Split(bytes.TrimSpace(log.Bytes()), []byte("\n"))
			if len(lines) != 2 {
				t.Fatalf("%d decision lines", len(lines))
			}
			var second struct {
				Engine struct {
					CachedPlan bool `json:"cachedPlan"`
				} `json:"engine"`
			}
			if err := json.Unmarshal(lines[1], &second); err != nil {
				t.Fatal(err)
			}
			if second.Engine.CachedPlan != tt.wantShared {
				t.Errorf("second listing reused the first one's plan: %v, want %v", second.Engine.CachedPlan, tt.wantShared)
			}
		})
	}
}
