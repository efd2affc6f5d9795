package chaos

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dirgate/dirgate/test/suite/chaos/history"
)

// step is one operation of the workload, fixed before the run: which process makes
// it, when, and on what. Indexes refer to the fixture (users, groups) and to the
// replicas and callers; what the operation learns is recorded when it runs.
type step struct {
	At      time.Duration
	Process string
	Kind    string // a history kind
	Replica string // "A" or "B"
	DC      int    // direct changes: 1 or 2
	Group   int
	Member  int // a pool user; -1 when MemberGroup is the member
	// MemberGroup is the group nested or unnested by a direct change, or -1.
	MemberGroup int
	Nested      bool
	Caller      int // the tokens-file caller (0 or 1)
	User        int // sign-in: the pool user signing in
	Token       int // sign-in, revoke, use: the signed-in token's number
}

// faultPlan is one fault of the nemesis, fixed before the run.
type faultPlan struct {
	At, For time.Duration
	Fault   string // a history Fault name
	// Target is what it hits; "" for kill-feed-leader, whose target is the replica
	// leading the change feed when it is injected.
	Target string
}

// schedule is everything a run does, from its seed.
type schedule struct {
	Steps  [][]step // one sequence per process
	Faults []faultPlan
}

// Modes of the nemesis.
const (
	// quorumMode never takes both DCs down, nor both Redis servers, nor both replicas.
	quorumMode = "quorum"
	// outageMode lets faults overlap whatever they hit.
	outageMode = "outage"
)

// Workload processes and how often each acts (a uniform gap between its steps).
var processes = []struct {
	name     string
	min, max time.Duration
}{
	{"list-1", 100 * time.Millisecond, 500 * time.Millisecond},
	{"list-2", 100 * time.Millisecond, 500 * time.Millisecond},
	{"list-3", 100 * time.Millisecond, 500 * time.Millisecond},
	{"list-4", 100 * time.Millisecond, 500 * time.Millisecond},
	{"write-1", 300 * time.Millisecond, 1500 * time.Millisecond},
	{"write-2", 300 * time.Millisecond, 1500 * time.Millisecond},
	{"direct-1", 500 * time.Millisecond, 2 * time.Second},
	{"direct-2", 500 * time.Millisecond, 2 * time.Second},
	{"signin-1", 200 * time.Millisecond, 1 * time.Second},
}

// faultMenu is what the nemesis chooses from, each entry equally likely.
var faultMenu = []string{"kill-dc", "blackhole-dc", "pause-inbound", "delay-dc",
	"kill-redis-primary", "stop-redis-replica", "kill-replica", "kill-feed-leader"}

// Fault lengths and gaps between the starts of faults.
const (
	faultMin, faultMax = 3 * time.Second, 10 * time.Second
	gapMin, gapMax     = 1 * time.Second, 6 * time.Second
	// redisRearm separates the heal of a killed Redis primary from the next kill:
	// a Sentinel does not fail the same primary over again within twice its
	// failover-timeout (redistest.FastFailover: 3 s).
	redisRearm = 10 * time.Second
)

// parseMenu reads DIRGATE_CHAOS_FAULTS: a comma-separated subset of faultMenu, each
// once, that the nemesis chooses from instead (to dwell on one combination).
func parseMenu(v string) ([]string, error) {
	var menu []string
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(faultMenu, f) {
			return nil, fmt.Errorf("%q is not a fault; want some of %s", f, strings.Join(faultMenu, ","))
		}
		if slices.Contains(menu, f) {
			return nil, fmt.Errorf("%q named twice", f)
		}
		menu = append(menu, f)
	}
	return menu, nil
}

// newSchedule draws a run of length dur from seed; the same seed and length give the
// same schedule.
func newSchedule(seed uint64, dur time.Duration, mode string, menu []string) schedule {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var s schedule
	for _, p := range processes {
		s.Steps = append(s.Steps, processSteps(rng, p.name, p.min, p.max, dur))
	}
	s.Faults = faults(rng, dur, mode, menu)
	s.Steps = append(s.Steps, probeSteps(seed, dur)...)
	return s
}

// The probe's pace: a change every probeGap to 1.25 probeGap, each to the next of
// the probe users in turn, so that each user's changes are at least probeUsers
// probeGap apart (15 s: more than the suite's S); a listing of the probe group every
// 100 to 300 ms, which is the resolution of the staleness measured.
const probeGap = 2500 * time.Millisecond

