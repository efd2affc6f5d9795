package history

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"
)

// Config sets what the checker assumes of a run.
type Config struct {
	// Initial is each group's direct members (lower-cased DNs) when the run began.
	Initial map[string][]string
	// Staleness is S: a listing must reflect every direct change that completed S
	// or more before it started, counted from the end of the last DC fault.
	Staleness time.Duration
	// Converge is how long two writes to one membership made on different DCs
	// may still be ordered by AD's replication rather than by their real time:
	// a write supersedes an earlier one once that one has had Converge of calm,
	// counted past DC faults like Staleness.
	Converge time.Duration
	// DisableBound is how soon a disabled account's token must stop working.
	DisableBound time.Duration
	// Settle is how long after a fault heals availability is not yet required.
	Settle time.Duration
	// MaxRequest is how long after its start a write whose outcome is unknown (no
	// answer, a 5xx) may still take effect: dirgate's request timeout, or the
	// direct change's. 0: it may take effect at any time, and is never superseded.
	MaxRequest time.Duration
}

// Anomaly is one breach of a promise.
type Anomaly struct {
	Kind   string  `json:"kind"`   // "stale-read", "lost-write", "resurrection", "phantom", "revoked-token-accepted", "disabled-token-accepted", "unavailable", "bad-failure"
	Op     int64   `json:"op"`     // the operation that saw it
	Causes []int64 `json:"causes"` // the writes, revocations or faults it contradicts
	Detail string  `json:"detail"`
}

// Report is the checker's judgement of a history.
type Report struct {
	Anomalies []Anomaly      `json:"anomalies"`
	Checks    map[string]int `json:"checks"` // how many times each rule was applied
	Ops       map[string]int `json:"ops"`    // operations by kind
	Faults    int            `json:"faults"`
	// Staleness of direct changes: how long after a change completed listings still
	// missed it, in all and outside DC faults.
	Staleness     Distribution `json:"staleness"`
	StalenessCalm Distribution `json:"stalenessCalm"`
	// StalenessCalmByDC is StalenessCalm by the DC the change was made on ("dc1",
	// "dc2"): a change made on the DC a replica reads shows after the change feed's
	// next read, one made on another DC once replication has brought it there.
	StalenessCalmByDC map[string]Distribution `json:"stalenessCalmByDC,omitempty"`
}

// Distribution summarises durations.
type Distribution struct {
	N                  int           `json:"n"`
	P50, P90, P99, Max time.Duration `json:"-"`
}

// Anomaly kinds.
const (
	StaleRead             = "stale-read"
	LostWrite             = "lost-write"
	Resurrection          = "resurrection"
	Phantom               = "phantom"
	RevokedTokenAccepted  = "revoked-token-accepted"
	DisabledTokenAccepted = "disabled-token-accepted"
	Unavailable           = "unavailable"
	BadFailure            = "bad-failure"
)

// Names of Report.Checks: one count per rule applied.
const (
	CheckMembership       = "membership"        // a direct listing's value for one member
	CheckNestedMembership = "nested-membership" // a nested listing's value for one object
	// Of those, the ones where a single value was allowed: the ones that could
	// have failed. Writes of unknown outcome leave both values allowed.
	CheckMembershipDecisive       = "membership-decisive"
	CheckNestedMembershipDecisive = "nested-membership-decisive"
	CheckRevokedToken             = "revoked-token"  // a request with a token after its revocation
	CheckDisabledToken            = "disabled-token" // a request with a disabled account's token past the bound
	CheckAvailability             = "availability"   // a listing that had to succeed
	CheckFailure                  = "failure"        // a failed request's answer
)

// Check judges ops against the promises; docs/chaos.md ("What the checker
// checks") states each rule.
func Check(ops []Op, cfg Config) Report {
	c := &checker{
		cfg: cfg,
		r: Report{
			Anomalies: []Anomaly{},
			Checks: map[string]int{CheckMembership: 0, CheckNestedMembership: 0, CheckMembershipDecisive: 0,
				CheckNestedMembershipDecisive: 0, CheckRevokedToken: 0,
				CheckDisabledToken: 0, CheckAvailability: 0, CheckFailure: 0},
			Ops: map[string]int{},
		},
		listings: map[listKey][]*listing{},
	}
	for i := range ops {
		c.r.Ops[ops[i].Kind]++
	}
	c.f = indexFaults(ops)
	c.r.Faults = len(c.f.ops)
	c.model = buildModel(ops, cfg, c.f)
	c.indexListings(ops)
	c.memberships()
	c.tokens(ops)
	c.availability(ops)
	c.staleness()
	sort.SliceStable(c.r.Anomalies, func(i, j int) bool {
		a, b := c.r.Anomalies[i], c.r.Anomalies[j]
		if a.Op != b.Op {
			return a.Op < b.Op
		}
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		return a.Detail < b.Detail
	})
	return c.r
}

