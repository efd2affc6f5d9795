package explain_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/policy"
	"github.com/dirgate/dirgate/policy/explain"
	"github.com/dirgate/dirgate/policy/internal/policytest"
	bundled "github.com/dirgate/dirgate/rego"
)

// explainPolicy is the bundled policy with one more role: the help desk may explain
// anyone's decisions, without reading any secret attribute itself.
func explainPolicy(t *testing.T) string {
	t.Helper()
	module, err := bundled.FS.ReadFile("authz.rego")
	if err != nil {
		t.Fatal(err)
	}
	b, err := bundled.FS.ReadFile("data.json")
	if err != nil {
		t.Fatal(err)
	}
	var data map[string]any
	if err := json.Unmarshal(b, &data); err != nil {
		t.Fatal(err)
	}
	roles := data["dirgate"].(map[string]any)["roles"].([]any)
	data["dirgate"].(map[string]any)["roles"] = append(roles, map[string]any{
		"name": "help-desk-explains", "trustees": []any{"CN=Help Desk,OU=Groups,DC=corp,DC=example,DC=com"},
		"permissions": []any{"explain"}, "scopes": []any{map[string]any{"all": true}},
	})
	return policytest.WriteDir(t, map[string]string{"authz.rego": string(module)}, data)
}

// TestExplainAppliesPropertyPolicies: the decisions API shows which properties the
// explored principal's property policy withholds, and evaluates every decision and
// reason on the objects as the caller may see them: a draft cannot print, nor
// decide on, a property the caller's own property policy withholds.
func TestExplainAppliesPropertyPolicies(t *testing.T) {
	authz, err := policy.Open(context.Background(), policy.Config{Dir: explainPolicy(t), Logger: policytest.QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	svc := &dirgate.MemberService{Dir: policytest.LAPSDemo(t), Authz: authz}
	opts := dirgate.ListOptions{Properties: []string{"description", "ms-mcs-admpwd"}}
	group, err := svc.Group(context.Background(), dirgate.MustParseIdentifier(policytest.MixedMembersDN))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := svc.UnfilteredOf(context.Background(), group, opts)
	if err != nil {
		t.Fatal(err)
	}
	hugo, dana := policytest.Principal(t, svc, policytest.HugoDN), policytest.Principal(t, svc, policytest.DanaDN)
	leak := `
reasons contains sprintf("%v", [input.object.properties]) if true
`
	oracle := `
allow if {
	input.action == "view"
	input.object.properties["ms-mcs-admpwd"][0] == "` + policytest.LAPSPass + `"
}
`
	module, _ := bundled.FS.ReadFile("authz.rego")
	explainFor := func(caller, subject dirgate.Principal, draft string) explain.Explanation {
		t.Helper()
		q := explain.Query{Caller: caller, Subject: subject, Group: group, Options: opts, Objects: objs}
		if draft != "" {
			q.Draft = string(module) + draft
		}
		ex, err := explain.NewExplainer(authz, nil).Explain(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		return ex
	}
	wsOf := func(ex explain.Explanation) explain.ObjectExplanation {
		for _, o := range ex.Objects {
			if o.DN == policytest.WS0001 {
				return o
			}
		}
		t.Fatalf("no WS-0001 in %+v", ex)
		return explain.ObjectExplanation{}
	}

	// The admin, who reads LAPS passwords, sees that the help desk's listing would
	// not show WS-0001's, and that its own would.
	if got := wsOf(explainFor(dana, hugo, "")).Active.WithheldProperties; !slices.Equal(got, []string{"ms-mcs-admpwd"}) {
		t.Errorf("dana explaining hugo: withheld %v, want [ms-mcs-admpwd]", got)
	}
	if got := wsOf(explainFor(dana, dana, "")).Active.WithheldProperties; len(got) != 0 {
		t.Errorf("dana explaining dana: withheld %v, want none", got)
	}
	// The admin's draft reads the password it may read.
	ex := explainFor(dana, dana, leak)
	if !strings.Contains(fmt.Sprint(wsOf(ex).Candidate.Reasons.View), policytest.LAPSPass) {
		t.Errorf("dana's draft does not see the password dana may read: %+v", wsOf(ex).Candidate.Reasons)
	}
	// The help desk, which may explain but not read the password, learns nothing of
	// it: not through a draft's reasons, nor through a decision on it.
	for _, subject := range []dirgate.Principal{dana, hugo} {
		ex := explainFor(hugo, subject, leak)
		b, _ := json.Marshal(ex)
		if strings.Contains(string(b), policytest.LAPSPass) {
			t.Errorf("the help desk explaining %s reads the password: %s", subject.DisplayName, b)
		}
		if !strings.Contains(string(b), "Office workstation") {
			t.Errorf("the help desk explaining %s: the draft does not see what the help desk may read: %s", subject.DisplayName, b)
		}
	}
	// A decision on the password is an oracle: a draft granting Bella (who holds no
	// role) the view of an object whose password matches a guess. Explained by the
	// admin, who may read it, the guess is seen to match; explained by the help
	// desk, the object has no password, whatever the guess.
	bella := policytest.Principal(t, svc, policytest.BellaDN)
	if !wsOf(explainFor(dana, bella, oracle)).Candidate.View {
		t.Error("dana: the oracle draft does not see the password dana may read")
	}
	if wsOf(explainFor(hugo, bella, oracle)).Candidate.View {
		t.Error("the help desk learns the password through the oracle draft's decision")
	}
}

// TestDraftOutputBounded: a draft's reasons are bounded in count, per reason and
// per answer, whatever it computes.
func TestDraftOutputBounded(t *testing.T) {
	explainRule := "package dirgate.authz\nallow if input.action == \"explain\"\nallow if input.action == \"view\"\n"
	a, err := policy.Open(context.Background(), policy.Config{Dir: policytest.WriteDir(t, map[string]string{"authz.rego": explainRule}, nil), Logger: policytest.QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	objs := make([]dirgate.Object, 200)
	for i := range objs {
		objs[i] = dirgate.Object{GUID: fmt.Sprintf("00000000-0000-0000-0000-%012d", i), DN: fmt.Sprintf("CN=o%d,DC=x", i), ObjectType: "user"}
	}
	draft := explainRule + `
reasons contains sprintf("%d %02000d", [i, 0]) if some i in numbers.range(1, 40)
`
	ex, err := explain.NewExplainer(a, nil).Explain(context.Background(), explain.Query{Caller: dirgate.Principal{GUID: "aud"}, Objects: objs, Draft: draft})
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, o := range ex.Objects {
		r := o.Candidate.Reasons.View
		if len(r) > explain.MaxReasons+1 {
			t.Fatalf("%d reasons for one object", len(r))
		}
		for _, s := range r {
			if len(s) > explain.MaxReasonBytes {
				t.Fatalf("a reason of %d bytes", len(s))
			}
			total += len(s)
		}
	}
	if first := ex.Objects[0].Candidate.Reasons.View; len(first) != explain.MaxReasons+1 || first[explain.MaxReasons] != "(24 more)" {
		t.Errorf("first object's reasons end %q, want %d reasons and (24 more)", first[len(first)-1], len(first))
	}
	if !ex.ReasonsTruncated || total > explain.MaxReasonsBytes+explain.MaxReasons*explain.MaxReasonBytes {
		t.Errorf("reasons of %d bytes in all, truncated %v", total, ex.ReasonsTruncated)
	}
}
