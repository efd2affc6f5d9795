package history

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"
)

// simulate makes the history of a directory that applies every operation at one
// instant within it (a linearizable one, stronger than any promise): the checker
// must find nothing in it, however many operations overlap, whatever the faults.
//
// lagB makes replica B read the directory as it was that long before: a broken
// cache.
func simulate(seed uint64, n int, lagB time.Duration) ([]Op, Config) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	groups := make([]string, 6)
	for i := range groups {
		groups[i] = fmt.Sprintf("cn=g%d,ou=groups,dc=corp", i)
	}
	users := make([]string, 40)
	for i := range users {
		users[i] = fmt.Sprintf("cn=u%d,ou=staff,dc=corp", i)
	}
	state := map[key]bool{}
	initial := map[string][]string{}
	for _, g := range groups {
		for _, u := range users {
			if rng.IntN(3) == 0 {
				state[key{g, u}] = true
				initial[g] = append(initial[g], u)
			}
		}
	}
	// g0 holds g1, which holds g2 (and g2 holds g0: a cycle).
	for _, e := range [][2]string{{groups[0], groups[1]}, {groups[1], groups[2]}, {groups[2], groups[0]}} {
		state[key{e[0], e[1]}] = true
		initial[e[0]] = append(initial[e[0]], e[1])
	}
	member := func() string {
		if rng.IntN(10) == 0 {
			return groups[rng.IntN(3)]
		}
		return users[rng.IntN(len(users))]
	}

	type event struct {
		at int64 // ms: when it takes effect
		op *Op
		// a write whose outcome is unknown: applied or not
		apply bool
	}
	ops := make([]Op, 0, n)
	var events []event
	for i := range n {
		start := int64(i) * 20 // 50 operations a second
		dur := 5 + rng.Int64N(200)
		o := Op{ID: int64(i + 1), Process: fmt.Sprintf("p%d", i%8), Replica: []string{"A", "B"}[rng.IntN(2)],
			Start: t0.Add(time.Duration(start) * time.Millisecond), End: t0.Add(time.Duration(start+dur) * time.Millisecond)}
		g := groups[rng.IntN(len(groups))]
		ev := event{at: start + rng.Int64N(dur+1), apply: true}
		switch r := rng.IntN(1000); {
		case r < 1: // one fault every 20 s
			o.Kind, o.Fault, o.Replica = Fault, []string{"kill-dc", "delay-dc", "pause-inbound"}[rng.IntN(3)], ""
			o.Targets = []string{[]string{"dc1", "dc2"}[rng.IntN(2)]}
			o.End = o.Start.Add(time.Duration(500+rng.IntN(5000)) * time.Millisecond)
		case r < 600:
			o.Kind, o.Group, o.Nested = List, g, rng.IntN(5) == 0
		case r < 800:
			o.Kind, o.Group, o.Member = []string{Add, Remove}[rng.IntN(2)], g, member()
			switch rng.IntN(200) {
			case 0: // no answer: it may apply at any time later, or never
				o.Status, o.Err = 504, ""
				o.ErrorBody = `{"message":"The directory did not answer in time.","code":"upstreamTimeout"}`
				ev.at, ev.apply = start+rng.Int64N(20000), rng.IntN(2) == 0
			case 1:
				o.End = time.Time{}
				ev.at, ev.apply = start+rng.Int64N(20000), rng.IntN(2) == 0
			}
		default:
			o.Kind, o.Group, o.Member, o.DC = []string{DirectAdd, DirectRemove}[rng.IntN(2)], g, member(), 1+rng.IntN(2)
		}
		if o.Member == g {
			o.Member = users[0]
		}
		ops = append(ops, o)
		if o.Kind == List && o.Replica == "B" {
			ev.at -= lagB.Milliseconds()
		}
		if o.Kind != Fault {
			events = append(events, event{at: ev.at, op: &ops[len(ops)-1], apply: ev.apply})
		}
	}
	sort.SliceStable(events, func(i, j int) bool { return events[i].at < events[j].at })
	for _, ev := range events {
		o := ev.op
		switch o.Kind {
		case List:
			o.Status = 200
			if !o.Nested {
				for k, v := range state {
					if v && k.g == o.Group {
						o.Members = append(o.Members, k.m)
					}
				}
				break
			}
			seen := map[string]bool{o.Group: true}
			queue := []string{o.Group}
			for len(queue) > 0 {
				p := queue[0]
				queue = queue[1:]
				for k, v := range state {
					if v && k.g == p && !seen[k.m] {
						seen[k.m] = true
						o.Members = append(o.Members, k.m)
						queue = append(queue, k.m)
					}
				}
			}
		default:
			k := key{o.Group, o.Member}
			want := o.Kind == Add || o.Kind == DirectAdd
			changed := state[k] != want
			if ev.apply {
				state[k] = want
			}
			if o.Status != 0 || !o.Done() {
				continue
			}
			switch o.Kind {
			case Add, Remove:
				o.Status, o.NoChanges = 200, &[]bool{!changed}[0]
			default:
				if !changed {
					o.Status, o.Err = 16, "noSuchAttribute"
					if want {
						o.Status, o.Err = 20, "attributeOrValueExists"
					}
				}
			}
		}
	}
	cfg := testCfg
	cfg.Initial = initial
	return ops, cfg
}

