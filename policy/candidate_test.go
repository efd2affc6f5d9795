package policy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/policy"
)

// writeDir writes a policy directory of modules and data.
func writeDir(t testing.TB, modules map[string]string, data map[string]any) string {
	t.Helper()
	dir := t.TempDir()
	for name, src := range modules {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if data == nil {
		data = map[string]any{}
	}
	b, err := json.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

type candidateLine struct {
	Input struct {
		Action string `json:"action"`
	} `json:"input"`
	Result struct {
		DeniedGuids []string `json:"deniedGuids"`
	} `json:"result"`
	Candidate *struct {
		Revision     string   `json:"revision"`
		NewlyAllowed []string `json:"newly_allowed"`
		NewlyDenied  []string `json:"newly_denied"`
		Truncated    bool     `json:"truncated"`
	} `json:"candidate"`
}

func candidateLines(t *testing.T, log *bytes.Buffer) []candidateLine {
	t.Helper()
	return decodeLines[candidateLine](t, log)
}

// decodeLines decodes each JSON line of log into a T and empties log.
func decodeLines[T any](t *testing.T, log *bytes.Buffer) []T {
	t.Helper()
	var out []T
	sc := bufio.NewScanner(log)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l T
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
	log.Reset()
	return out
}

// TestCandidateMatchesIndependentComparison: with random active and candidate roles,
// listings are answered by the active policy alone, and each decision line's
// candidate member names exactly the objects on which per-object evaluation of the
// two policies differs.
func TestCandidateMatchesIndependentComparison(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 13))
	modules := bundledModules(t)
	for round := range 6 {
		groups := randGroups(r, 10)
		activeData := map[string]any{"dirgate": map[string]any{"roles": randRoles(r, groups, 1+r.IntN(6))}}
		candData := map[string]any{"dirgate": map[string]any{"roles": randRoles(r, groups, 1+r.IntN(6))}}
		var log bytes.Buffer
		a, err := policy.Open(context.Background(), policy.Config{
			Dir: writeDir(t, modules, activeData), Logger: quietLogger(), DecisionLog: lineLog(&log, 1000),
			Candidate: policy.CandidateConfig{Dir: writeDir(t, modules, candData)},
		})
		if err != nil {
			t.Fatal(err)
		}
		if st := a.CandidateStatus(); st.Revision == "" || st.LastError != "" {
			t.Fatalf("candidate status %+v", st)
		}
		active, cand := newReference(t, modules, activeData), newReference(t, modules, candData)
		objs := randObjects(r, 30)
		for range 3 {
			p := randSubject(r, groups)
			g := groups[r.IntN(len(groups))]
			group := dirgate.Object{GUID: g.guid, DN: g.dn, ObjectType: dirgate.TypeGroup, DisplayName: "g"}
			// Twice: the second listing is decided from remembered decisions.
			for range 2 {
				got, err := a.FilterView(context.Background(), p, group, dirgate.ListOptions{}, objs)
				if err != nil {
					t.Fatal(err)
				}
				var wantShown, wantAllowed, wantDenied []string
				for i := range objs {
					in := policy.Input{Action: policy.ActionView, Subject: p, Object: &objs[i], Group: group,
						Request: policy.Request{Properties: []string{}}}
					x, y := active.allow(t, in), cand.allow(t, in)
					if x {
						wantShown = append(wantShown, objs[i].GUID)
					}
					if !x && y {
						wantAllowed = append(wantAllowed, objs[i].GUID)
					}
					if x && !y {
						wantDenied = append(wantDenied, objs[i].GUID)
					}
				}
				if g := guids(got); !slices.Equal(g, wantShown) {
					t.Fatalf("round %d: the answer changed with a candidate: %v, want %v", round, g, wantShown)
				}
				lines := candidateLines(t, &log)
				if len(lines) != 1 || lines[0].Candidate == nil {
					t.Fatalf("round %d: want one line with a candidate member, got %+v", round, lines)
				}
				c := lines[0].Candidate
				if !slices.Equal(nonNil(c.NewlyAllowed), nonNil(wantAllowed)) || !slices.Equal(nonNil(c.NewlyDenied), nonNil(wantDenied)) {
					t.Errorf("round %d: candidate newly allowed %v denied %v, want %v %v", round, c.NewlyAllowed, c.NewlyDenied, wantAllowed, wantDenied)
				}
				if c.Revision != a.CandidateStatus().Revision {
					t.Errorf("candidate revision %q", c.Revision)
				}
			}
			// A removal: its line compares too.
			member := objs[r.IntN(len(objs))]
			err = a.AllowRemove(context.Background(), p, group, member)
			in := policy.Input{Action: policy.ActionRemove, Subject: p, Object: &member, Group: group, Request: policy.Request{Properties: []string{}}}
			x, y := active.allow(t, in), cand.allow(t, in)
			if (err == nil) != x {
				t.Errorf("removal answered %v, active policy decides %v", err, x)
			}
			c := candidateLines(t, &log)[0].Candidate
			switch {
			case x == y && (len(c.NewlyAllowed)+len(c.NewlyDenied)) != 0,
				!x && y && !slices.Equal(c.NewlyAllowed, []string{member.GUID}),
				x && !y && !slices.Equal(c.NewlyDenied, []string{member.GUID}):
				t.Errorf("removal: active %v candidate %v, logged %+v", x, y, c)
			}
		}
	}
}

