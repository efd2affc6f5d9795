package history

import (
	"math"
	"slices"
	"sort"
	"strings"
	"time"
)

// Times inside the checker are nanoseconds since the Unix epoch; an operation that
// never ended (a fault never healed, a request the suite stopped waiting for) ends
// at inf.
const inf = int64(math.MaxInt64)

func startOf(o *Op) int64 { return o.Start.UnixNano() }

func endOf(o *Op) int64 {
	if !o.Done() {
		return inf
	}
	return o.End.UnixNano()
}

// plus adds a non-negative duration, saturating at inf.
func plus(t int64, d time.Duration) int64 {
	if t == inf || int64(d) >= inf-t {
		return inf
	}
	return t + int64(d)
}

// span is a closed interval of time.
type span struct{ a, b int64 }

// spans is a union of intervals: sorted, disjoint, touching ones merged.
type spans []span

func union(in []span) spans {
	if len(in) == 0 {
		return nil
	}
	s := slices.Clone(in)
	sort.Slice(s, func(i, j int) bool { return s[i].a < s[j].a })
	out := spans{s[0]}
	for _, x := range s[1:] {
		last := &out[len(out)-1]
		if x.a <= last.b {
			last.b = max(last.b, x.b)
			continue
		}
		out = append(out, x)
	}
	return out
}

// from returns the index of the first interval that has not ended before t.
func (s spans) from(t int64) int {
	return sort.Search(len(s), func(i int) bool { return s[i].b >= t })
}

// overlaps reports whether some interval meets [a, b].
func (s spans) overlaps(a, b int64) bool {
	i := s.from(a)
	return i < len(s) && s[i].a <= b
}

// firstFrom is the start of the first interval that meets [t, ∞), inf if none.
func (s spans) firstFrom(t int64) int64 {
	i := s.from(t)
	if i < len(s) {
		return s[i].a
	}
	return inf
}

// calm is the first time that d of calm has passed after t: while an interval
// meets [T, T+d], T moves to its end (an interval that never ends: inf).
func (s spans) calm(t int64, d time.Duration) int64 { return s.calmSince(t, t, d) }

// calmSince is calm, with the intervals that met [from, t] counted as well.
func (s spans) calmSince(from, t int64, d time.Duration) int64 {
	for i := s.from(from); i < len(s); i++ {
		if s[i].a > plus(t, d) {
			break
		}
		t = max(t, s[i].b)
		if t == inf {
			return inf
		}
	}
	return plus(t, d)
}

// faults indexes the nemesis's operations by what they hit.
type faults struct {
	ops     []*Op
	dc      spans            // any fault on dc1 or dc2: replication may lag
	dcDown  map[string]spans // "dc1", "dc2": killed or cut off
	redis   map[string]spans // "redis-primary", "redis-replica": any fault
	replica map[string]spans // "replica:A": any fault
	target  map[string]spans // every target, any fault (the plot's rows)
}

// dcDownFaults are the faults that take a DC away from dirgate; a delayed DC, or
// one whose inbound replication is paused, still answers.
var dcDownFaults = map[string]bool{"kill-dc": true, "blackhole-dc": true}

func indexFaults(ops []Op) *faults {
	f := &faults{dcDown: map[string]spans{}, redis: map[string]spans{}, replica: map[string]spans{}, target: map[string]spans{}}
	var dc []span
	down := map[string][]span{}
	all := map[string][]span{}
	for i := range ops {
		o := &ops[i]
		if o.Kind != Fault {
			continue
		}
		f.ops = append(f.ops, o)
		sp := span{startOf(o), endOf(o)}
		hitsDC := false
		for _, t := range o.Targets {
			all[t] = append(all[t], sp)
			if t == "dc1" || t == "dc2" {
				hitsDC = true
				if dcDownFaults[o.Fault] {
					down[t] = append(down[t], sp)
				}
			}
		}
		if hitsDC {
			dc = append(dc, sp)
		}
	}
	f.dc = union(dc)
	for t, s := range down {
		f.dcDown[t] = union(s)
	}
	for t, s := range all {
		u := union(s)
		f.target[t] = u
		switch {
		case t == "redis-primary" || t == "redis-replica":
			f.redis[t] = u
		case strings.HasPrefix(t, "replica:"):
			f.replica[strings.TrimPrefix(t, "replica:")] = u
		}
	}
	return f
}