func TestLinearizableHistoriesPass(t *testing.T) {
	n := 50000
	if testing.Short() || raceEnabled {
		n = 10000
	}
	for seed := range uint64(3) {
		ops, cfg := simulate(seed, n, 0)
		began := time.Now()
		r := Check(ops, cfg)
		took := time.Since(began)
		t.Logf("seed %d: %d ops checked in %v; checks %v; staleness %v", seed, len(ops), took, r.Checks, r.Staleness)
		for i, a := range r.Anomalies {
			if i == 5 {
				break
			}
			t.Errorf("seed %d: %+v", seed, a)
		}
		if len(r.Anomalies) > 0 {
			t.Fatalf("seed %d: %d anomalies in a linearizable history", seed, len(r.Anomalies))
		}
		if r.Staleness.N == 0 || r.Staleness.Max != 0 {
			t.Errorf("seed %d: staleness %v, want only zeros", seed, r.Staleness)
		}
		if r.Checks[CheckMembershipDecisive] == 0 || r.Checks[CheckNestedMembershipDecisive] == 0 || r.Checks[CheckAvailability] == 0 {
			t.Errorf("seed %d: rules not applied: %v", seed, r.Checks)
		}
	}
}

// BenchmarkCheck: go test -run '^$' -bench Check ./test/suite/chaos/history/
func BenchmarkCheck(b *testing.B) {
	ops, cfg := simulate(1, 50000, 0)
	b.ResetTimer()
	for b.Loop() {
		Check(ops, cfg)
	}
}

// A replica serving listings 5 s old (more than S) breaks read-your-writes and
// the staleness bound, and the checker says so.
func TestLaggingReplicaFound(t *testing.T) {
	ops, cfg := simulate(7, 10000, 5*time.Second)
	r := Check(ops, cfg)
	kinds := map[string]int{}
	for _, a := range r.Anomalies {
		kinds[a.Kind]++
		if o := ops[a.Op-1]; o.Kind != List || o.Replica != "B" {
			t.Errorf("anomaly on %+v", o)
		}
	}
	t.Logf("anomalies %v; staleness %v", kinds, r.Staleness)
	for _, k := range []string{LostWrite, StaleRead, Resurrection} {
		if kinds[k] == 0 {
			t.Errorf("no %s found", k)
		}
	}
	if r.Staleness.Max < 2*time.Second {
		t.Errorf("staleness %v, want some past S", r.Staleness)
	}
}
