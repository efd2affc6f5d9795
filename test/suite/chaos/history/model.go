package history

import (
	"sort"
	"strings"
)

// key is one direct membership: member m of group g.
type key struct{ g, m string }

// write is a change to one membership that applied (effective) or may have
// (possible: its outcome is unknown).
type write struct {
	op        *Op
	start     int64
	end       int64
	present   bool // an addition
	direct    bool // made on a DC, not through dirgate
	dc        int
	effective bool
	// obligAt is when listings must start reflecting it (listings starting at or
	// after it); inf for a possible write, which binds no listing.
	obligAt int64
	// supAt is when it stops being a candidate: the earliest obligAt of a write
	// that supersedes it; inf if none does (always, for a possible write, which
	// may apply at any time from its start on).
	supAt int64
}

// outcome of a write operation.
type outcome int

const (
	notApplied outcome = iota // refused, or a no-op: AD made no change
	applied
	unknown
)

func writeOutcome(o *Op) outcome {
	switch o.Kind {
	case DirectAdd, DirectRemove, Disable, Enable:
		switch {
		case !o.Done():
			return unknown
		case o.Status == 0 && o.Err == "":
			return applied
		case o.Status == 0:
			return unknown // no LDAP result: the connection failed
		default:
			return notApplied // 16, 20: nothing to change; others: refused
		}
	case Add, Remove:
		switch {
		case !o.Done():
			return unknown
		case o.Status >= 200 && o.Status < 300:
			if o.NoChanges == nil {
				return unknown // an answer without noChanges says nothing
			}
			if *o.NoChanges {
				return notApplied
			}
			return applied
		case o.Status >= 400 && o.Status < 500:
			return notApplied
		default:
			return unknown // no answer, 5xx
		}
	}
	return notApplied
}