type checker struct {
	cfg      Config
	r        Report
	f        *faults
	model    *model
	listings map[listKey][]*listing // OK listings by group and nesting, by start
}

type listKey struct {
	g      string
	nested bool
}

type listing struct {
	op         *Op
	start, end int64
	members    []string // lower-cased, sorted
}

func (l *listing) has(m string) bool {
	i := sort.SearchStrings(l.members, m)
	return i < len(l.members) && l.members[i] == m
}

func (c *checker) add(kind string, op *Op, causes []int64, format string, args ...any) {
	if causes == nil {
		causes = []int64{}
	}
	c.r.Anomalies = append(c.r.Anomalies, Anomaly{Kind: kind, Op: op.ID, Causes: causes, Detail: fmt.Sprintf(format, args...)})
}

func (c *checker) indexListings(ops []Op) {
	for i := range ops {
		o := &ops[i]
		if o.Kind != List || !o.OK() {
			continue
		}
		l := &listing{op: o, start: startOf(o), end: endOf(o), members: make([]string, len(o.Members))}
		for j, m := range o.Members {
			l.members[j] = lower(m)
		}
		sort.Strings(l.members)
		k := listKey{lower(o.Group), o.Nested}
		c.listings[k] = append(c.listings[k], l)
	}
	for _, ls := range c.listings {
		sort.SliceStable(ls, func(i, j int) bool { return ls[i].start < ls[j].start })
	}
}

func (c *checker) memberships() {
	for k, ls := range c.listings {
		for _, l := range ls {
			if k.nested {
				c.nested(k.g, l)
			} else {
				c.direct(k.g, l)
			}
		}
	}
}

func present(b bool) string {
	if b {
		return "present"
	}
	return "absent"
}

func (c *checker) direct(g string, l *listing) {
	for _, m := range c.model.byGroup[g] {
		ks := c.model.keys[key{g, m}]
		c.r.Checks[CheckMembership]++
		absent, pres := ks.allowed(l.start, l.end)
		if absent != pres {
			c.r.Checks[CheckMembershipDecisive]++
		}
		shown := l.has(m)
		if shown && pres || !shown && absent {
			continue
		}
		c.breach(listKey{g, false}, l, m, shown, ks.newest(l.start))
	}
	for _, m := range l.members {
		if _, ok := c.model.keys[key{g, m}]; ok {
			continue
		}
		c.r.Checks[CheckMembership]++
		c.r.Checks[CheckMembershipDecisive]++
		c.add(Phantom, l.op, nil, "%s is listed in %s, which never had it and never was given it", m, g)
	}
}

// breach reports a listing showing m present (shown) or absent against the
// obligations it contradicts.
func (c *checker) breach(k listKey, l *listing, m string, shown bool, contradicted []*write) {
	what := fmt.Sprintf("%s shows %s %s", l.op.Group, m, present(shown))
	if len(contradicted) == 0 {
		c.add(Phantom, l.op, nil, "%s, which no write and not the initial state explains", what)
		return
	}
	newest := contradicted[0]
	causes := make([]int64, 0, len(contradicted))
	for _, w := range contradicted {
		causes = append(causes, w.op.ID)
		if w.end > newest.end || w.end == newest.end && !w.direct {
			newest = w
		}
	}
	slices.Sort(causes)
	causes = slices.Compact(causes)
	kind := StaleRead
	if !newest.direct {
		kind = LostWrite
	}
	if shown {
		if prev := c.sawAbsent(k, l, m, newest.end); prev != nil {
			c.add(Resurrection, l.op, causes, "%s after listing %d (started after %s %d ended) showed it absent", what, prev.op.ID, newest.op.Kind, newest.op.ID)
			return
		}
	}
	c.add(kind, l.op, causes, "%s against %s %d (ended %s before the listing started)", what, newest.op.Kind, newest.op.ID,
		time.Duration(l.start-newest.end))
}