func guids(objs []dirgate.Object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GUID)
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// TestCandidateBoundedAndSampled: the GUIDs named are bounded like deniedGuids,
// and a negative sample compares nothing.
func TestCandidateBoundedAndSampled(t *testing.T) {
	allowAll := allowAllPolicy()
	none := map[string]string{"authz.rego": "package dirgate.authz\nallow if false\n"}
	objs := randObjects(rand.New(rand.NewPCG(1, 1)), 20)
	for _, tc := range []struct {
		sample float64
		want   int // lines with a candidate
	}{{0, 1}, {1, 1}, {-1, 0}} {
		var log bytes.Buffer
		a, err := policy.Open(context.Background(), policy.Config{Dir: writeDir(t, none, nil), Logger: quietLogger(),
			DecisionLog: lineLog(&log, 3),
			Candidate:   policy.CandidateConfig{Dir: writeDir(t, allowAll, nil), Sample: tc.sample}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.FilterView(context.Background(), dirgate.Principal{}, dirgate.Object{}, dirgate.ListOptions{}, objs); err != nil {
			t.Fatal(err)
		}
		lines := candidateLines(t, &log)
		n := 0
		for _, l := range lines {
			if l.Candidate != nil {
				n++
				if len(l.Candidate.NewlyAllowed) != 3 || !l.Candidate.Truncated {
					t.Errorf("sample %v: candidate member %+v, want 3 GUIDs and truncated", tc.sample, l.Candidate)
				}
			}
		}
		if n != tc.want {
			t.Errorf("sample %v: %d lines with a candidate, want %d", tc.sample, n, tc.want)
		}
	}
}

// TestBrokenCandidate: a candidate that does not load does not stop the gateway,
// is reported by CandidateReady, and never changes an answer; fixing it reloads it.
func TestBrokenCandidate(t *testing.T) {
	candDir := writeDir(t, map[string]string{"authz.rego": brokenPolicy}, nil)
	a, err := policy.Open(context.Background(), policy.Config{Dir: writeDir(t, map[string]string{"authz.rego": allowUsers}, nil),
		Logger: quietLogger(), Candidate: policy.CandidateConfig{Dir: candDir}})
	if err != nil {
		t.Fatalf("a broken candidate stopped the policy: %v", err)
	}
	if err := a.CandidateReady(); err == nil || !strings.Contains(err.Error(), "no candidate") {
		t.Errorf("CandidateReady = %v", err)
	}
	if err := a.Ready(); err != nil {
		t.Errorf("the active policy's readiness reports %v", err)
	}
	if got := visible(t, a); got != "u" {
		t.Errorf("listing with a broken candidate shows %q", got)
	}
	writeFile(t, filepath.Join(candDir, "authz.rego"), allowComputers)
	if err := a.Watch(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	writeFile(t, filepath.Join(candDir, "authz.rego"), allowComputers+"# edited\n")
	waitFor(t, "the candidate to load", func() bool { return a.CandidateReady() == nil && a.CandidateStatus().Revision != "" })
	if got := visible(t, a); got != "u" {
		t.Errorf("listing with a candidate shows %q", got)
	}
}

// TestExplainMatchesEvaluation: the decisions API's view and remove decisions, under
// the active policy and the candidate, equal per-object evaluation; explain is
// decided by the policy.
func TestExplainMatchesEvaluation(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	modules := bundledModules(t)
	groups := randGroups(r, 10)
	activeRoles := randRoles(r, groups, 5)
	explainer := dirgate.Principal{DN: "CN=Auditor,DC=corp,DC=example,DC=com", GUID: "a-u-d", Groups: []dirgate.GroupRef{}}
	activeRoles = append(activeRoles, map[string]any{"name": "auditors", "trustees": []any{explainer.GUID},
		"permissions": []any{"explain"}, "scopes": []any{map[string]any{"all": true}}})
	activeData := map[string]any{"dirgate": map[string]any{"roles": activeRoles}}
	candData := map[string]any{"dirgate": map[string]any{"roles": randRoles(r, groups, 5)}}
	var log bytes.Buffer
	a, err := policy.Open(context.Background(), policy.Config{Dir: writeDir(t, modules, activeData), Logger: quietLogger(),
		DecisionLog: lineLog(&log), Candidate: policy.CandidateConfig{Dir: writeDir(t, modules, candData)}})
	if err != nil {
		t.Fatal(err)
	}
	active, cand := newReference(t, modules, activeData), newReference(t, modules, candData)
	activeReasons, candReasons := newReasonsReference(t, modules, activeData), newReasonsReference(t, modules, candData)
	objs := randObjects(r, 40)
	for range 4 {
		p := randSubject(r, groups)
		g := groups[r.IntN(len(groups))]
		group := dirgate.Object{GUID: g.guid, DN: g.dn, ObjectType: dirgate.TypeGroup, DisplayName: "g"}
		q := policy.ExplainQuery{Caller: explainer, Subject: p, Group: group, Objects: objs}
		ex, err := a.Explain(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		if ex.CandidateRevision != a.CandidateStatus().Revision || ex.ActiveRevision != a.Revision() || len(ex.Objects) != len(objs) {
			t.Fatalf("explanation %+v", ex)
		}
		for i, o := range ex.Objects {
			view := policy.Input{Action: policy.ActionView, Subject: p, Object: &objs[i], Group: group, Request: policy.Request{Properties: []string{}}}
			remove := view
			remove.Action = policy.ActionRemove
			if o.GUID != objs[i].GUID || o.Active.View != active.allow(t, view) || o.Active.Remove != active.allow(t, remove) ||
				o.Candidate == nil || o.Candidate.View != cand.allow(t, view) || o.Candidate.Remove != cand.allow(t, remove) {
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
		_, err = a.Explain(context.Background(), q)
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
	explain := "package dirgate.authz\nallow if { input.action == \"explain\"; input.subject.guid == data.who }\n"
	a, err := policy.Open(context.Background(), policy.Config{Dir: writeDir(t, map[string]string{"authz.rego": explain + "allow if input.object.objectType == \"user\"\n"}, data),
		Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	objs := []dirgate.Object{reloadUser, reloadComputer}
	q := policy.ExplainQuery{Caller: auditor, Objects: objs}
	q.Draft = explain + "allow if input.object.objectType == \"computer\"\nreasons contains \"computers\" if input.object.objectType == \"computer\"\n"
	ex, err := a.Explain(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if ex.CandidateSource != "draft" || ex.Objects[0].Candidate.View || !ex.Objects[1].Candidate.View || !ex.Objects[0].Active.View ||
		!slices.Equal(ex.Objects[1].Candidate.Reasons.View, []string{"computers"}) {
		t.Errorf("draft explanation %+v %+v %+v", ex, ex.Objects[0].Candidate, ex.Objects[1].Candidate)
	}
	q.Draft = explain + "allow if net.cidr_contains(\"10.0.0.0/8\", \"10.1.2.3\")\n"
	if _, err := a.Explain(context.Background(), q); err != nil {
		t.Errorf("a draft with a deterministic net helper: %v", err)
	}
	for name, tc := range map[string]struct{ draft, want string }{
		"loop": {"package dirgate.authz\nallow if {\n\tr := numbers.range(1, 3000)\n\tsome x in r; some y in r; some z in r\n\tx + y + z < 0\n}\n",
			"longer than"},
		"huge":      {"package dirgate.authz\n# " + strings.Repeat("x", policy.MaxDraftBytes) + "\n", "larger than"},
		"http.send": {"package dirgate.authz\nallow if {\n\thttp.send({\"method\": \"get\", \"url\": \"http://127.0.0.1:1\"}).status_code == 200\n}\n", "draft.rego:3"},
		"time":      {"package dirgate.authz\n\nallow if time.now_ns() > 0\n", "draft.rego:3"},
		"net":       {"package dirgate.authz\nallow if count(net.lookup_ip_addr(\"localhost\")) > 0\n", "draft.rego:2"},
		"rand":      {"package dirgate.authz\nallow if rand.intn(\"x\", 2) == 1\n", "draft.rego:2"},
		"syntax":    {"package dirgate.authz\n\n\nallow if {\n", "draft.rego:5"},
		"type":      {"package dirgate.authz\nallow if count(1) > 0\n", "draft.rego:2"},
		"print":     {"package dirgate.authz\nallow if { print(\"x\"); trace(\"y\") }\n", "draft.rego:2"},
	} {
		q.Draft = tc.draft
		_, err := a.Explain(context.Background(), q)
		var de *policy.DraftError
		if !errors.As(err, &de) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a draft error containing %q", name, err, tc.want)
		}
	}
}

// BenchmarkCompare2000 is the decisions API's work for a listing of 2,000 objects
// under the 20-role benchmark organisation, active and candidate (the same policy),
// reasons included: what the explorer waits for.
func BenchmarkCompare2000(b *testing.B) {
	org := newBenchOrg()
	dir := writeDir(b, bundledModules(b), org.data)
	a, err := policy.Open(context.Background(), policy.Config{Dir: dir, Logger: quietLogger(), Candidate: policy.CandidateConfig{Dir: dir}})
	if err != nil {
		b.Fatal(err)
	}
	objs := org.objects(2000)
	q := policy.ExplainQuery{Subject: org.caller, Group: org.group, Objects: objs}
	for b.Loop() {
		ex, err := a.Compare(context.Background(), q)
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
	explain := "package dirgate.authz\nallow if input.action == \"explain\"\n"
	a, err := policy.Open(context.Background(), policy.Config{Dir: writeDir(f, map[string]string{"authz.rego": explain}, nil), Logger: quietLogger()})
	if err != nil {
		f.Fatal(err)
	}
	q := policy.ExplainQuery{Caller: dirgate.Principal{Groups: []dirgate.GroupRef{}}, Objects: []dirgate.Object{reloadUser, reloadComputer}}
	f.Fuzz(func(t *testing.T, draft string) {
		if draft == "" {
			return // no draft: the candidate, tested elsewhere
		}
		q.Draft = draft
		_, err := a.Explain(context.Background(), q)
		var de *policy.DraftError
		if err != nil && !errors.As(err, &de) {
			t.Fatalf("draft %q: %v", draft, err)
		}
	})
}

// allowAllPolicy is a policy directory's files allowing everything.
func allowAllPolicy() map[string]string {
	return map[string]string{"authz.rego": "package dirgate.authz\nallow if true\n"}
}

// slowPolicy denies everything after n² iterations that do not depend on the object,
// which partial evaluation does while building a listing's plan.
func slowPolicy(n int) map[string]string {
	return map[string]string{"authz.rego": fmt.Sprintf(`package dirgate.authz
allow if {
	some x in numbers.range(1, %d)
	some y in numbers.range(1, %d)
	x * y < 0
}
`, n, n)}
}

// TestCandidateNeverChangesAnswer: a candidate that panics, fails to evaluate or
// is slow leaves the active policy's answers as they are; a slow one is stopped by
// its own budget, not by the request's deadline.
func TestCandidateNeverChangesAnswer(t *testing.T) {
	allowAll := allowAllPolicy()
	slow := slowPolicy(3000)
	conflict := map[string]string{"authz.rego": "package dirgate.authz\nallow := true if true\nallow := false if input.action != \"x\"\n"}
	objs := randObjects(rand.New(rand.NewPCG(1, 1)), 20)
	for _, tc := range []struct {
		name  string
		cand  map[string]string
		panic bool
	}{{"panic", allowAll, true}, {"conflict", conflict, false}, {"slow", slow, false}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.panic {
				defer policy.SetCandidateTestHook(func(string) { panic("candidate test panic") })()
			}
			var log bytes.Buffer
			a, err := policy.Open(context.Background(), policy.Config{Dir: writeDir(t, allowAll, nil), Logger: quietLogger(),
				DecisionLog: lineLog(&log), Candidate: policy.CandidateConfig{Dir: writeDir(t, tc.cand, nil), Budget: 100 * time.Millisecond}})
			if err != nil {
				t.Fatal(err)
			}
			if a.CandidateStatus().Revision == "" {
				t.Fatal("the candidate did not load")
			}
			// The request's deadline is longer than the budget but shorter than the
			// slow candidate: only the budget can keep the answer.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			start := time.Now()
			for _, act := range []func() error{
				func() error { return a.AllowRemove(ctx, dirgate.Principal{}, dirgate.Object{}, objs[0]) },
				func() error { return a.AllowAdd(ctx, dirgate.Principal{}, dirgate.Object{}, objs[0]) },
			} {
				if err := act(); err != nil {
					t.Errorf("change answered %v, want allowed", err)
				}
			}
			// The listing's plan is built under the budget too (partial evaluation
			// is what the slow candidate spends its time in).
			shown, err := a.FilterView(ctx, dirgate.Principal{}, dirgate.Object{}, dirgate.ListOptions{}, objs)
			if err != nil || len(shown) != len(objs) {
				t.Errorf("listing: %d of %d shown, %v", len(shown), len(objs), err)
			}
			if ctx.Err() != nil || tc.name == "slow" && time.Since(start) > 1500*time.Millisecond {
				t.Errorf("the candidate used up the request's deadline (%s)", time.Since(start))
			}
			for _, l := range candidateLines(t, &log) {
				if tc.name != "conflict" && l.Candidate != nil {
					t.Errorf("%s line compared a failed candidate: %+v", l.Input.Action, l.Candidate)
				}
			}
		})
	}
}

// TestCandidateSampleRefusesNaN: NaN would compare every request; it and -Inf are
// refused like a sample above 1.
func TestCandidateSampleRefusesNaN(t *testing.T) {
	for _, s := range []float64{math.NaN(), math.Inf(-1), math.Inf(1), 1.5} {
		cfg := policy.Config{Candidate: policy.CandidateConfig{Sample: s}}
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "sample") {
			t.Errorf("sample %v: %v", s, err)
		}
	}
}
