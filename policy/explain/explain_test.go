package explain_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/policy"
	"github.com/dirgate/dirgate/policy/candidate"
	"github.com/dirgate/dirgate/policy/explain"
	"github.com/dirgate/dirgate/policy/internal/policytest"
)

// TestExplainMatchesEvaluation: the decisions API's view and remove decisions, under
// the active policy and the candidate, equal per-object evaluation; explain is
// decided by the policy.
func TestExplainMatchesEvaluation(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	modules := policytest.BundledModules(t)
	groups := policytest.RandGroups(r, 10)
	activeRoles := policytest.RandRoles(r, groups, 5)
	explainer := dirgate.Principal{DN: "CN=Auditor,DC=corp,DC=example,DC=com", GUID: "a-u-d", Groups: []dirgate.GroupRef{}}
	activeRoles = append(activeRoles, map[string]any{"name": "auditors", "trustees": []any{explainer.GUID},
		"permissions": []any{"explain"}, "scopes": []any{map[string]any{"all": true}}})
	activeData := map[string]any{"dirgate": map[string]any{"roles": activeRoles}}
	candData := map[string]any{"dirgate": map[string]any{"roles": policytest.RandRoles(r, groups, 5)}}
	var log bytes.Buffer
	cfg, shadow := policytest.Shadowed(t, policy.Config{Dir: policytest.WriteDir(t, modules, activeData), Logger: policytest.QuietLogger(), DecisionLog: policytest.LineLog(&log)},
		candidate.Config{Dir: policytest.WriteDir(t, modules, candData)})
	a, err := policy.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	active, cand := policytest.NewReference(t, modules, activeData), policytest.NewReference(t, modules, candData)
	activeReasons, candReasons := newReasonsReference(t, modules, activeData), newReasonsReference(t, modules, candData)
	objs := policytest.RandObjects(r, 40)
	for range 4 {
		p := policytest.RandSubject(r, groups)
		g := groups[r.IntN(len(groups))]
		group := dirgate.Object{GUID: g.GUID, DN: g.DN, ObjectType: dirgate.TypeGroup, DisplayName: "g"}
		q := explain.Query{Caller: explainer, Subject: p, Group: group, Objects: objs}
		ex, err := explain.NewExplainer(a, nil).Explain(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		if ex.CandidateRevision != shadow.Status().Revision || ex.ActiveRevision != a.Revision() || len(ex.Objects) != len(objs) {
			t.Fatalf("explanation %+v", ex)
		}
		for i, o := range ex.Objects {
			view := policy.Input{Action: policy.ActionView, Subject: p, Object: &objs[i], Group: group, Request: policy.Request{Properties: []string{}}}
			remove := view
			remove.Action = policy.ActionRemove
			if o.GUID != objs[i].GUID || o.Active.View != active.Allow(t, view) || o.Active.Remove != active.Allow(t, remove) ||
				o.Candidate == nil || o.Candidate.View != cand.Allow(t, view) || o.Candidate.Remove != cand.Allow(t, remove) {
				t.Errorf("object %d: %+v %+v", i, o, o.Candidate)
			}
			// The reasons are the reasons rule's values, evaluated on its own, for
			// allowed actions; the bundled policy names a role for each.
			if o.Active.View != (len(o.Reasons.View) > 0) {
				t.Errorf("object %d: view %v with reasons %v", i, o.Active.View, o.Reasons.View)
			}
			checkReasons(t, activeReasons, view, o.Active.View, o.Reasons.View)
			checkReasons(t, activeReasons, remove, o.Active.Remove, o.Reasons.Remove)
			checkReasons(t, candReasons, view, o.Candidate.View, o.Candidate.Reasons.View)
			checkReasons(t, candReasons, remove, o.Candidate.Remove, o.Candidate.Reasons.Remove)
		}
		// The explored principal may not explain itself. Both decisions are logged.
		q.Caller = p
		_, err = explain.NewExplainer(a, nil).Explain(context.Background(), q)
		if dirgate.ErrorCode(err) != dirgate.EFORBIDDEN {
			t.Errorf("explain by a caller without the permission: %v", err)
		}
		var lines []string
		for _, l := range strings.Split(strings.TrimSpace(log.String()), "\n") {
			var line struct {
				Input struct {
					Action string `json:"action"`
					Object struct {
						GUID string `json:"guid"`
					} `json:"object"`
				} `json:"input"`
				Result struct {
					Allowed bool `json:"allowed"`
				} `json:"result"`
			}
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatal(err)
			}
			if line.Input.Action == policy.ActionExplain && line.Input.Object.GUID == p.GUID {
				lines = append(lines, fmt.Sprint(line.Result.Allowed))
			}
		}
		if !slices.Equal(lines, []string{"true", "false"}) {
			t.Errorf("explain decision lines %v, want allowed then refused", lines)
		}
		log.Reset()
	}
}