// sawAbsent finds an OK listing of the same group that started after t, ended
// before l started and did not show m.
func (c *checker) sawAbsent(k listKey, l *listing, m string, t int64) *listing {
	ls := c.listings[k]
	for i := sort.Search(len(ls), func(i int) bool { return ls[i].start > t }); i < len(ls) && ls[i].start < l.start; i++ {
		if p := ls[i]; p.end < l.start && !p.has(m) {
			return p
		}
	}
	return nil
}

// nested judges an includeIndirect listing: the member edges are the
// memberships, each present for sure, possibly, or not at all at the listing's
// time; what is reachable by sure edges must be listed, and only what is
// reachable by possible edges may be (docs/compatibility.md, "Listings": the
// nested groups themselves are listed, never the group itself).
func (c *checker) nested(g string, l *listing) {
	type edgeVal struct{ absent, present bool }
	memo := map[key]edgeVal{}
	edge := func(k key) edgeVal {
		v, ok := memo[k]
		if !ok {
			v.absent, v.present = c.model.keys[k].allowed(l.start, l.end)
			memo[k] = v
		}
		return v
	}
	reach := func(sure bool) map[string]string {
		parent := map[string]string{}
		queue := []string{g}
		for len(queue) > 0 {
			p := queue[0]
			queue = queue[1:]
			for _, x := range c.model.byGroup[p] {
				if x == g {
					continue
				}
				if _, seen := parent[x]; seen {
					continue
				}
				v := edge(key{p, x})
				if !v.present || sure && v.absent {
					continue
				}
				parent[x] = p
				if c.model.groups[x] {
					queue = append(queue, x)
				}
			}
		}
		return parent
	}
	may := reach(false)
	must := reach(true)
	k := listKey{g, true}
	for x, p := range must {
		c.r.Checks[CheckNestedMembership]++
		c.r.Checks[CheckNestedMembershipDecisive]++
		if l.has(x) {
			continue
		}
		// The obligations that put each edge of the path in place.
		var contra []*write
		for y := x; y != g; y, p = p, must[p] {
			contra = append(contra, c.model.keys[key{p, y}].newest(l.start)...)
		}
		c.breach(k, l, x, false, contra)
	}
	for x := range may {
		if _, ok := must[x]; !ok {
			c.r.Checks[CheckNestedMembership]++
		}
	}
	for _, x := range l.members {
		if _, ok := may[x]; ok {
			continue
		}
		c.r.Checks[CheckNestedMembership]++
		c.r.Checks[CheckNestedMembershipDecisive]++
		// The obligations that cut every path to x: the edges from what may be
		// reached to x or to a group that leads to x.
		anc := c.model.ancestors(x)
		var contra []*write
		for _, p := range append([]string{g}, mapKeys(may)...) {
			for _, y := range c.model.byGroup[p] {
				if y == g || !anc[y] {
					continue
				}
				if v := edge(key{p, y}); !v.present {
					contra = append(contra, c.model.keys[key{p, y}].newest(l.start)...)
				}
			}
		}
		c.breach(k, l, x, true, contra)
	}
}

func mapKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func ok2xx(o *Op) bool { return o.Done() && o.Status >= 200 && o.Status < 300 }

