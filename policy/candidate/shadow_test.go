package candidate_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/policy"
	"github.com/dirgate/dirgate/policy/candidate"
	"github.com/dirgate/dirgate/policy/internal/policytest"
)

// newMetricReader installs a meter provider read by hand. The policy makes its
// instruments at Open, so an Authorizer opened afterwards counts into it.
func newMetricReader(t *testing.T) *sdkmetric.ManualReader {
	t.Helper()
	r := sdkmetric.NewManualReader()
	otel.SetMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(r)))
	return r
}

// metricValue reads the int64 counter or gauge name's point with exactly attrs (0
// when there is none).
func metricValue(t *testing.T, r *sdkmetric.ManualReader, name string, attrs ...attribute.KeyValue) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	want := attribute.NewSet(attrs...)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			var points []metricdata.DataPoint[int64]
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				points = d.DataPoints
			case metricdata.Gauge[int64]:
				points = d.DataPoints
			default:
				t.Fatalf("%s is a %T", name, m.Data)
			}
			for _, p := range points {
				if p.Attributes.Equals(&want) {
					return p.Value
				}
			}
		}
	}
	return 0
}

// TestCandidateSlowListingBounded: a candidate whose listing decisions are slow,
// in building its plan (partial evaluation that iterates millions of times) or in
// evaluating Rego (a non-deterministic policy, decided per request), delays a
// listing by about its budget at most: the answer is the active policy's, the
// listing is not compared, and the candidate's errors are counted. A timed-out plan
// is not cached as a plan; its failure is remembered for a while, so the listings
// after it are not compared at once rather than each waiting the budget, and
// listings that wait for the same plan are bounded too.
func TestCandidateSlowListingBounded(t *testing.T) {
	allowAll := allowAllPolicy()
	// 36 million iterations that do not depend on the object: partial evaluation
	// does them all while building the plan (seconds, minutes under -race).
	slowPlan := slowPolicy(6000)
	// time.now_ns makes the policy non-deterministic: no plan, one Rego evaluation
	// of the whole listing per request, which iterates as long.
	slowRego := map[string]string{"authz.rego": `package dirgate.authz
allow if {
	time.now_ns() > 0
	some x in numbers.range(1, 6000)
	some y in numbers.range(1, 6000)
	x * y < count(input.object.guid) - 1000
}
`}
	const budget = 200 * time.Millisecond
	// The bound allows for a loaded machine and the race detector; the slow
	// candidates take many times longer.
	const bound = budget + 1500*time.Millisecond
	objs := policytest.RandObjects(rand.New(rand.NewPCG(1, 1)), 20)
	for _, tc := range []struct {
		name string
		cand map[string]string
	}{{"plan", slowPlan}, {"rego", slowRego}} {
		t.Run(tc.name, func(t *testing.T) {
			reader := newMetricReader(t)
			var log bytes.Buffer
			cfg, shadow := policytest.Shadowed(t, policy.Config{Dir: policytest.WriteDir(t, allowAll, nil), Logger: policytest.QuietLogger(), DecisionLog: policytest.LineLog(&log)},
				candidate.Config{Dir: policytest.WriteDir(t, tc.cand, nil), Budget: budget})
			a, err := policy.Open(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if shadow.Status().Revision == "" {
				t.Fatal("the candidate did not load")
			}
			list := func() {
				start := time.Now()
				shown, err := a.FilterView(context.Background(), dirgate.Principal{}, dirgate.Object{}, dirgate.ListOptions{}, objs)
				if took := time.Since(start); took > bound {
					t.Errorf("a listing took %s with a slow candidate of budget %s", took, budget)
				}
				if err != nil || len(shown) != len(objs) {
					t.Errorf("listing: %d of %d shown, %v", len(shown), len(objs), err)
				}
			}
			// Twice in turn (the second would find a cached failure), then two at
			// once (the second may wait for the first's plan).
			list()
			list()
			var wg sync.WaitGroup
			for range 2 {
				wg.Go(list)
			}
			wg.Wait()
			lines := candidateLines(t, &log)
			if len(lines) != 4 {
				t.Fatalf("%d decision lines, want 4", len(lines))
			}
			for _, l := range lines {
				if l.Candidate != nil {
					t.Errorf("a listing compared a candidate that ran out of its budget: %+v", l.Candidate)
				}
			}
			if n := metricValue(t, reader, "dirgate_policy_candidate_errors", attribute.String("action", "view")); n != 4 {
				t.Errorf("dirgate_policy_candidate_errors{action=view} = %d, want 4", n)
			}
			for _, change := range []string{"newly_allowed", "newly_denied"} {
				if n := metricValue(t, reader, "dirgate_policy_candidate_differences",
					attribute.String("action", "view"), attribute.String("change", change)); n != 0 {
					t.Errorf("a candidate that ran out of its budget counted %d %s differences", n, change)
				}
			}
		})
	}
}

// TestCandidateChangeDifferences: removals and additions on which the candidate
// differs are counted by action and change, and each one's decision line names the
// object in its candidate member; the answers are the active policy's.
func TestCandidateChangeDifferences(t *testing.T) {
	// The caller views every object, so that each refusal is its 403 and counted.
	active := map[string]string{"authz.rego": `package dirgate.authz
allow if input.action == "view"
allow if {
	input.action == "remove"
	input.object.objectType == "user"
}
allow if {
	input.action == "add"
	input.object.objectType == "group"
}
`}
	cand := map[string]string{"authz.rego": `package dirgate.authz
allow if input.action == "view"
allow if {
	input.action == "remove"
	input.object.objectType == "computer"
}
allow if {
	input.action == "add"
	input.object.objectType in {"group", "user"}
}
`}
	reader := newMetricReader(t)
	var log bytes.Buffer
	cfg, shadow := policytest.Shadowed(t, policy.Config{Dir: policytest.WriteDir(t, active, nil), Logger: policytest.QuietLogger(), DecisionLog: policytest.LineLog(&log)},
		candidate.Config{Dir: policytest.WriteDir(t, cand, nil)})
	a, err := policy.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	rev := shadow.Status().Revision
	if rev == "" {
		t.Fatal("the candidate did not load")
	}
	obj := func(guid, typ string) dirgate.Object {
		return dirgate.Object{GUID: guid, DN: "CN=" + guid + ",DC=example,DC=com", ObjectType: typ}
	}
	user1, user2 := obj("00000000-0000-0000-0000-0000000000a1", dirgate.TypeUser), obj("00000000-0000-0000-0000-0000000000a2", dirgate.TypeUser)
	computer, group := obj("00000000-0000-0000-0000-0000000000c1", dirgate.TypeComputer), obj("00000000-0000-0000-0000-0000000000b1", dirgate.TypeGroup)
	target := dirgate.Object{GUID: "00000000-0000-0000-0000-0000000000f1", DN: "CN=Target,DC=example,DC=com", ObjectType: dirgate.TypeGroup}
	caller := dirgate.Principal{DN: "CN=Caller,DC=example,DC=com", GUID: "00000000-0000-0000-0000-0000000000e1"}
	for _, tc := range []struct {
		action                    string
		member                    dirgate.Object
		activeAllows              bool
		newlyAllowed, newlyDenied []string
	}{
		{policy.ActionRemove, user1, true, nil, []string{user1.GUID}},
		{policy.ActionRemove, user2, true, nil, []string{user2.GUID}},
		{policy.ActionRemove, computer, false, []string{computer.GUID}, nil},
		{policy.ActionRemove, group, false, nil, nil},
		{policy.ActionAdd, user1, false, []string{user1.GUID}, nil},
		{policy.ActionAdd, group, true, nil, nil},
		{policy.ActionAdd, computer, false, nil, nil},
	} {
		decide := a.AllowRemove
		if tc.action == policy.ActionAdd {
			decide = a.AllowAdd
		}
		err := decide(context.Background(), caller, target, tc.member)
		var de *dirgate.Error
		if tc.activeAllows && err != nil || !tc.activeAllows && (!errors.As(err, &de) || de.Code != dirgate.EFORBIDDEN) {
			t.Errorf("%s %s: answered %v, the active policy allows: %v", tc.action, tc.member.ObjectType, err, tc.activeAllows)
		}
		lines := changeLines(t, &log)
		if len(lines) != 1 {
			t.Fatalf("%s %s: %d decision lines, want 1", tc.action, tc.member.ObjectType, len(lines))
		}
		l := lines[0]
		if l.Input.Action != tc.action || l.Input.Object.GUID != tc.member.GUID || l.Result.Allowed != tc.activeAllows {
			t.Errorf("%s %s: line's input and result %+v %+v", tc.action, tc.member.ObjectType, l.Input, l.Result)
		}
		c := l.Candidate
		if c == nil {
			t.Fatalf("%s %s: the line has no candidate member", tc.action, tc.member.ObjectType)
		}
		if c.Revision != rev || !slices.Equal(nonNil(c.NewlyAllowed), nonNil(tc.newlyAllowed)) ||
			!slices.Equal(nonNil(c.NewlyDenied), nonNil(tc.newlyDenied)) ||
			c.NAllowed != len(tc.newlyAllowed) || c.NDenied != len(tc.newlyDenied) || c.Truncated {
			t.Errorf("%s %s: candidate member %+v, want newly allowed %v, newly denied %v", tc.action, tc.member.ObjectType, *c, tc.newlyAllowed, tc.newlyDenied)
		}
	}
	for _, want := range []struct {
		action, change string
		n              int64
	}{
		{"remove", "newly_allowed", 1},
		{"remove", "newly_denied", 2},
		{"add", "newly_allowed", 1},
		{"add", "newly_denied", 0},
		{"view", "newly_allowed", 0},
		{"view", "newly_denied", 0},
	} {
		if n := metricValue(t, reader, "dirgate_policy_candidate_differences",
			attribute.String("action", want.action), attribute.String("change", want.change)); n != want.n {
			t.Errorf("dirgate_policy_candidate_differences{action=%s,change=%s} = %d, want %d", want.action, want.change, n, want.n)
		}
	}
	for _, action := range []string{"remove", "add"} {
		if n := metricValue(t, reader, "dirgate_policy_candidate_errors", attribute.String("action", action)); n != 0 {
			t.Errorf("dirgate_policy_candidate_errors{action=%s} = %d", action, n)
		}
	}
}

// changeLine is a removal's or an addition's decision line.
type changeLine struct {
	Input struct {
		Action string `json:"action"`
		Object struct {
			GUID string `json:"guid"`
		} `json:"object"`
	} `json:"input"`
	Result struct {
		Allowed bool `json:"allowed"`
	} `json:"result"`
	Candidate *struct {
		Revision     string   `json:"revision"`
		NewlyAllowed []string `json:"newly_allowed"`
		NewlyDenied  []string `json:"newly_denied"`
		NAllowed     int      `json:"newlyAllowed"`
		NDenied      int      `json:"newlyDenied"`
		Truncated    bool     `json:"truncated"`
	} `json:"candidate"`
}

func changeLines(t *testing.T, log *bytes.Buffer) []changeLine {
	t.Helper()
	return policytest.DecodeLines[changeLine](t, log)
}

// TestBrokenCandidateMetrics: a candidate that does not load is reported by the
// gauge dirgate_policy_candidate_broken and counted as a failed reload, and the
// answers are the active policy's, with no candidate member; the gauge returns to 0
// when the candidate loads.
func TestBrokenCandidateMetrics(t *testing.T) {
	reader := newMetricReader(t)
	var log bytes.Buffer
	candDir := policytest.WriteDir(t, map[string]string{"authz.rego": policytest.BrokenPolicy}, nil)
	cfg, shadow := policytest.Shadowed(t, policy.Config{Dir: policytest.WriteDir(t, map[string]string{"authz.rego": policytest.AllowUsers}, nil), Logger: policytest.QuietLogger(), DecisionLog: policytest.LineLog(&log)},
		candidate.Config{Dir: candDir})
	a, err := policy.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("a broken candidate stopped the policy: %v", err)
	}
	if n := metricValue(t, reader, "dirgate_policy_candidate_broken"); n != 1 {
		t.Errorf("dirgate_policy_candidate_broken = %d, want 1", n)
	}
	if n := metricValue(t, reader, "dirgate_policy_candidate_reloads", attribute.String("outcome", "failed")); n != 1 {
		t.Errorf("dirgate_policy_candidate_reloads{outcome=failed} = %d, want 1", n)
	}
	if got := policytest.Visible(t, a); got != "u" {
		t.Errorf("listing with a broken candidate shows %q", got)
	}
	for _, l := range candidateLines(t, &log) {
		if l.Candidate != nil {
			t.Errorf("a broken candidate was compared: %+v", l.Candidate)
		}
	}
	policytest.WriteFile(t, filepath.Join(candDir, "authz.rego"), policytest.AllowComputers)
	if err := shadow.Watch(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	policytest.WriteFile(t, filepath.Join(candDir, "authz.rego"), policytest.AllowComputers+"# edited\n")
	policytest.WaitFor(t, "the candidate to load", func() bool { return shadow.Status().Revision != "" })
	if n := metricValue(t, reader, "dirgate_policy_candidate_broken"); n != 0 {
		t.Errorf("dirgate_policy_candidate_broken = %d after the candidate loaded, want 0", n)
	}
}