// probeSteps draws the staleness probe's two processes from a stream of their
// own, so that the other processes and the faults a seed gives do not depend on
// them. The changer alternates each user's membership as if every change applied.
func probeSteps(seed uint64, dur time.Duration) [][]step {
	rng := rand.New(rand.NewPCG(seed^0x70726f6265, seed))
	present := map[int]bool{}
	for _, m := range probeInitial {
		present[m] = true
	}
	var change, list []step
	for i, at := 0, between(rng, 0, probeGap); at < dur; i, at = i+1, at+between(rng, probeGap, probeGap*5/4) {
		m := i % probeUsers
		st := step{At: at, Process: "probe-change", Kind: history.DirectAdd, DC: 1 + rng.IntN(2),
			Group: groupCount, Member: poolSize + m, MemberGroup: -1}
		if present[m] {
			st.Kind = history.DirectRemove
		}
		present[m] = !present[m]
		change = append(change, st)
	}
	for at := between(rng, 0, 300*time.Millisecond); at < dur; at += between(rng, 100*time.Millisecond, 300*time.Millisecond) {
		list = append(list, step{At: at, Process: "probe-list", Kind: history.List, Replica: pick(rng, replicaNames),
			Group: groupCount, MemberGroup: -1, Caller: rng.IntN(2)})
	}
	return [][]step{change, list}
}

func pick[T any](rng *rand.Rand, xs []T) T { return xs[rng.IntN(len(xs))] }

func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
}

// processSteps draws one process's steps. The sign-in process and direct-1 (which
// alone disables and enables accounts) keep the state their choices depend on: the
// tokens signed in so far and the accounts disabled, as if every step succeeded.
func processSteps(rng *rand.Rand, name string, lo, hi, dur time.Duration) []step {
	var out []step
	tokens, revoked := 0, map[int]bool{}
	disabled := map[int]bool{}
	for at := between(rng, 0, hi); at < dur; at += between(rng, lo, hi) {
		st := step{At: at, Process: name, Replica: pick(rng, replicaNames), Group: rng.IntN(groupCount),
			Member: rng.IntN(poolSize), MemberGroup: -1, Caller: rng.IntN(2)}
		switch name[:len(name)-2] {
		case "list":
			st.Kind, st.Nested = history.List, rng.IntN(5) < 2
		case "write":
			st.Kind = pick(rng, []string{history.Remove, history.Add})
		case "direct":
			st.DC = 1 + rng.IntN(2)
			st.Kind = pick(rng, []string{history.DirectRemove, history.DirectAdd})
			switch r := rng.IntN(20); {
			case r < 3:
				p := pick(rng, nestPairs)
				st.Group, st.Member, st.MemberGroup = p[0], -1, p[1]
			case r < 8 && name == "direct-1":
				st.Group = -1
				if len(disabled) < 2 && (len(disabled) == 0 || rng.IntN(2) == 0) {
					st.Kind = history.Disable
					for disabled[st.Member] {
						st.Member = rng.IntN(poolSize)
					}
					disabled[st.Member] = true
				} else {
					st.Kind = history.Enable
					st.Member = pick(rng, sortedKeys(disabled))
					delete(disabled, st.Member)
				}
			}
		case "signin":
			st.User = rng.IntN(poolSize)
			live := liveTokens(tokens, revoked)
			switch r := rng.IntN(20); {
			case tokens == 0 || r < 5:
				tokens++
				st.Kind, st.Token = history.SignIn, tokens
			case r < 7 && len(live) > 0:
				st.Kind, st.Token = history.Revoke, pick(rng, live)
				revoked[st.Token] = true
			case r < 14:
				st.Kind, st.Token = history.UseTok, tokens
			default:
				st.Kind, st.Token = history.UseTok, 1+rng.IntN(tokens)
			}
		}
		out = append(out, st)
	}
	return out
}

func liveTokens(n int, revoked map[int]bool) []int {
	var out []int
	for i := 1; i <= n; i++ {
		if !revoked[i] {
			out = append(out, i)
		}
	}
	return out
}

func sortedKeys(m map[int]bool) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// faults draws the nemesis's faults: a new one every gapMin to gapMax, each lasting
// faultMin to faultMax and healed a second before the run ends, skipped when what it
// would hit is already hit or when the mode forbids it alongside the faults active.
func faults(rng *rand.Rand, dur time.Duration, mode string, menu []string) []faultPlan {
	var out []faultPlan
	var lastRedisKill time.Duration = -redisRearm
	for at := 2 * time.Second; at+faultMin < dur-time.Second; at += between(rng, gapMin, gapMax) {
		f := faultPlan{At: at, For: min(between(rng, faultMin, faultMax), dur-time.Second-at), Fault: pick(rng, menu)}
		switch f.Fault {
		case "kill-dc", "blackhole-dc", "pause-inbound", "delay-dc":
			f.Target = pick(rng, []string{"dc1", "dc2"})
		case "kill-redis-primary":
			f.Target = "redis-primary"
		case "stop-redis-replica":
			f.Target = "redis-replica"
		case "kill-replica":
			f.Target = "replica:" + pick(rng, replicaNames)
		}
		var active []faultPlan
		for _, a := range out {
			if a.At+a.For > at {
				active = append(active, a)
			}
		}
		if f.Fault == "kill-redis-primary" && at < lastRedisKill+redisRearm {
			continue
		}
		if !allowed(f, active, mode) {
			continue
		}
		if f.Fault == "kill-redis-primary" {
			lastRedisKill = at + f.For
		}
		out = append(out, f)
	}
	return out
}

