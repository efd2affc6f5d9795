package ldap

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	goldap "github.com/go-ldap/ldap/v3"
)

// twoDCs opens a Directory over two fake DCs holding the same objects, DC1
// preferred, with short attempt and health timings.
func twoDCs(t *testing.T, cfg Config, brk func(string) Breaker) (*Directory, *org, *org) {
	t.Helper()
	o1, o2 := newOrg(), newOrg()
	o2.srv.name = "DC2"
	cfg.BaseDN = o1.srv.domain
	cfg.AttemptTimeout = cmpDur(cfg.AttemptTimeout, 100*time.Millisecond)
	cfg.HealthInterval = cmpDur(cfg.HealthInterval, time.Hour) // tests probe by hand
	cfg = cfg.withDefaults()
	fakes := map[string]*fakeServer{"ldaps://dc1:636": o1.srv, "ldaps://dc2:636": o2.srv}
	d := newDirectory(cfg, dirgate.MustParseDN(cfg.BaseDN),
		[]target{{url: "ldaps://dc1:636", addr: "dc1:636", implicitTLS: true}, {url: "ldaps://dc2:636", addr: "dc2:636", implicitTLS: true}},
		func(tg target) *server {
			s := &server{t: tg, pool: newPool(cfg.PoolSize, cfg.IdleTimeout, fakes[tg.url].dial)}
			if brk != nil {
				s.brk = brk(tg.url)
			}
			return s
		})
	d.now = func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }
	if err := d.discover(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d, o1, o2
}