func (c *checker) tokens(ops []Op) {
	account := map[string]string{} // token -> account DN
	tokOps := map[string][]*Op{}
	revoked := map[string]*Op{} // token -> the earliest-ending OK revocation
	changes := map[string][]*Op{}
	for i := range ops {
		o := &ops[i]
		switch o.Kind {
		case Disable, Enable:
			changes[lower(o.Member)] = append(changes[lower(o.Member)], o)
			continue
		}
		if o.Token == "" {
			continue
		}
		tokOps[o.Token] = append(tokOps[o.Token], o)
		if o.Kind == SignIn && o.OK() {
			account[o.Token] = lower(o.Member)
		}
		if o.Kind == Revoke && o.OK() {
			if r := revoked[o.Token]; r == nil || endOf(o) < endOf(r) {
				revoked[o.Token] = o
			}
		}
	}
	tokensOf := map[string][]string{}
	for t, a := range account {
		tokensOf[a] = append(tokensOf[a], t)
	}
	for _, ts := range tokensOf {
		sort.Strings(ts)
	}
	for t, rv := range revoked {
		after := endOf(rv)
		for _, o := range tokOps[t] {
			if o.Kind == SignIn || startOf(o) <= after {
				continue
			}
			c.r.Checks[CheckRevokedToken]++
			if ok2xx(o) {
				c.add(RevokedTokenAccepted, o, []int64{rv.ID}, "%s with token %s answered %d %s after revocation %d ended",
					o.Kind, t, o.Status, time.Duration(startOf(o)-after), rv.ID)
			}
		}
	}
	flagged := map[int64]bool{}
	for acct, chs := range changes {
		sort.SliceStable(chs, func(i, j int) bool { return chs[i].Start.Before(chs[j].Start) })
		for i, d := range chs {
			if d.Kind != Disable || !d.OK() {
				continue
			}
			from := c.f.dc.calm(endOf(d), c.cfg.DisableBound)
			until := inf
			for _, e := range chs[i+1:] {
				if e.Kind == Enable && writeOutcome(e) != notApplied && startOf(e) > startOf(d) {
					until = startOf(e)
					break
				}
			}
			for _, t := range tokensOf[acct] {
				for _, o := range tokOps[t] {
					if s := startOf(o); s <= from || s >= until || o.Kind == Revoke {
						// A revocation answers 204 for any token, so that a
						// teardown never fails (docs/auth.md): not a use.
						continue
					}
					c.r.Checks[CheckDisabledToken]++
					if ok2xx(o) && !flagged[o.ID] {
						flagged[o.ID] = true
						c.add(DisabledTokenAccepted, o, []int64{d.ID}, "%s with token %s of %s answered %d %s after disable %d ended",
							o.Kind, t, acct, o.Status, time.Duration(startOf(o)-endOf(d)), d.ID)
					}
				}
			}
		}
	}
}

var throughDirgate = map[string]bool{List: true, Remove: true, Add: true, SignIn: true, Revoke: true, UseTok: true}

// documented is the code and fixed message of each status docs/api.md ("Errors")
// gives for trouble upstream.
var documented = map[int]struct{ code, message string }{
	502: {"upstreamError", "The directory could not complete the request."},
	503: {"upstreamUnavailable", "The directory is unavailable; try again later."},
	504: {"upstreamTimeout", "The directory did not answer in time."},
}

func (c *checker) availability(ops []Op) {
	for i := range ops {
		o := &ops[i]
		if !throughDirgate[o.Kind] || !o.Done() {
			continue
		}
		a, b := startOf(o)-int64(c.cfg.Settle), endOf(o)
		replicaDown := c.f.replica[o.Replica].overlaps(a, b)
		if o.Kind == List {
			dc1Down, dc2Down := c.f.dcDown["dc1"].overlaps(a, b), c.f.dcDown["dc2"].overlaps(a, b)
			primaryDown := c.f.redis["redis-primary"].overlaps(a, b)
			redisUp := !primaryDown || !c.f.redis["redis-replica"].overlaps(a, b)
			// While the Redis primary is gone the other replicas' writes cannot be
			// read, and a listing whose DC cannot be shown to hold every other DC's
			// changes to the group answers 503 rather than risk contradicting one
			// (docs/directory.md, "Writes laid over listings").
			writesKnown := !primaryDown
			if !replicaDown && (!dc1Down || !dc2Down) && redisUp && writesKnown {
				c.r.Checks[CheckAvailability]++
				if !o.OK() {
					c.add(Unavailable, o, nil, "listing of %s on replica %s answered %d %s while its replica, a DC and a Redis were up", o.Group, o.Replica, o.Status, o.Err)
				}
				continue
			}
		}
		if o.Status != 0 && o.Status < 500 {
			continue
		}
		c.r.Checks[CheckFailure]++
		if o.Status == 0 {
			if !replicaDown {
				c.add(BadFailure, o, nil, "%s on replica %s got no answer (%s) while its replica was not faulted", o.Kind, o.Replica, o.Err)
			}
			continue
		}
		want, ok := documented[o.Status]
		if !ok {
			c.add(BadFailure, o, nil, "%s answered %d, not a status documented for trouble upstream", o.Kind, o.Status)
			continue
		}
		var body struct {
			Message *string `json:"message"`
			Code    *string `json:"code"`
		}
		if err := json.Unmarshal([]byte(o.ErrorBody), &body); err != nil || body.Code == nil || body.Message == nil ||
			*body.Code != want.code || *body.Message != want.message {
			c.add(BadFailure, o, nil, "%s answered %d with body %q, not the documented {\"message\":%q,\"code\":%q}", o.Kind, o.Status, o.ErrorBody, want.message, want.code)
		}
	}
}