// TestDrafts: a draft replaces its package's modules and keeps the data; one that
// loops, is huge, calls a forbidden builtin or does not compile is answered with an
// error, with line numbers.
func TestDrafts(t *testing.T) {
	auditor := dirgate.Principal{GUID: "aud", Groups: []dirgate.GroupRef{}}
	data := map[string]any{"who": "aud"}
	explainRule := "package dirgate.authz\nallow if { input.action == \"explain\"; input.subject.guid == data.who }\n"
	a, err := policy.Open(context.Background(), policy.Config{Dir: policytest.WriteDir(t, map[string]string{"authz.rego": explainRule + "allow if input.object.objectType == \"user\"\n"}, data),
		Logger: policytest.QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	objs := []dirgate.Object{policytest.ReloadUser, policytest.ReloadComputer}
	q := explain.Query{Caller: auditor, Objects: objs}
	q.Draft = explainRule + "allow if input.object.objectType == \"computer\"\nreasons contains \"computers\" if input.object.objectType == \"computer\"\n"
	ex, err := explain.NewExplainer(a, nil).Explain(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if ex.CandidateSource != "draft" || ex.Objects[0].Candidate.View || !ex.Objects[1].Candidate.View || !ex.Objects[0].Active.View ||
		!slices.Equal(ex.Objects[1].Candidate.Reasons.View, []string{"computers"}) {
		t.Errorf("draft explanation %+v %+v %+v", ex, ex.Objects[0].Candidate, ex.Objects[1].Candidate)
	}
	q.Draft = explainRule + "allow if net.cidr_contains(\"10.0.0.0/8\", \"10.1.2.3\")\n"
	if _, err := explain.NewExplainer(a, nil).Explain(context.Background(), q); err != nil {
		t.Errorf("a draft with a deterministic net helper: %v", err)
	}
	for name, tc := range map[string]struct{ draft, want string }{
		"loop": {"package dirgate.authz\nallow if {\n\tr := numbers.range(1, 3000)\n\tsome x in r; some y in r; some z in r\n\tx + y + z < 0\n}\n",
			"longer than"},
		"huge":      {"package dirgate.authz\n# " + strings.Repeat("x", explain.MaxDraftBytes) + "\n", "larger than"},
		"http.send": {"package dirgate.authz\nallow if {\n\thttp.send({\"method\": \"get\", \"url\": \"http://127.0.0.1:1\"}).status_code == 200\n}\n", "draft.rego:3"},
		"time":      {"package dirgate.authz\n\nallow if time.now_ns() > 0\n", "draft.rego:3"},
		"net":       {"package dirgate.authz\nallow if count(net.lookup_ip_addr(\"localhost\")) > 0\n", "draft.rego:2"},
		"rand":      {"package dirgate.authz\nallow if rand.intn(\"x\", 2) == 1\n", "draft.rego:2"},
		"syntax":    {"package dirgate.authz\n\n\nallow if {\n", "draft.rego:5"},
		"type":      {"package dirgate.authz\nallow if count(1) > 0\n", "draft.rego:2"},
		"print":     {"package dirgate.authz\nallow if { print(\"x\"); trace(\"y\") }\n", "draft.rego:2"},
	} {
		q.Draft = tc.draft
		_, err := explain.NewExplainer(a, nil).Explain(context.Background(), q)
		var de *explain.DraftError
		if !errors.As(err, &de) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a draft error containing %q", name, err, tc.want)
		}
	}
}

// BenchmarkCompare2000 is the decisions API's work for a listing of 2,000 objects
// under the 20-role benchmark organisation, active and candidate (the same policy),
// reasons included: what the explorer waits for.
func BenchmarkCompare2000(b *testing.B) {
	org := policytest.NewBenchOrg()
	dir := policytest.WriteDir(b, policytest.BundledModules(b), org.Data)
	cfg, _ := policytest.Shadowed(b, policy.Config{Dir: dir, Logger: policytest.QuietLogger()}, candidate.Config{Dir: dir})
	a, err := policy.Open(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	objs := org.Objects(2000)
	q := explain.Query{Subject: org.Caller, Group: org.Group, Objects: objs}
	for b.Loop() {
		ex, err := explain.NewExplainer(a, nil).Compare(context.Background(), q)
		if err != nil || len(ex.Objects) != len(objs) {
			b.Fatal(err)
		}
	}
}

// newReasonsReference evaluates data.dirgate.authz.reasons once per object.
func newReasonsReference(t testing.TB, modules map[string]string, data map[string]any) rego.PreparedEvalQuery {
	t.Helper()
	opts := []func(*rego.Rego){rego.Query("data.dirgate.authz.reasons"), rego.Store(inmem.NewFromObject(data))}
	for name, src := range modules {
		opts = append(opts, rego.Module(name, src))
	}
	q, err := rego.New(opts...).PrepareForEval(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// checkReasons compares an allowed action's reasons with the rule evaluated on
// its own; a denied action has none.
func checkReasons(t *testing.T, q rego.PreparedEvalQuery, in policy.Input, allowed bool, got []string) {
	t.Helper()
	var want []string
	if allowed {
		b, _ := json.Marshal(in)
		var doc any
		json.Unmarshal(b, &doc)
		rs, err := q.Eval(context.Background(), rego.EvalInput(doc))
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) == 1 {
			for _, x := range rs[0].Expressions[0].Value.([]any) {
				want = append(want, x.(string))
			}
		}
	}
	slices.Sort(want)
	got = slices.Sorted(slices.Values(got))
	if !slices.Equal(nonNil(got), nonNil(want)) {
		t.Errorf("%s of %s: reasons %q, want %q", in.Action, in.Object.DN, got, want)
	}
}

// FuzzDraft: any draft text is tried or refused with a DraftError, never a panic
// or another error.
func FuzzDraft(f *testing.F) {
	for _, s := range []string{
		"package dirgate.authz\nallow if input.object.objectType == \"user\"\n",
		"package dirgate.authz\nallow if {\n",
		"package x\np := 1\n",
		"package dirgate.authz\nimport future.keywords\nallow { true }\n",
		"package dirgate.authz\nreasons contains x if x := input.object.dn\n",
		"",
	} {
		f.Add(s)
	}
	explainRule := "package dirgate.authz\nallow if input.action == \"explain\"\n"
	a, err := policy.Open(context.Background(), policy.Config{Dir: policytest.WriteDir(f, map[string]string{"authz.rego": explainRule}, nil), Logger: policytest.QuietLogger()})
	if err != nil {
		f.Fatal(err)
	}
	q := explain.Query{Caller: dirgate.Principal{Groups: []dirgate.GroupRef{}}, Objects: []dirgate.Object{policytest.ReloadUser, policytest.ReloadComputer}}
	f.Fuzz(func(t *testing.T, draft string) {
		if draft == "" {
			return // no draft: the candidate, tested elsewhere
		}
		q.Draft = draft
		_, err := explain.NewExplainer(a, nil).Explain(context.Background(), q)
		var de *explain.DraftError
		if err != nil && !errors.As(err, &de) {
			t.Fatalf("draft %q: %v", draft, err)
		}
	})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
