package history

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

const (
	g1 = "cn=g1,ou=groups,dc=corp"
	g2 = "cn=g2,ou=groups,dc=corp"
	u1 = "cn=u1,ou=staff,dc=corp"
	u2 = "cn=u2,ou=staff,dc=corp"
	u3 = "cn=u3,ou=staff,dc=corp"
	u5 = "cn=u5,ou=staff,dc=corp"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// builder writes a history in milliseconds after t0; an end below 0 leaves the
// operation unfinished.
type builder struct{ ops []Op }

func (b *builder) op(o Op, start, end int) int64 {
	o.ID = int64(len(b.ops) + 1)
	if o.Process == "" {
		o.Process = "p"
	}
	o.Start = at(start)
	if end >= 0 {
		o.End = at(end)
	}
	b.ops = append(b.ops, o)
	return o.ID
}

func (b *builder) list(replica, group string, start, end int, members ...string) int64 {
	return b.op(Op{Kind: List, Replica: replica, Group: group, Status: 200, Members: members}, start, end)
}

func (b *builder) nested(replica, group string, start, end int, members ...string) int64 {
	return b.op(Op{Kind: List, Replica: replica, Group: group, Nested: true, Status: 200, Members: members}, start, end)
}

func (b *builder) failedList(replica, group string, start, end, status int, body string) int64 {
	return b.op(Op{Kind: List, Replica: replica, Group: group, Status: status, ErrorBody: body}, start, end)
}

func (b *builder) write(kind, replica, group, member string, start, end, status int, noChanges bool) int64 {
	o := Op{Kind: kind, Replica: replica, Group: group, Member: member, Status: status}
	if status >= 200 && status < 300 {
		o.NoChanges = &noChanges
	}
	return b.op(o, start, end)
}

func (b *builder) direct(kind string, dc int, group, member string, start, end int) int64 {
	return b.op(Op{Kind: kind, DC: dc, Group: group, Member: member}, start, end)
}

func (b *builder) failedWrite(kind, replica, group, member string, start, end int) int64 {
	return b.op(Op{Kind: kind, Replica: replica, Group: group, Member: member, Status: 503, ErrorBody: body503}, start, end)
}

func (b *builder) fault(name string, start, end int, targets ...string) int64 {
	return b.op(Op{Kind: Fault, Process: "nemesis", Fault: name, Targets: targets}, start, end)
}

func (b *builder) token(kind, replica, token, member string, start, end, status int) int64 {
	return b.op(Op{Kind: kind, Replica: replica, Token: token, Member: member, Status: status}, start, end)
}

var testCfg = Config{
	Initial:      map[string][]string{g1: {u1, u2}},
	Staleness:    2 * time.Second,
	Converge:     time.Second,
	DisableBound: 3 * time.Second,
	Settle:       time.Second,
}

func cfgWith(initial map[string][]string) Config {
	c := testCfg
	c.Initial = initial
	return c
}

const body503 = `{"message":"The directory is unavailable; try again later.","code":"upstreamUnavailable"}`

// wantAnomalies checks that the report holds exactly the given anomalies, as
// kind/op/causes.
func wantAnomalies(t *testing.T, r Report, want ...Anomaly) {
	t.Helper()
	var got []string
	for _, a := range r.Anomalies {
		got = append(got, fmt.Sprintf("%s op=%d causes=%v", a.Kind, a.Op, a.Causes))
	}
	var exp []string
	for _, a := range want {
		if a.Causes == nil {
			a.Causes = []int64{}
		}
		exp = append(exp, fmt.Sprintf("%s op=%d causes=%v", a.Kind, a.Op, a.Causes))
	}
	if !slices.Equal(got, exp) {
		for _, a := range r.Anomalies {
			t.Logf("anomaly: %+v", a)
		}
		t.Fatalf("anomalies:\n got %q\nwant %q", got, exp)
	}
}

// A history in which every promise is kept, every rule applied at least once.
func TestCorrectHistory(t *testing.T) {
	var b builder
	// Read-your-writes across replicas.
	b.write(Remove, "A", g1, u1, 0, 100, 200, false)
	b.list("B", g1, 150, 200, u2)
	// A removal of what is not there changes nothing.
	b.write(Remove, "B", g1, u1, 300, 350, 200, true)
	// A direct addition shows within the staleness bound, and may show earlier.
	b.direct(DirectAdd, 1, g1, u3, 400, 450)
	b.list("A", g1, 500, 520, u2)
	b.list("B", g1, 600, 620, u2, u3)
	b.list("A", g1, 2500, 2520, u2, u3)
	// One DC killed: listings still answer.
	b.fault("kill-dc", 3000, 6000, "dc1")
	b.list("A", g1, 3500, 3600, u2, u3)
	// Both DCs down: a documented failure.
	b.fault("blackhole-dc", 4000, 5000, "dc2")
	b.failedList("B", g1, 4200, 4300, 503, body503)
	// A killed replica gives no answer.
	b.fault("kill-replica", 7000, 8000, "replica:A")
	b.op(Op{Kind: List, Replica: "A", Group: g1, Err: "connection refused"}, 7500, 7501)
	// Tokens: used, revoked, refused afterwards.
	b.token(SignIn, "A", "t1", u2, 9000, 9100, 200)
	b.token(UseTok, "B", "t1", "", 9200, 9250, 200)
	b.token(Revoke, "A", "t1", "", 9300, 9350, 200)
	b.token(UseTok, "B", "t1", "", 9400, 9450, 401)
	// A disabled account's token works until the bound, not after.
	b.token(SignIn, "A", "t2", u3, 9000, 9100, 200)
	b.direct(Disable, 1, "", u3, 10000, 10050)
	b.token(UseTok, "B", "t2", "", 11000, 11050, 200)
	b.token(UseTok, "B", "t2", "", 13100, 13150, 401)
	b.token(SignIn, "A", "", u3, 13200, 13250, 403)
	// Nested: g2 inside g1.
	b.write(Add, "A", g1, g2, 14000, 14100, 200, false)
	b.nested("B", g1, 14200, 14300, g2, u2, u3, u5)

	cfg := cfgWith(map[string][]string{g1: {u1, u2}, g2: {u5}})
	r := Check(b.ops, cfg)
	wantAnomalies(t, r)
	for name, n := range r.Checks {
		if n == 0 {
			t.Errorf("rule %s applied 0 times", name)
		}
	}
	if r.Ops[List] != 8 || r.Faults != 3 {
		t.Errorf("ops %v faults %d", r.Ops, r.Faults)
	}
}

// A direct change still missing from a listing that started S of calm after it
// ended is a stale read; a DC fault moves the bound to S after the fault heals.
func TestStaleRead(t *testing.T) {
	var b builder
	rm := b.direct(DirectRemove, 1, g1, u2, 0, 100)
	b.list("A", g1, 1000, 1050, u1, u2) // within S: either value
	stale := b.list("A", g1, 2200, 2250, u1, u2)
	b.list("B", g1, 2300, 2350, u1)
	wantAnomalies(t, Check(b.ops, testCfg), Anomaly{Kind: StaleRead, Op: stale, Causes: []int64{rm}})

	var f builder
	f.direct(DirectRemove, 1, g1, u2, 0, 100)
	f.fault("pause-inbound", 500, 5000, "dc2")
	f.list("A", g1, 6900, 6950, u1, u2) // S after the fault healed: not yet
	late := f.list("A", g1, 7100, 7150, u1, u2)
	wantAnomalies(t, Check(f.ops, testCfg), Anomaly{Kind: StaleRead, Op: late, Causes: []int64{1}})
}

// A removal seen, then unseen: the member came back.
func TestResurrection(t *testing.T) {
	var b builder
	rm := b.write(Remove, "A", g1, u1, 0, 100, 200, false)
	b.list("A", g1, 200, 250, u2)
	back := b.list("B", g1, 400, 450, u1, u2)
	wantAnomalies(t, Check(b.ops, testCfg), Anomaly{Kind: Resurrection, Op: back, Causes: []int64{rm}})
}

// A write through one replica missing from the other replica's next listing.
func TestLostWrite(t *testing.T) {
	var b builder
	add := b.write(Add, "A", g1, u3, 0, 100, 200, false)
	b.list("A", g1, 50, 150, u1, u2) // started before the addition ended
	lost := b.list("B", g1, 150, 200, u1, u2)
	wantAnomalies(t, Check(b.ops, testCfg), Anomaly{Kind: LostWrite, Op: lost, Causes: []int64{add}})
}

// A write whose outcome is unknown may have applied: both values are allowed.
func TestPossibleWrite(t *testing.T) {
	var b builder
	rm := b.write(Remove, "A", g1, u1, 0, 100, 504, false)
	b.ops[rm-1].ErrorBody = `{"message":"The directory did not answer in time.","code":"upstreamTimeout"}`
	b.write(Add, "A", g1, u3, 0, -1, 0, false)
	b.list("B", g1, 200, 250, u1, u2, u3)
	b.list("B", g1, 20000, 20050, u2)
	r := Check(b.ops, testCfg)
	wantAnomalies(t, r)
	if r.Checks[CheckMembership] != 6 {
		t.Errorf("membership checks %d, want 6", r.Checks[CheckMembership])
	}
}

// Two changes on different DCs within Converge of each other: AD's replication
// decides, so either value may stay. On one DC, or Converge of calm apart, the
// later wins.
func TestConcurrentDirectWrites(t *testing.T) {
	for _, tc := range []struct {
		name     string
		dc2      int
		addStart int
		fault    bool
		stale    bool
	}{
		{"different DCs within Converge", 2, 500, false, false},
		{"one DC", 1, 500, false, true},
		{"Converge apart", 2, 2000, false, true},
		{"Converge apart, not of calm", 2, 2000, true, false},
		{"Converge of calm after a DC fault", 2, 2300, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b builder
			b.direct(DirectRemove, 1, g1, u1, 0, 100)
			add := b.direct(DirectAdd, tc.dc2, g1, u1, tc.addStart, tc.addStart+100)
			if tc.fault {
				b.fault("delay-dc", 1000, 1200, "dc1")
			}
			l := b.list("A", g1, 10000, 10050, u2)
			b.list("A", g1, 10100, 10150, u1, u2)
			var want []Anomaly
			if tc.stale {
				want = append(want, Anomaly{Kind: StaleRead, Op: l, Causes: []int64{add}})
			}
			wantAnomalies(t, Check(b.ops, testCfg), want...)
		})
	}
}