// keyState is everything the checker knows of one membership's history.
type keyState struct {
	initial bool
	writes  []*write // effective and possible, by start
	// Per value (0 absent, 1 present): the starts of its writes, and the running
	// maximum of their supAt, so that "some write of this value started before t
	// and is not superseded at s" is one search.
	starts  [2][]int64
	prefSup [2][]int64
	// minOblig is the earliest obligAt of its writes.
	minOblig int64
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// model holds the memberships of a run.
type model struct {
	keys    map[key]*keyState
	byGroup map[string][]string // group -> members that have a key, sorted
	groups  map[string]bool     // objects known to be groups
	parents map[string][]string // member -> groups that have a key for it
}

// ancestors returns x and every group from which a chain of keys leads to x.
func (md *model) ancestors(x string) map[string]bool {
	anc := map[string]bool{x: true}
	queue := []string{x}
	for len(queue) > 0 {
		y := queue[0]
		queue = queue[1:]
		for _, p := range md.parents[y] {
			if !anc[p] {
				anc[p] = true
				queue = append(queue, p)
			}
		}
	}
	return anc
}

func lower(s string) string { return strings.ToLower(s) }

func buildModel(ops []Op, cfg Config, f *faults) *model {
	md := &model{keys: map[key]*keyState{}, byGroup: map[string][]string{}, groups: map[string]bool{}, parents: map[string][]string{}}
	get := func(k key) *keyState {
		ks := md.keys[k]
		if ks == nil {
			ks = &keyState{}
			md.keys[k] = ks
			md.byGroup[k.g] = append(md.byGroup[k.g], k.m)
			md.parents[k.m] = append(md.parents[k.m], k.g)
		}
		return ks
	}
	for g, ms := range cfg.Initial {
		g = lower(g)
		md.groups[g] = true
		for _, m := range ms {
			get(key{g, lower(m)}).initial = true
		}
	}
	for i := range ops {
		o := &ops[i]
		switch o.Kind {
		case Add, Remove, DirectAdd, DirectRemove:
		default:
			continue
		}
		k := key{lower(o.Group), lower(o.Member)}
		md.groups[k.g] = true
		ks := get(k)
		out := writeOutcome(o)
		if out == notApplied {
			continue
		}
		w := &write{
			op:        o,
			start:     startOf(o),
			end:       endOf(o),
			present:   o.Kind == Add || o.Kind == DirectAdd,
			direct:    o.Kind == DirectAdd || o.Kind == DirectRemove,
			dc:        o.DC,
			effective: out == applied,
			obligAt:   inf,
			supAt:     inf,
		}
		if w.effective {
			if w.direct {
				w.obligAt = f.dc.calm(w.end, cfg.Staleness)
			} else {
				w.obligAt = w.end + 1 // read-your-writes: listings starting after it ended
			}
		}
		ks.writes = append(ks.writes, w)
	}
	for g := range md.byGroup {
		sort.Strings(md.byGroup[g])
	}
	for _, ks := range md.keys {
		ks.index(cfg, f)
	}
	return md
}

// index computes supAt of every write and the per-value lookups.
func (ks *keyState) index(cfg Config, f *faults) {
	sort.SliceStable(ks.writes, func(i, j int) bool { return ks.writes[i].start < ks.writes[j].start })
	ks.minOblig = inf
	var eff []*write
	for _, w := range ks.writes {
		if w.effective {
			eff = append(eff, w)
			ks.minOblig = min(ks.minOblig, w.obligAt)
		}
	}
	if len(eff) > 0 {
		// The minimum obligAt of each suffix of the writes by start: all of
		// them, and those made directly on each DC.
		starts := make([]int64, len(eff))
		sufMin := make([]int64, len(eff))
		for i, w := range eff {
			starts[i], sufMin[i] = w.start, w.obligAt
		}
		for i := len(sufMin) - 2; i >= 0; i-- {
			sufMin[i] = min(sufMin[i], sufMin[i+1])
		}
		type dcList struct{ starts, sufMin []int64 }
		perDC := map[int]*dcList{}
		for _, w := range eff {
			if !w.direct {
				continue
			}
			l := perDC[w.dc]
			if l == nil {
				l = &dcList{}
				perDC[w.dc] = l
			}
			l.starts = append(l.starts, w.start)
			l.sufMin = append(l.sufMin, w.obligAt)
		}
		for _, l := range perDC {
			for i := len(l.sufMin) - 2; i >= 0; i-- {
				l.sufMin[i] = min(l.sufMin[i], l.sufMin[i+1])
			}
		}
		firstFrom := func(starts, sufMin []int64, t int64) int64 {
			i := sort.Search(len(starts), func(i int) bool { return starts[i] >= t })
			if i < len(starts) {
				return sufMin[i]
			}
			return inf
		}
		for _, w := range eff {
			// On one DC, a later write replaces an earlier one.
			if w.direct {
				l := perDC[w.dc]
				w.supAt = min(w.supAt, firstFrom(l.starts, l.sufMin, w.end+1))
			}
			// Anywhere: a write started once w has had Converge of calm, with
			// the DC faults since w started counted.
			conv := max(f.dc.calmSince(w.start, w.end, cfg.Converge), w.end+1)
			w.supAt = min(w.supAt, firstFrom(starts, sufMin, conv))
		}
		// A write whose outcome is unknown took effect, if at all, by MaxRequest
		// after its start (the server gives up on it then): an effective write
		// started once that moment has had Converge of calm supersedes it.
		if cfg.MaxRequest > 0 {
			for _, w := range ks.writes {
				if w.effective {
					continue
				}
				late := w.start + int64(cfg.MaxRequest)
				conv := max(f.dc.calmSince(w.start, late, cfg.Converge), late+1)
				w.supAt = min(w.supAt, firstFrom(starts, sufMin, conv))
			}
		}
	}
	for _, w := range ks.writes {
		v := b2i(w.present)
		s := w.supAt
		if n := len(ks.prefSup[v]); n > 0 {
			s = max(s, ks.prefSup[v][n-1])
		}
		ks.starts[v] = append(ks.starts[v], w.start)
		ks.prefSup[v] = append(ks.prefSup[v], s)
	}
}

// allowed returns which values a listing running over [ls, le] may show.
func (ks *keyState) allowed(ls, le int64) (absent, present bool) {
	var ok [2]bool
	for v := range 2 {
		st := ks.starts[v]
		i := sort.Search(len(st), func(i int) bool { return st[i] >= le })
		ok[v] = i > 0 && ks.prefSup[v][i-1] > ls
	}
	if ks.minOblig > ls {
		ok[b2i(ks.initial)] = true
	}
	return ok[0], ok[1]
}

// newest returns the obligations of a listing starting at ls that no other
// obligation supersedes.
func (ks *keyState) newest(ls int64) []*write {
	var out []*write
	for _, w := range ks.writes {
		if w.effective && w.obligAt <= ls && w.supAt > ls {
			out = append(out, w)
		}
	}
	return out
}
