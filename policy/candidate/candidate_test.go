package candidate_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/policy"
	"github.com/dirgate/dirgate/policy/candidate"
	"github.com/dirgate/dirgate/policy/internal/policytest"
)

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
	return policytest.DecodeLines[candidateLine](t, log)
}

// TestCandidateMatchesIndependentComparison: with random active and candidate roles,
// listings are answered by the active policy alone, and each decision line's
// candidate member names exactly the objects on which per-object evaluation of the
// two policies differs.
func TestCandidateMatchesIndependentComparison(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 13))
	modules := policytest.BundledModules(t)
	for round := range 6 {
		groups := policytest.RandGroups(r, 10)
		activeData := map[string]any{"dirgate": map[string]any{"roles": policytest.RandRoles(r, groups, 1+r.IntN(6))}}
		candData := map[string]any{"dirgate": map[string]any{"roles": policytest.RandRoles(r, groups, 1+r.IntN(6))}}
		var log bytes.Buffer
		cfg, shadow := policytest.Shadowed(t, policy.Config{
			Dir: policytest.WriteDir(t, modules, activeData), Logger: policytest.QuietLogger(), DecisionLog: policytest.LineLog(&log, 1000),
		}, candidate.Config{Dir: policytest.WriteDir(t, modules, candData)})
		a, err := policy.Open(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if st := shadow.Status(); st.Revision == "" || st.LastError != "" {
			t.Fatalf("candidate status %+v", st)
		}
		active, cand := policytest.NewReference(t, modules, activeData), policytest.NewReference(t, modules, candData)
		objs := policytest.RandObjects(r, 30)
		for range 3 {
			p := policytest.RandSubject(r, groups)
			g := groups[r.IntN(len(groups))]
			group := dirgate.Object{GUID: g.GUID, DN: g.DN, ObjectType: dirgate.TypeGroup, DisplayName: "g"}
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
					x, y := active.Allow(t, in), cand.Allow(t, in)
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
				if c.Revision != shadow.Status().Revision {
					t.Errorf("candidate revision %q", c.Revision)
				}
			}
			// A removal: its line compares too.
			member := objs[r.IntN(len(objs))]
			err = a.AllowRemove(context.Background(), p, group, member)
			in := policy.Input{Action: policy.ActionRemove, Subject: p, Object: &member, Group: group, Request: policy.Request{Properties: []string{}}}
			x, y := active.Allow(t, in), cand.Allow(t, in)
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

// TestCandidateBoundedAndSampled: the GUIDs named are bounded like deniedGuids; no
// sample compares every request, 1 too, and 0 (or less) none.
func TestCandidateBoundedAndSampled(t *testing.T) {
	allowAll := allowAllPolicy()
	none := map[string]string{"authz.rego": "package dirgate.authz\nallow if false\n"}
	objs := policytest.RandObjects(rand.New(rand.NewPCG(1, 1)), 20)
	for _, tc := range []struct {
		sample *float64
		want   int // lines with a candidate
	}{{nil, 1}, {new(1.0), 1}, {new(0.0), 0}, {new(-1.0), 0}} {
		var log bytes.Buffer
		cfg, _ := policytest.Shadowed(t, policy.Config{Dir: policytest.WriteDir(t, none, nil), Logger: policytest.QuietLogger(),
			DecisionLog: policytest.LineLog(&log, 3)}, candidate.Config{Dir: policytest.WriteDir(t, allowAll, nil), Sample: tc.sample})
		a, err := policy.Open(context.Background(), cfg)
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
// is reported by Ready, and never changes an answer; fixing it reloads it.
func TestBrokenCandidate(t *testing.T) {
	candDir := policytest.WriteDir(t, map[string]string{"authz.rego": policytest.BrokenPolicy}, nil)
	cfg, shadow := policytest.Shadowed(t, policy.Config{Dir: policytest.WriteDir(t, map[string]string{"authz.rego": policytest.AllowUsers}, nil),
		Logger: policytest.QuietLogger()}, candidate.Config{Dir: candDir})
	a, err := policy.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("a broken candidate stopped the policy: %v", err)
	}
	if err := shadow.Ready(); err == nil || !strings.Contains(err.Error(), "no candidate") {
		t.Errorf("Ready = %v", err)
	}
	if err := a.Ready(); err != nil {
		t.Errorf("the active policy's readiness reports %v", err)
	}
	if got := policytest.Visible(t, a); got != "u" {
		t.Errorf("listing with a broken candidate shows %q", got)
	}
	policytest.WriteFile(t, filepath.Join(candDir, "authz.rego"), policytest.AllowComputers)
	if err := shadow.Watch(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	policytest.WriteFile(t, filepath.Join(candDir, "authz.rego"), policytest.AllowComputers+"# edited\n")
	policytest.WaitFor(t, "the candidate to load", func() bool { return shadow.Ready() == nil && shadow.Status().Revision != "" })
	if got := policytest.Visible(t, a); got != "u" {
		t.Errorf("listing with a candidate shows %q", got)
	}
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
	objs := policytest.RandObjects(rand.New(rand.NewPCG(1, 1)), 20)
	for _, tc := range []struct {
		name  string
		cand  map[string]string
		panic bool
	}{{"panic", allowAll, true}, {"conflict", conflict, false}, {"slow", slow, false}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.panic {
				defer candidate.SetTestHook(func(string) { panic("candidate test panic") })()
			}
			var log bytes.Buffer
			cfg, shadow := policytest.Shadowed(t, policy.Config{Dir: policytest.WriteDir(t, allowAll, nil), Logger: policytest.QuietLogger(),
				DecisionLog: policytest.LineLog(&log)}, candidate.Config{Dir: policytest.WriteDir(t, tc.cand, nil), Budget: 100 * time.Millisecond})
			a, err := policy.Open(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if shadow.Status().Revision == "" {
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
		cfg := candidate.Config{Sample: &s}
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "sample") {
			t.Errorf("sample %v: %v", s, err)
		}
	}
}