func TestPhantom(t *testing.T) {
	var b builder
	l := b.list("A", g1, 0, 50, u1, u2, u5)
	// Shown before any write could have added it.
	early := b.list("A", g1, 100, 150, u1, u2, u3)
	b.write(Add, "A", g1, u3, 200, 300, 200, false)
	wantAnomalies(t, Check(b.ops, testCfg),
		Anomaly{Kind: Phantom, Op: l}, Anomaly{Kind: Phantom, Op: early})
}

// Nested listings: reachable by sure edges must be listed, only reachable by
// possible edges may be; the group never lists itself, cycles end.
func TestNested(t *testing.T) {
	cfg := cfgWith(map[string][]string{g1: {u1, g2}, g2: {u5, g1}})
	var b builder
	b.nested("A", g1, 0, 50, u1, g2, u5)
	missing := b.nested("A", g1, 60, 70, u1, g2)
	self := b.nested("A", g1, 80, 90, u1, g2, u5, g1)
	rm := b.write(Remove, "A", g1, g2, 100, 200, 200, false)
	b.nested("B", g1, 150, 250, u1, g2, u5) // concurrent with the removal
	b.nested("B", g1, 300, 350, u1)
	back := b.nested("B", g1, 400, 450, u1, u5)
	b.nested("A", g2, 500, 550, u5, g1, u1)
	wantAnomalies(t, Check(b.ops, cfg),
		Anomaly{Kind: Phantom, Op: missing},
		Anomaly{Kind: Phantom, Op: self},
		Anomaly{Kind: Resurrection, Op: back, Causes: []int64{rm}})

	// A member nested two deep, whose path was made through dirgate, missing.
	var n builder
	add := n.write(Add, "A", g1, g2, 0, 100, 200, false)
	lost := n.nested("B", g1, 200, 250, u1, u2, g2)
	wantAnomalies(t, Check(n.ops, cfgWith(map[string][]string{g1: {u1, u2}, g2: {u5}})),
		Anomaly{Kind: LostWrite, Op: lost, Causes: []int64{add}})
}