// waitProbed waits until no health check of s is under way: a DC marked down is
// checked at once in the background, and a check by hand meanwhile does nothing.
func waitProbed(s *server) {
	for s.mu.Lock(); s.probing; s.mu.Lock() {
		s.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
	s.mu.Unlock()
}

// setOpen opens or closes b as a breaker does, under its lock (background health
// checks reset it).
func (b *fakeBreaker) setOpen(open bool) { b.mu.Lock(); b.open = open; b.mu.Unlock() }

func cmpDur(a, b time.Duration) time.Duration {
	if a != 0 {
		return a
	}
	return b
}

func upOf(d *Directory) []bool {
	var out []bool
	for _, s := range d.Servers() {
		out = append(out, s.Up)
	}
	return out
}

// TestFailoverStoppedDC: a DC that refuses connections is marked down at its first
// failure, the call is answered by the next one, and later calls do not dial it.
func TestFailoverStoppedDC(t *testing.T) {
	d, o1, o2 := twoDCs(t, Config{}, nil)
	o1.srv.refuse.Store(true)
	d.servers()[0].pool.flushIdle()
	obj, err := d.Lookup(context.Background(), dirgate.MustParseIdentifier(o2.alice.guid), nil)
	if err != nil || obj.GUID != o1.alice.guid {
		t.Fatalf("lookup with DC1 stopped = %v, %v", obj.GUID, err)
	}
	if got := upOf(d); got[0] || !got[1] {
		t.Fatalf("up = %v, want DC1 down, DC2 up", got)
	}
	waitProbed(d.servers()[0]) // the check it got when marked down dials it once
	dials := o1.srv.dials.Load()
	for i := 0; i < 5; i++ {
		if _, err := d.Members(context.Background(), byGUID(t, d, o1.g1.guid), nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := o1.srv.dials.Load(); n != dials {
		t.Errorf("DC1 dialled %d more times while marked down", n-dials)
	}
	if st := d.Servers()[0]; st.Reason == "" || st.Since.IsZero() {
		t.Errorf("status of the down DC names no reason: %+v", st)
	}
}

func byGUID(t *testing.T, d *Directory, g string) dirgate.Object {
	t.Helper()
	o, err := d.Lookup(context.Background(), dirgate.MustParseIdentifier(g), nil)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestFailoverSilentDCReadIsHedged: a DC that accepts a request and never answers
// (dropped packets) holds a read for AttemptTimeout, not the request timeout: the
// read is sent to the next DC too, and its answer is the call's.
func TestFailoverSilentDCReadIsHedged(t *testing.T) {
	d, o1, _ := twoDCs(t, Config{AttemptTimeout: 150 * time.Millisecond, RequestTimeout: 10 * time.Second}, nil)
	g1 := byGUID(t, d, o1.g1.guid) // warms DC1's pool
	o1.srv.hang.Store(true)
	start := time.Now()
	members, err := d.Members(context.Background(), g1, nil)
	took := time.Since(start)
	if err != nil || len(members) == 0 {
		t.Fatalf("members with DC1 silent = %d, %v", len(members), err)
	}
	if took > 2*time.Second {
		t.Errorf("the read took %v with DC1 silent; AttemptTimeout is 150ms", took)
	}
	if d.servers()[1].calls.ok.Load() == 0 {
		t.Error("DC2 answered no call")
	}
}

// TestFailoverSilentDCWriteMovesOn: a write to a DC silent for AttemptTimeout makes
// a health check of that DC; when it fails too, the DC is marked down and the write is
// sent to the next DC (the retry rules of a write hold there).
func TestFailoverSilentDCWriteMovesOn(t *testing.T) {
	d, o1, o2 := twoDCs(t, Config{AttemptTimeout: 100 * time.Millisecond, DialTimeout: 200 * time.Millisecond}, nil)
	g1, alice := byGUID(t, d, o1.g1.guid), byGUID(t, d, o1.alice.guid)
	o1.srv.hangModify.Store(true) // and its health check's search hangs too: packets dropped
	o1.srv.hang.Store(true)
	start := time.Now()
	if err := d.RemoveMember(context.Background(), g1, alice); err != nil {
		t.Fatalf("remove with DC1 silent: %v", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the removal took %v", took)
	}
	if indexFold(o2.g1.member, o2.alice.dn) >= 0 {
		t.Error("DC2 still lists the member")
	}
	if got := upOf(d); got[0] {
		t.Errorf("up = %v: the silent DC is not marked down", got)
	}
}

// TestPreferredDCComesBack: a DC marked down takes calls again once a health check
// succeeds, and being preferred, takes them all.
func TestPreferredDCComesBack(t *testing.T) {
	d, o1, o2 := twoDCs(t, Config{}, nil)
	o1.srv.refuse.Store(true)
	d.servers()[0].pool.flushIdle()
	byGUID(t, d, o1.alice.guid)
	waitProbed(d.servers()[0])
	d.probe(context.Background(), d.servers()[0])
	if got := upOf(d); got[0] {
		t.Fatalf("a failed health check marked DC1 up: %v", got)
	}
	o1.srv.refuse.Store(false)
	waitProbed(d.servers()[0])
	d.probe(context.Background(), d.servers()[0])
	if got := upOf(d); !got[0] {
		t.Fatalf("a good health check left DC1 down: %v", got)
	}
	before1, before2 := len(o1.srv.log()), len(o2.srv.log())
	byGUID(t, d, o1.bob.guid)
	if len(o1.srv.log()) == before1 || len(o2.srv.log()) != before2 {
		t.Errorf("the call after DC1 came back went to DC2 (DC1 %d→%d searches, DC2 %d→%d)",
			before1, len(o1.srv.log()), before2, len(o2.srv.log()))
	}
}

// TestOneDCRetriesAsBefore: with one DC, a network error on an idle connection is
// retried once on a new connection to the same DC, as the single-server adapter did.
func TestOneDCRetriesAsBefore(t *testing.T) {
	o := newOrg()
	d := o.dir(t, Config{})
	byGUID(t, d, o.alice.guid) // leaves an idle connection
	o.srv.failNext.Store(1)
	if _, err := d.Lookup(context.Background(), dirgate.MustParseIdentifier(o.bob.guid), nil); err != nil {
		t.Fatalf("lookup after one network error: %v", err)
	}
	if got := upOf(d); !got[0] {
		t.Error("a stale idle connection marked the only DC down")
	}
	o.srv.refuse.Store(true)
	d.servers()[0].pool.flushIdle()
	if _, err := d.Lookup(context.Background(), dirgate.MustParseIdentifier(o.bob.guid), nil); dirgate.ErrorCode(wrap("x", err)) != dirgate.EUPSTREAM {
		t.Errorf("lookup with the only DC stopped: %v", err)
	}
	o.srv.refuse.Store(false)
	if _, err := d.Lookup(context.Background(), dirgate.MustParseIdentifier(o.bob.guid), nil); err != nil {
		t.Errorf("the only DC, marked down, is not tried as a last resort: %v", err)
	}
}

// fakeBreaker is open or closed as the test says, and records outcomes.
type fakeBreaker struct {
	mu       sync.Mutex
	open     bool
	outcomes []error
	resets   int
}

func (b *fakeBreaker) Allow() (func(error), error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open {
		return nil, dirgate.WrapError(dirgate.EUNAVAILABLE, "The directory is unavailable; try again later.", errors.New("open"))
	}
	return func(err error) { b.mu.Lock(); b.outcomes = append(b.outcomes, err); b.mu.Unlock() }, nil
}

func (b *fakeBreaker) Open() bool { b.mu.Lock(); defer b.mu.Unlock(); return b.open }

func (b *fakeBreaker) Reset() { b.mu.Lock(); defer b.mu.Unlock(); b.open = false; b.resets++ }

// TestBreakerPerDC: an open breaker takes its DC out of the candidates; with every
// breaker open a call fails at once with EUNAVAILABLE; a server's failure reaches its
// own breaker only, as an infrastructure failure.
func TestBreakerPerDC(t *testing.T) {
	brks := map[string]*fakeBreaker{}
	var mu sync.Mutex
	d, o1, o2 := twoDCs(t, Config{}, func(s string) Breaker {
		mu.Lock()
		defer mu.Unlock()
		brks[s] = &fakeBreaker{}
		return brks[s]
	})
	b1, b2 := brks["ldaps://dc1:636"], brks["ldaps://dc2:636"]
	b1.setOpen(true)
	before := len(o1.srv.log())
	byGUID(t, d, o2.alice.guid)
	if len(o1.srv.log()) != before {
		t.Error("a call went to the DC whose breaker is open")
	}
	b2.setOpen(true)
	_, err := d.Lookup(context.Background(), dirgate.MustParseIdentifier(o2.alice.guid), nil)
	if dirgate.ErrorCode(err) != dirgate.EUNAVAILABLE {
		t.Errorf("every breaker open: %v, want EUNAVAILABLE", err)
	}
	b1.setOpen(false)
	b2.setOpen(false)
	o1.srv.refuse.Store(true)
	d.servers()[0].pool.flushIdle()
	b1.outcomes, b2.outcomes = nil, nil
	byGUID(t, d, o2.alice.guid)
	if len(b1.outcomes) != 1 || dirgate.ErrorCode(b1.outcomes[0]) != dirgate.EUPSTREAM {
		t.Errorf("DC1's breaker saw %v, want one EUPSTREAM", b1.outcomes)
	}
	if len(b2.outcomes) != 1 || b2.outcomes[0] != nil {
		t.Errorf("DC2's breaker saw %v, want one success", b2.outcomes)
	}
}

// TestAnswerIsNotFailover: a server's own answer (no such object) ends the call; the
// next DC is not asked.
func TestAnswerIsNotFailover(t *testing.T) {
	d, _, o2 := twoDCs(t, Config{}, nil)
	before := len(o2.srv.log())
	_, err := d.Lookup(context.Background(), dirgate.MustParseIdentifier("CN=nobody,"+users), nil)
	if dirgate.ErrorCode(err) != dirgate.ENOTFOUND {
		t.Fatalf("lookup of nobody: %v", err)
	}
	if len(o2.srv.log()) != before {
		t.Error("a not-found answer was asked of DC2 too")
	}
	if got := upOf(d); !got[0] {
		t.Error("an answer marked DC1 down")
	}
	_ = goldap.LDAPResultNoSuchObject
}

// memJournal is a WriteJournal shared by two Directories, as Redis is by replicas.
type memJournal struct {
	mu sync.Mutex
	w  []dirgate.MembershipWrite
}

func (j *memJournal) Record(_ context.Context, w dirgate.MembershipWrite, _ time.Duration) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.w = append(j.w, w)
	return nil
}

func (j *memJournal) Recent(_ context.Context, group string) ([]dirgate.MembershipWrite, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []dirgate.MembershipWrite
	for _, w := range j.w {
		if w.Group == group {
			out = append(out, w)
		}
	}
	return out, nil
}

func guids(objs []dirgate.Object) map[string]bool {
	out := map[string]bool{}
	for _, o := range objs {
		out[o.GUID] = true
	}
	return out
}

// TestWritesOverlaidAfterFailover: a removal and an addition made on DC1, which
// DC2 has not received, still show in listings read from DC2 after DC1 stops, on
// this replica and on another sharing the journal; once DC2's answer agrees (it
// replicated), a later direct change on DC2 shows.
func TestWritesOverlaidAfterFailover(t *testing.T) {
	j := &memJournal{}
	a, o1, o2 := twoDCs(t, Config{Journal: j}, nil)
	b, _, _ := twoDCs(t, Config{Journal: j}, nil)
	// b's fakes are other objects: point b's servers at the same fake DCs as a's.
	for i, s := range b.servers() {
		s.pool = newPool(4, time.Minute, []*fakeServer{o1.srv, o2.srv}[i].dial)
	}
	g1, alice, bob := byGUID(t, a, o1.g1.guid), byGUID(t, a, o1.alice.guid), byGUID(t, a, o1.bob.guid)
	if err := a.RemoveMember(context.Background(), g1, alice); err != nil {
		t.Fatal(err)
	}
	if err := a.AddMember(context.Background(), g1, bob); err != nil {
		t.Fatal(err)
	}
	if indexFold(o2.g1.member, o2.alice.dn) < 0 {
		t.Fatal("the fake DC2 received the write: the test needs it not to")
	}
	o1.srv.refuse.Store(true)
	for _, d := range []*Directory{a, b} {
		d.servers()[0].pool.flushIdle()
		members, err := d.Members(context.Background(), g1, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := guids(members)
		if got[alice.GUID] || !got[bob.GUID] {
			t.Errorf("listing from DC2 contradicts the writes made on DC1: alice %v, bob %v", got[alice.GUID], got[bob.GUID])
		}
	}
	// DC2 replicates the removal, then someone adds alice back directly on DC2.
	o2.srv.mu.Lock()
	o2.g1.member = slicesDelete(o2.g1.member, o2.alice.dn)
	o2.srv.mu.Unlock()
	if members, _ := a.Members(context.Background(), g1, nil); guids(members)[alice.GUID] {
		t.Fatal("alice listed while DC2 agrees she was removed")
	}
	o2.srv.mu.Lock()
	o2.g1.member = append(o2.g1.member, o2.alice.dn)
	o2.srv.mu.Unlock()
	if members, _ := a.Members(context.Background(), g1, nil); !guids(members)[alice.GUID] {
		t.Error("a change made on DC2 after it held the write is hidden by the overlay")
	}
}

// TestNoOverlayWithOneDC: one DC remembers nothing.
func TestNoOverlayWithOneDC(t *testing.T) {
	o := newOrg()
	j := &memJournal{}
	d := o.dir(t, Config{Journal: j})
	if err := d.RemoveMember(context.Background(), byGUID(t, d, o.g1.guid), byGUID(t, d, o.alice.guid)); err != nil {
		t.Fatal(err)
	}
	if len(j.w) != 0 {
		t.Errorf("one DC recorded %d writes", len(j.w))
	}
}

func slicesDelete(list []string, v string) []string {
	out := list[:0]
	for _, x := range list {
		if x != v {
			out = append(out, x)
		}
	}
	return out
}

// TestNoAttemptOutlivesItsCall: a call that ends by its deadline while an attempt
// still runs waits for that attempt, whose function may write what the caller reads
// (the race detector sees it otherwise).
func TestNoAttemptOutlivesItsCall(t *testing.T) {
	o := newOrg()
	d := o.dir(t, Config{})
	o.srv.hang.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	n := 0
	err := d.do(ctx, true, func(ctx context.Context, c conn, _ int) error {
		err := search(ctx, c, query{base: "", scope: goldap.ScopeBaseObject, filter: "(objectClass=*)"}, func(*goldap.Entry) error { return nil })
		time.Sleep(20 * time.Millisecond)
		n++
		return err
	})
	n++
	if err == nil || n != 2 {
		t.Errorf("err %v, n %d", err, n)
	}
}

// TestNotFoundCountsAsOK: a look-up of a DN that does not exist counts as the
// DC's success, like a look-up of an existing object: dirgate answers a caller the
// same for an object hidden from it and one that does not exist, and
// dirgate_ldap_server_requests_total must not tell them apart.
func TestNotFoundCountsAsOK(t *testing.T) {
	d, o1, _ := twoDCs(t, Config{}, nil)
	byGUID(t, d, o1.g1.guid)
	s := d.servers()[0]
	ok, answer := s.calls.ok.Load(), s.calls.answer.Load()
	_, err := d.Lookup(context.Background(), dirgate.MustParseIdentifier("CN=Nobody Here,"+o1.srv.domain), nil)
	if dirgate.ErrorCode(err) != dirgate.ENOTFOUND {
		t.Fatalf("look-up of an unknown DN = %v, want notFound", err)
	}
	if got := s.calls.answer.Load() - answer; got != 0 {
		t.Errorf("the unknown DN counted %d answer(s), want 0", got)
	}
	if got := s.calls.ok.Load() - ok; got != 1 {
		t.Errorf("the unknown DN counted %d ok, want 1", got)
	}
}

// failingJournal is a journal whose Redis is unreachable until ok is set.
type failingJournal struct {
	memJournal
	ok      atomic.Bool
	records atomic.Int32
}

func (j *failingJournal) Record(ctx context.Context, w dirgate.MembershipWrite, d time.Duration) error {
	j.records.Add(1)
	if !j.ok.Load() {
		return errors.New("redis: connection refused")
	}
	return j.memJournal.Record(ctx, w, d)
}

func (j *failingJournal) Recent(ctx context.Context, group string) ([]dirgate.MembershipWrite, error) {
	if !j.ok.Load() {
		return nil, errors.New("redis: connection refused")
	}
	return j.memJournal.Recent(ctx, group)
}

// TestUnreadableJournalFailsClosed: while the other replicas' writes cannot be read, a
// listing read from the first DC is served (writes go there), and one read from
// another DC, which may lack a write another replica made, answers 503 rather than
// contradict it; once the journal reads again, the listing is served.
func TestUnreadableJournalFailsClosed(t *testing.T) {
	j := &failingJournal{}
	d, o1, _ := twoDCs(t, Config{Journal: j}, nil)
	g1 := byGUID(t, d, o1.g1.guid)
	if _, err := d.Members(context.Background(), g1, nil); err != nil {
		t.Fatalf("listing from the first DC with the journal unreadable: %v", err)
	}
	o1.srv.refuse.Store(true)
	d.servers()[0].pool.flushIdle()
	_, err := d.Members(context.Background(), g1, nil)
	if dirgate.ErrorCode(err) != dirgate.EUNAVAILABLE {
		t.Fatalf("listing from DC2 with the journal unreadable = %v, want unavailable", err)
	}
	j.ok.Store(true)
	if _, err := d.Members(context.Background(), g1, nil); err != nil {
		t.Errorf("listing from DC2 with the journal readable again: %v", err)
	}
}

// TestUnsharedWriteRecordedLater: a write waits for Redis to take it; one Redis does
// not take within shareWait answers unavailable (applied, but other replicas could
// contradict it) and is shared once Redis takes writes again.
func TestUnsharedWriteRecordedLater(t *testing.T) {
	wait := shareWait
	shareWait = 300 * time.Millisecond
	t.Cleanup(func() { shareWait = wait })
	j := &failingJournal{}
	d, o1, _ := twoDCs(t, Config{Journal: j}, nil)
	d.now = time.Now
	g1, alice, bob := byGUID(t, d, o1.g1.guid), byGUID(t, d, o1.alice.guid), byGUID(t, d, o1.bob.guid)
	err := d.RemoveMember(context.Background(), g1, alice)
	if dirgate.ErrorCode(err) != dirgate.EUNAVAILABLE {
		t.Fatalf("a removal Redis did not take = %v, want unavailable", err)
	}
	if indexFold(o1.g1.member, o1.alice.dn) >= 0 {
		t.Fatal("the removal was not applied")
	}
	j.ok.Store(true)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if ws, _ := j.Recent(context.Background(), o1.g1.guid); len(ws) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the write was not shared once Redis took writes again (%d attempts)", j.records.Load())
		}
	}
	// Redis back within the wait: the write is answered once it is shared.
	j.ok.Store(false)
	go func() { time.Sleep(100 * time.Millisecond); j.ok.Store(true) }()
	if err := d.AddMember(context.Background(), g1, bob); err != nil {
		t.Fatalf("an addition Redis took within the wait: %v", err)
	}
	if ws, _ := j.Recent(context.Background(), o1.g1.guid); len(ws) != 2 {
		t.Errorf("the journal holds %d writes, want 2", len(ws))
	}
}

// TestSilentPooledConnectionRetriedFresh: a read whose pooled connection to the first
// DC fell silent (dropped by something between, the DC itself fine), while the other
// DC is silent too, is tried on a new connection to the first DC rather than waiting
// for the request's deadline.
func TestSilentPooledConnectionRetriedFresh(t *testing.T) {
	d, o1, o2 := twoDCs(t, Config{AttemptTimeout: 150 * time.Millisecond, RequestTimeout: 10 * time.Second}, nil)
	g1 := byGUID(t, d, o1.g1.guid) // DC1's pool holds a connection
	o1.srv.hangDialled.Store(o1.srv.dials.Load())
	o2.srv.hang.Store(true)
	start := time.Now()
	members, err := d.Members(context.Background(), g1, nil)
	if err != nil || len(members) == 0 {
		t.Fatalf("members with DC1's pooled connection and DC2 silent = %d, %v", len(members), err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("the read took %v; AttemptTimeout is 150ms", took)
	}
}

// TestHealthCheckClosesBreaker: a DC whose breaker opened while it was down takes
// calls again once it passes its health check, without waiting out the breaker's open
// timeout: with the other DC's breaker open too, every call was refused meanwhile.
func TestHealthCheckClosesBreaker(t *testing.T) {
	brks := map[string]*fakeBreaker{}
	var mu sync.Mutex
	d, o1, _ := twoDCs(t, Config{}, func(s string) Breaker {
		mu.Lock()
		defer mu.Unlock()
		brks[s] = &fakeBreaker{}
		return brks[s]
	})
	g1 := byGUID(t, d, o1.g1.guid)
	s1 := d.servers()[0]
	o1.srv.refuse.Store(true) // the check that starts when it is marked down fails
	d.markDown(s1, errors.New("killed"))
	waitProbed(s1)
	o1.srv.refuse.Store(false)
	brks["ldaps://dc1:636"].setOpen(true)
	brks["ldaps://dc2:636"].setOpen(true)
	waitProbed(s1)
	d.probe(context.Background(), s1)
	if st := d.Servers()[0]; !st.Up || st.BreakerOpen {
		t.Fatalf("DC1 after passing its health check: %+v", st)
	}
	if _, err := d.Members(context.Background(), g1, nil); err != nil {
		t.Errorf("a listing after DC1 passed its health check: %v", err)
	}
	if brks["ldaps://dc1:636"].resets != 1 || brks["ldaps://dc2:636"].resets != 0 {
		t.Errorf("resets: DC1 %d (want 1), DC2 %d (want 0)", brks["ldaps://dc1:636"].resets, brks["ldaps://dc2:636"].resets)
	}
}

// TestSilentPooledConnectionsDoNotStarveCalls: every connection pooled for the only
// DC left fell silent at once (a NAT or relay between that lost them: the chaos
// suite's delay-dc heal does this), and more reads arrive than the pool has
// connections. Each read that takes a silent connection hedges on a new one to the
// same DC; the silent attempts give their slots back and the other idle connections
// are dropped, so no read waits for a slot until its deadline.
func TestSilentPooledConnectionsDoNotStarveCalls(t *testing.T) {
	d, o1, o2 := twoDCs(t, Config{PoolSize: 2, AttemptTimeout: 100 * time.Millisecond, RequestTimeout: 3 * time.Second}, nil)
	o1.srv.refuse.Store(true)
	s2 := d.servers()[1]
	d.markDown(d.servers()[0], errors.New("killed"))
	ctx := context.Background()
	var held []*pooledConn
	for range 2 {
		pc, err := s2.pool.get(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, pc)
	}
	for _, pc := range held {
		s2.pool.put(pc)
	}
	o2.srv.hangDialled.Store(o2.srv.dials.Load()) // both pooled connections are silent
	id := dirgate.MustParseIdentifier(o2.g1.guid)
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for range 6 {
		wg.Go(func() {
			_, err := d.Lookup(ctx, id, nil)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("a read with the pool's connections silent: %v", err)
		}
	}
	// The silent attempts end (their calls cancelled them) just after the calls.
	for deadline := time.Now().Add(5 * time.Second); s2.pool.detached.Load() != 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if n := s2.pool.detached.Load(); n != 0 {
		t.Errorf("%d connections still detached after every read ended", n)
	}
}

// TestReadTriesEveryDCAgainAfterAnInstant: with DC1 down, DC2 refuses one
// connection (its service restarting, a relay between replaced): the read does not
// answer with that refusal while the request has time left, but tries the DCs once
// more a moment later, and DC2 answers.
func TestReadTriesEveryDCAgainAfterAnInstant(t *testing.T) {
	d, o1, o2 := twoDCs(t, Config{RequestTimeout: 5 * time.Second}, nil)
	o1.srv.refuse.Store(true)
	d.markDown(d.servers()[0], errors.New("killed"))
	d.servers()[1].pool.flushIdle()
	o2.srv.refuseNext.Store(1)
	if _, err := d.Lookup(context.Background(), dirgate.MustParseIdentifier(o2.g1.guid), nil); err != nil {
		t.Fatalf("a read while the only DC up refused one connection: %v", err)
	}
	// A write is not sent twice: it answers the refusal.
	g := byGUID(t, d, o2.g1.guid)
	u := byGUID(t, d, o2.alice.guid)
	o2.srv.refuseNext.Store(1)
	d.servers()[1].pool.flushIdle()
	if err := d.RemoveMember(context.Background(), g, u); dirgate.ErrorCode(err) != dirgate.EUPSTREAM {
		t.Errorf("a write whose only DC refused its connection = %v, want the refusal (%s)", err, dirgate.EUPSTREAM)
	}
}

// TestEveryBreakerOpenWaitsForAHealthCheck: every DC's breaker is open (a moment's
// failure that cut every connection at once) while a health check of DC2 is under
// way: a read waits for it, up to the attempt timeout, and goes to DC2 once it
// passes, instead of answering 503 at once.
func TestEveryBreakerOpenWaitsForAHealthCheck(t *testing.T) {
	brks := map[string]*fakeBreaker{}
	var mu sync.Mutex
	d, _, o2 := twoDCs(t, Config{AttemptTimeout: 2 * time.Second}, func(s string) Breaker {
		mu.Lock()
		defer mu.Unlock()
		brks[s] = &fakeBreaker{}
		return brks[s]
	})
	s2 := d.servers()[1]
	brks["ldaps://dc1:636"].setOpen(true)
	brks["ldaps://dc2:636"].setOpen(true)
	s2.mu.Lock()
	s2.probing = true
	s2.mu.Unlock()
	go func() {
		time.Sleep(100 * time.Millisecond)
		d.markUp(s2) // the check passed
		s2.mu.Lock()
		s2.probing = false
		s2.mu.Unlock()
	}()
	if _, err := d.Lookup(context.Background(), dirgate.MustParseIdentifier(o2.g1.guid), nil); err != nil {
		t.Fatalf("a read while DC2's health check was under way: %v", err)
	}
	// No check under way: 503 at once, as before.
	brks["ldaps://dc1:636"].setOpen(true)
	brks["ldaps://dc2:636"].setOpen(true)
	if _, err := d.Lookup(context.Background(), dirgate.MustParseIdentifier(o2.g1.guid), nil); dirgate.ErrorCode(err) != dirgate.EUNAVAILABLE {
		t.Errorf("every breaker open and no check under way: %v, want %s", err, dirgate.EUNAVAILABLE)
	}
}

// TestSilentTwiceOnTheLastDC: with DC1 down, DC2's pooled connection and the first
// new one both fall silent (their path lost while the second was being made): the
// read tries a further new connection, which answers, rather than waiting for its
// deadline once the plan ran out.
func TestSilentTwiceOnTheLastDC(t *testing.T) {
	d, o1, o2 := twoDCs(t, Config{AttemptTimeout: 100 * time.Millisecond, RequestTimeout: 3 * time.Second}, nil)
	g := byGUID(t, d, o2.g1.guid) // DC1 answers; now DC2's pool needs a connection
	o1.srv.refuse.Store(true)
	d.markDown(d.servers()[0], errors.New("killed"))
	if _, err := d.Members(context.Background(), g, nil); err != nil {
		t.Fatal(err)
	}
	o2.srv.hangDialled.Store(o2.srv.dials.Load() + 1) // the pooled one and the next
	if _, err := d.Members(context.Background(), g, nil); err != nil {
		t.Fatalf("a read whose pooled and first new connections to the last DC fell silent: %v", err)
	}
}

// TestNoOtherDCChecksEverySecond: a DC that keeps failing its health check while
// another serves is checked after a growing backoff; while no other DC takes calls,
// every second.
func TestNoOtherDCChecksEverySecond(t *testing.T) {
	d, o1, o2 := twoDCs(t, Config{HealthInterval: time.Minute}, nil)
	s1, s2 := d.servers()[0], d.servers()[1]
	o1.srv.refuse.Store(true)
	ctx := context.Background()
	backoff := func() time.Duration {
		s1.mu.Lock()
		defer s1.mu.Unlock()
		return s1.backoff
	}
	// probe checks s1 once more in the background when it marks it down: wait for
	// that check, then check by hand.
	settle := func() { waitProbed(s1) }
	waitProbed(s1)
	d.probe(ctx, s1)
	settle()
	waitProbed(s1)
	d.probe(ctx, s1)
	settle()
	if b := backoff(); b <= minBackoff {
		t.Errorf("backoff with DC2 serving: %v, want more than %v", b, minBackoff)
	}
	o2.srv.refuse.Store(true)
	d.markDown(s2, errors.New("killed"))
	waitProbed(s1)
	d.probe(ctx, s1)
	settle()
	if b := backoff(); b != minBackoff {
		t.Errorf("backoff with no DC serving: %v, want %v", b, minBackoff)
	}
}

// TestSilentPooledConnectionOfAnUnhedgedCall: a call that is never sent to two DCs
// at once (the change feed's read, a write) meets a pooled connection that fell
// silent while its DC answers a new one (a NAT between lost the connection): once
// the DC passes its health check, the connection is given up for a new one to the
// same DC, rather than waited on until the request's deadline as a slow DC is.
func TestSilentPooledConnectionOfAnUnhedgedCall(t *testing.T) {
	o := newOrg()
	d := o.dir(t, Config{AttemptTimeout: 100 * time.Millisecond, RequestTimeout: 3 * time.Second})
	read := func() error {
		return d.do(context.Background(), true, func(ctx context.Context, c conn, _ int) error {
			return search(ctx, c, query{base: "", scope: goldap.ScopeBaseObject, filter: "(objectClass=*)",
				attrs: []string{"dsServiceName"}}, func(*goldap.Entry) error { return nil })
		})
	}
	if err := read(); err != nil { // a pooled connection
		t.Fatal(err)
	}
	o.srv.hangDialled.Store(o.srv.dials.Load())
	if err := read(); err != nil {
		t.Fatalf("an unhedged read on a silent pooled connection: %v", err)
	}
	if !d.Servers()[0].Up {
		t.Error("the DC was marked down for its connection's silence")
	}
}