// allowed reports whether f may start while active run. Two faults never hit one
// thing at once, in either mode: each heal undoes exactly its own fault.
func allowed(f faultPlan, active []faultPlan, mode string) bool {
	down := func(g faultPlan) bool { return g.Fault == "kill-dc" || g.Fault == "blackhole-dc" }
	replicaFault := func(g faultPlan) bool { return g.Fault == "kill-replica" || g.Fault == "kill-feed-leader" }
	for _, a := range active {
		switch {
		case a.Target == f.Target && f.Target != "":
			return false
		case replicaFault(f) && a.Fault == "kill-feed-leader", f.Fault == "kill-feed-leader" && replicaFault(a):
			return false
		case mode != quorumMode:
		case down(f) && down(a):
			return false
		case f.Target == "redis-primary" && a.Target == "redis-replica", f.Target == "redis-replica" && a.Target == "redis-primary":
			return false
		case replicaFault(f) && replicaFault(a):
			return false
		}
	}
	return true
}

// TestScheduleReplays: a seed gives the same schedule every time, another seed
// another one, and the quorum mode never lets both DCs, both Redis servers or both
// replicas be hit at once.
func TestScheduleReplays(t *testing.T) {
	a, b := newSchedule(42, 5*time.Minute, quorumMode, faultMenu), newSchedule(42, 5*time.Minute, quorumMode, faultMenu)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("seed 42 gave two different schedules")
	}
	if reflect.DeepEqual(a, newSchedule(43, 5*time.Minute, quorumMode, faultMenu)) {
		t.Fatal("seeds 42 and 43 gave the same schedule")
	}
	for seed := range uint64(50) {
		s := newSchedule(seed, 5*time.Minute, quorumMode, faultMenu)
		for i, f := range s.Faults {
			for _, g := range s.Faults[:i] {
				if g.At+g.For > f.At && !allowed(f, []faultPlan{g}, quorumMode) {
					t.Errorf("seed %d: %+v overlaps %+v", seed, f, g)
				}
			}
		}
	}
	if len(a.Faults) < 20 {
		t.Errorf("5 minutes drew only %d faults", len(a.Faults))
	}
}

// TestScheduleShortRun logs what the short run's fixed seed does, and checks that it
// holds faults and operations of every kind the processes make.
func TestScheduleShortRun(t *testing.T) {
	s := newSchedule(fixedSeed, 30*time.Second, quorumMode, faultMenu)
	kinds := map[string]int{}
	for _, steps := range s.Steps {
		for _, st := range steps {
			kinds[st.Kind]++
		}
	}
	for _, f := range s.Faults {
		t.Logf("%v for %v: %s %s", f.At, f.For, f.Fault, f.Target)
	}
	t.Logf("steps by kind: %v", kinds)
	for _, k := range []string{history.List, history.Remove, history.Add, history.DirectAdd, history.DirectRemove,
		history.SignIn, history.UseTok} {
		if kinds[k] == 0 {
			t.Errorf("no %s step in 30 s", k)
		}
	}
	if len(s.Faults) < 3 {
		t.Errorf("only %d faults in 30 s", len(s.Faults))
	}
}

// TestScheduleMenu: DIRGATE_CHAOS_FAULTS narrows the nemesis to the faults it names,
// and refuses a name that is not a fault or is named twice.
func TestScheduleMenu(t *testing.T) {
	menu, err := parseMenu("kill-dc, delay-dc")
	if err != nil {
		t.Fatal(err)
	}
	s := newSchedule(fixedSeed, 5*time.Minute, quorumMode, menu)
	seen := map[string]int{}
	for _, f := range s.Faults {
		seen[f.Fault]++
	}
	if len(seen) != 2 || seen["kill-dc"] == 0 || seen["delay-dc"] == 0 {
		t.Errorf("faults drawn from kill-dc and delay-dc: %v", seen)
	}
	for _, bad := range []string{"kill-dc,kill-dc", "kill-everything", ""} {
		if _, err := parseMenu(bad); err == nil {
			t.Errorf("parseMenu(%q) accepted", bad)
		}
	}
}