func TestRevokedTokenAccepted(t *testing.T) {
	var b builder
	b.token(SignIn, "A", "t1", u1, 0, 100, 200)
	b.token(UseTok, "B", "t1", "", 150, 400, 200) // started before the revocation ended
	rv := b.token(Revoke, "A", "t1", "", 200, 300, 200)
	use := b.token(UseTok, "B", "t1", "", 350, 400, 200)
	b.token(UseTok, "A", "t1", "", 450, 500, 401)
	wantAnomalies(t, Check(b.ops, testCfg), Anomaly{Kind: RevokedTokenAccepted, Op: use, Causes: []int64{rv}})
}

func TestDisabledTokenAccepted(t *testing.T) {
	var b builder
	b.token(SignIn, "A", "t1", u1, 0, 100, 200)
	b.token(SignIn, "A", "t2", u1, 0, 100, 200)
	d := b.direct(Disable, 2, "", u1, 1000, 1100)
	b.token(UseTok, "B", "t1", "", 3000, 3050, 200) // within the bound
	late := b.token(UseTok, "B", "t1", "", 4200, 4250, 200)
	// A teardown answers 204 for any token (docs/auth.md): not a use.
	b.token(Revoke, "A", "t2", "", 4300, 4350, 204)
	b.direct(Enable, 2, "", u1, 5000, 5100)
	b.token(UseTok, "B", "t1", "", 5200, 5250, 200) // enabled again
	wantAnomalies(t, Check(b.ops, testCfg), Anomaly{Kind: DisabledTokenAccepted, Op: late, Causes: []int64{d}})

	// The bound counts from the end of a DC fault.
	var f builder
	f.token(SignIn, "A", "t1", u1, 0, 100, 200)
	d = f.direct(Disable, 2, "", u1, 1000, 1100)
	f.fault("blackhole-dc", 2000, 4000, "dc2")
	f.token(UseTok, "B", "t1", "", 6900, 6950, 200)
	late = f.token(SignIn, "B", "t2", u1, 7100, 7150, 200)
	wantAnomalies(t, Check(f.ops, testCfg), Anomaly{Kind: DisabledTokenAccepted, Op: late, Causes: []int64{d}})
}