// staleness measures, for each applied direct change that stood alone long
// enough to be seen, how long listings still missed it.
func (c *checker) staleness() {
	var all, calm []time.Duration
	byDC := map[string][]time.Duration{}
	for k, ks := range c.model.keys {
		ls := c.listings[listKey{k.g, false}]
		maxEnd := int64(math.MinInt64)
		for i, d := range ks.writes {
			prevEnd := maxEnd
			maxEnd = max(maxEnd, d.end)
			if !d.effective || !d.direct || prevEnd >= d.start || c.possiblyLater(ks.writes[:i], d) {
				continue
			}
			next := inf
			if i+1 < len(ks.writes) {
				next = ks.writes[i+1].start
			}
			if next <= d.end || next != inf && next-d.end < int64(c.cfg.Staleness) {
				continue
			}
			var st time.Duration
			j := sort.Search(len(ls), func(j int) bool { return ls[j].start >= d.end })
			for ; j < len(ls) && ls[j].start < next; j++ {
				// A listing still running when the next write started may show
				// that write instead.
				if ls[j].end < next && ls[j].has(k.m) != d.present {
					st = time.Duration(ls[j].start - d.end)
				}
			}
			all = append(all, st)
			if !c.f.dc.overlaps(d.end, plus(d.end, st)) {
				calm = append(calm, st)
				dc := fmt.Sprintf("dc%d", d.dc)
				byDC[dc] = append(byDC[dc], st)
			}
		}
	}
	c.r.Staleness = distribution(all)
	c.r.StalenessCalm = distribution(calm)
	for dc, xs := range byDC {
		if c.r.StalenessCalmByDC == nil {
			c.r.StalenessCalmByDC = map[string]Distribution{}
		}
		c.r.StalenessCalmByDC[dc] = distribution(xs)
	}
}

// possiblyLater reports whether a write of unknown outcome among before may still
// take effect after d, or be ordered after it by AD's replication: it may apply
// until MaxRequest after its start, and then needs Converge of calm, as rule 1
// counts it (model.go, index). Without MaxRequest every such write may.
func (c *checker) possiblyLater(before []*write, d *write) bool {
	for _, u := range before {
		if u.effective {
			continue
		}
		if c.cfg.MaxRequest <= 0 {
			return true
		}
		late := u.start + int64(c.cfg.MaxRequest)
		if d.start < max(c.f.dc.calmSince(u.start, late, c.cfg.Converge), late+1) {
			return true
		}
	}
	return false
}

func distribution(xs []time.Duration) Distribution {
	if len(xs) == 0 {
		return Distribution{}
	}
	slices.Sort(xs)
	rank := func(p float64) time.Duration {
		i := int(math.Ceil(p*float64(len(xs)))) - 1
		return xs[max(i, 0)]
	}
	return Distribution{N: len(xs), P50: rank(0.50), P90: rank(0.90), P99: rank(0.99), Max: xs[len(xs)-1]}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// String gives the distribution in milliseconds.
func (d Distribution) String() string {
	if d.N == 0 {
		return "n=0"
	}
	return fmt.Sprintf("n=%d p50=%.0fms p90=%.0fms p99=%.0fms max=%.0fms", d.N, ms(d.P50), ms(d.P90), ms(d.P99), ms(d.Max))
}

type distributionJSON struct {
	N     int     `json:"n"`
	P50ms float64 `json:"p50ms"`
	P90ms float64 `json:"p90ms"`
	P99ms float64 `json:"p99ms"`
	MaxMs float64 `json:"maxMs"`
}

// MarshalJSON gives the durations in milliseconds.
func (d Distribution) MarshalJSON() ([]byte, error) {
	return json.Marshal(distributionJSON{d.N, ms(d.P50), ms(d.P90), ms(d.P99), ms(d.Max)})
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (d *Distribution) UnmarshalJSON(b []byte) error {
	var j distributionJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return fmt.Errorf("history: distribution: %w", err)
	}
	back := func(v float64) time.Duration { return time.Duration(math.Round(v * float64(time.Millisecond))) }
	*d = Distribution{N: j.N, P50: back(j.P50ms), P90: back(j.P90ms), P99: back(j.P99ms), Max: back(j.MaxMs)}
	return nil
}