func TestUnavailable(t *testing.T) {
	var b builder
	b.fault("kill-dc", 0, 5000, "dc1")
	b.fault("stop-redis-replica", 0, 5000, "redis-replica")
	b.fault("delay-dc", 0, 5000, "dc2")
	b.fault("kill-replica", 0, 1000, "replica:B")
	down := b.failedList("A", g1, 1000, 1100, 503, body503)
	b.failedList("B", g1, 1500, 1600, 503, body503) // B healed less than Settle before
	b.op(Op{Kind: List, Replica: "B", Group: g1, Err: "connection refused"}, 1900, 1950)
	// A DC down while the Redis primary is: read-your-writes wins over availability.
	b.fault("kill-redis-primary", 6000, 8000, "redis-primary")
	b.fault("blackhole-dc", 6000, 8000, "dc1")
	b.failedList("A", g1, 7000, 7100, 503, body503)
	b.failedList("A", g1, 8200, 8300, 504, `{"message":"The directory did not answer in time.","code":"upstreamTimeout"}`)
	wantAnomalies(t, Check(b.ops, testCfg), Anomaly{Kind: Unavailable, Op: down})
}

func TestBadFailure(t *testing.T) {
	var b builder
	b.fault("kill-dc", 0, 5000, "dc1")
	b.fault("blackhole-dc", 0, 5000, "dc2")
	internal := b.failedList("A", g1, 1000, 1100, 500, `{"message":"An internal error occurred.","code":"internal"}`)
	wrongBody := b.failedList("A", g1, 1200, 1300, 503, `{"message":"dial tcp 10.0.0.1:636: connection refused","code":"upstreamUnavailable"}`)
	noBody := b.write(Add, "A", g1, u3, 1400, 1500, 502, false)
	silent := b.op(Op{Kind: List, Replica: "A", Group: g1, Err: "EOF"}, 1600, 1700)
	b.failedList("B", g1, 1800, 1900, 502, `{"message":"The directory could not complete the request.","code":"upstreamError"}`)
	wantAnomalies(t, Check(b.ops, testCfg),
		Anomaly{Kind: BadFailure, Op: internal},
		Anomaly{Kind: BadFailure, Op: wrongBody},
		Anomaly{Kind: BadFailure, Op: noBody},
		Anomaly{Kind: BadFailure, Op: silent})
}

// Staleness: from a change's end to the last listing that still missed it,
// before the key's next write.
func TestStalenessDistribution(t *testing.T) {
	var b builder
	b.direct(DirectAdd, 1, g1, u3, 0, 100)
	b.list("A", g1, 300, 310, u1, u2)
	b.list("A", g1, 900, 910, u1, u2)       // missed it 800ms after
	b.list("A", g1, 1300, 1310, u1, u2, u3) // saw it
	b.list("A", g1, 1400, 1410, u1, u2)     // within S: allowed, and counted
	b.direct(DirectRemove, 2, g1, u3, 5000, 5100)
	b.list("A", g1, 5200, 5210, u1, u2) // saw it at once: 0
	b.direct(DirectRemove, 1, g1, u1, 10000, 10100)
	b.fault("delay-dc", 10500, 10600, "dc2")
	b.list("A", g1, 10700, 10710, u1, u2) // missed it 600ms after, over a fault
	// Not measured: a write with a later one on its key too soon after.
	b.direct(DirectRemove, 1, g1, u2, 20000, 20100)
	b.list("A", g1, 20200, 20210, u2)
	b.write(Add, "A", g1, u2, 20500, 20600, 200, false)

	r := Check(b.ops, testCfg)
	wantAnomalies(t, r)
	want := Distribution{N: 3, P50: 600 * time.Millisecond, P90: 1300 * time.Millisecond, P99: 1300 * time.Millisecond, Max: 1300 * time.Millisecond}
	if r.Staleness != want {
		t.Errorf("staleness %v, want %v", r.Staleness, want)
	}
	wantCalm := Distribution{N: 2, P50: 0, P90: 1300 * time.Millisecond, P99: 1300 * time.Millisecond, Max: 1300 * time.Millisecond}
	if r.StalenessCalm != wantCalm {
		t.Errorf("calm staleness %v, want %v", r.StalenessCalm, wantCalm)
	}
	byDC := map[string]Distribution{
		"dc1": {N: 1, P50: 1300 * time.Millisecond, P90: 1300 * time.Millisecond, P99: 1300 * time.Millisecond, Max: 1300 * time.Millisecond},
		"dc2": {N: 1},
	}
	if !reflect.DeepEqual(r.StalenessCalmByDC, byDC) {
		t.Errorf("calm staleness by DC %v, want %v", r.StalenessCalmByDC, byDC)
	}
	if s := r.Staleness.String(); s != "n=3 p50=600ms p90=1300ms p99=1300ms max=1300ms" {
		t.Errorf("String: %s", s)
	}
	js, err := json.Marshal(r.Staleness)
	if err != nil {
		t.Fatal(err)
	}
	if string(js) != `{"n":3,"p50ms":600,"p90ms":1300,"p99ms":1300,"maxMs":1300}` {
		t.Errorf("JSON: %s", js)
	}
	var back Distribution
	if err := json.Unmarshal(js, &back); err != nil || back != want {
		t.Errorf("JSON round trip: %v %v", back, err)
	}
}

// Staleness after a write of unknown outcome: a change is measured once the
// unknown write can no longer take effect after it (MaxRequest after its start,
// then Converge of calm), not while it may, and never without MaxRequest.
func TestStalenessAfterUnknownWrite(t *testing.T) {
	var b builder
	failed := b.direct(DirectRemove, 2, g1, u1, 0, 100) // the connection failed: removed, or not
	b.ops[failed-1].Err = "connection reset"
	b.direct(DirectRemove, 1, g1, u1, 1500, 1600) // too soon after: not measured
	b.list("A", g1, 1700, 1710, u2)
	b.direct(DirectAdd, 1, g1, u1, 5000, 5100) // measured
	b.list("A", g1, 5300, 5310, u2)            // missed it 200ms after
	b.list("A", g1, 5400, 5410, u1, u2)
	cfg := testCfg
	cfg.MaxRequest = time.Second
	r := Check(b.ops, cfg)
	wantAnomalies(t, r)
	if want := (Distribution{N: 1, P50: 200 * time.Millisecond, P90: 200 * time.Millisecond, P99: 200 * time.Millisecond, Max: 200 * time.Millisecond}); r.Staleness != want {
		t.Errorf("staleness %v, want %v", r.Staleness, want)
	}
	cfg.MaxRequest = 0
	if r := Check(b.ops, cfg); r.Staleness.N != 0 {
		t.Errorf("without MaxRequest: staleness %v, want none measured", r.Staleness)
	}
}

func TestReadWriteRoundTrip(t *testing.T) {
	no := true
	ops := []Op{
		{ID: 1, Process: "list-1", Kind: List, Replica: "A", Group: g1, Nested: true, Start: at(0), End: at(5),
			Status: 200, Members: []string{u1, u2}, Cache: "hit"},
		{ID: 2, Process: "write-1", Kind: Remove, Replica: "B", Group: g1, Member: u1, Start: at(1), End: at(9),
			Status: 200, NoChanges: &no},
		{ID: 3, Process: "direct", Kind: DirectAdd, DC: 2, Group: g1, Member: u3, Start: at(2), Status: 20, Err: "attributeOrValueExists"},
		{ID: 4, Process: "nemesis", Kind: Fault, Fault: "kill-dc", Targets: []string{"dc1"}, Start: at(3), End: at(4)},
		{ID: 5, Process: "tok", Kind: UseTok, Replica: "A", Token: "t1", Start: at(3), End: at(4), Status: 503, ErrorBody: body503},
	}
	var sb strings.Builder
	if err := Write(&sb, ops); err != nil {
		t.Fatal(err)
	}
	back, err := Read(strings.NewReader(sb.String() + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != len(ops) {
		t.Fatalf("read %d ops, wrote %d", len(back), len(ops))
	}
	for i := range ops {
		if !back[i].Start.Equal(ops[i].Start) || !back[i].End.Equal(ops[i].End) {
			t.Errorf("op %d times %v %v, want %v %v", i, back[i].Start, back[i].End, ops[i].Start, ops[i].End)
		}
		back[i].Start, back[i].End = ops[i].Start, ops[i].End
		if !reflect.DeepEqual(back[i], ops[i]) {
			t.Errorf("op %d:\n got %+v\nwant %+v", i, back[i], ops[i])
		}
	}
	if _, err := Read(strings.NewReader("{\"id\":1}\nnot json\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("bad line: %v", err)
	}
}

// TestUnknownWriteSuperseded: a write whose answer was lost may take effect until
// MaxRequest after its start; an acknowledged write started after that (and
// Converge) binds listings again, and without MaxRequest nothing does.
func TestUnknownWriteSuperseded(t *testing.T) {
	var b builder
	b.failedWrite(Remove, "A", g1, u1, 1000, 1100) // 503: removed, or not
	add := b.write(Add, "A", g1, u1, 20000, 20100, 200, false)
	late := b.list("B", g1, 20200, 20300, u2) // u1 missing after the acknowledged addition
	cfg := testCfg
	cfg.MaxRequest = 10 * time.Second
	wantAnomalies(t, Check(b.ops, cfg), Anomaly{Kind: LostWrite, Op: late, Causes: []int64{add}})
	cfg.MaxRequest = 0
	wantAnomalies(t, Check(b.ops, cfg))
}
