package ldap

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/ldapentry"
	goldap "github.com/go-ldap/ldap/v3"
)

// fakeDCs are several DCs of one domain as the change reader sees them: each its
// own dsServiceName, invocationId, highestCommittedUSN and objects with a
// uSNChanged of its own. A connection reaches the DC that cur names when it is
// dialled, and stays on it.
type fakeDCs struct {
	mu  sync.Mutex
	dcs map[string]*fakeChangeDC
	cur string
	// failover, when set, makes the next change search answer part of its
	// entries, then fail as a cut connection does, and new connections reach
	// failover from then on: a DC lost in the middle of a read.
	failover string
	searches []string // "<dc>|<base>|<filter>"
	conns    []*fakeDCConn
}

type fakeChangeDC struct {
	name       string // the NTDS Settings DN, as dsServiceName
	invocation string
	usn        uint64
	objs       []fakeChanged
}

type fakeChanged struct {
	guid string
	usn  uint64
}

const fakeDomain = "DC=corp,DC=example,DC=com"

func ntds(dc string) string {
	return "CN=NTDS Settings,CN=" + dc + ",CN=Servers,CN=Default-First-Site-Name,CN=Sites,CN=Configuration," + fakeDomain
}

func (s *fakeDCs) add(dc, invocation string, usn uint64, objs ...fakeChanged) *fakeChangeDC {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dcs == nil {
		s.dcs = map[string]*fakeChangeDC{}
	}
	d := &fakeChangeDC{name: ntds(dc), invocation: invocation, usn: usn, objs: objs}
	s.dcs[dc] = d
	return d
}

// use makes dc the one reached, and closes the connections to the others, as the
// adapter's routing leaves a DC it no longer prefers.
func (s *fakeDCs) use(dc string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cur = dc
	for _, c := range s.conns {
		if c.dc != s.dcs[dc] {
			c.closed.Store(true)
		}
	}
}

func (s *fakeDCs) dial(context.Context) (conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &fakeDCConn{s: s, dc: s.dcs[s.cur]}
	s.conns = append(s.conns, c)
	return c, nil
}

type fakeDCConn struct {
	s      *fakeDCs
	dc     *fakeChangeDC
	closed atomic.Bool
}

func (c *fakeDCConn) IsClosing() bool                    { return c.closed.Load() }
func (c *fakeDCConn) Close() error                       { c.closed.Store(true); return nil }
func (c *fakeDCConn) Modify(*goldap.ModifyRequest) error { return errors.New("fake: read only") }

var errCut = goldap.NewError(goldap.ErrorNetwork, errors.New("ldap: response channel closed"))

func (c *fakeDCConn) SearchAsync(_ context.Context, req *goldap.SearchRequest, _ int) goldap.Response {
	if c.closed.Load() {
		return &fakeResponse{err: errCut}
	}
	s, dc := c.s, c.dc
	s.mu.Lock()
	defer s.mu.Unlock()
	s.searches = append(s.searches, dc.name+"|"+req.BaseDN+"|"+req.Filter)
	one := func(attrs map[string][]string, raw map[string][][]byte) goldap.Response {
		return &fakeResponse{items: []fakeItem{{entry: entryWith(attrs, raw)}}}
	}
	switch {
	case req.BaseDN == "" && req.Scope == goldap.ScopeBaseObject:
		return one(map[string][]string{"highestCommittedUSN": {fmt.Sprint(dc.usn)}, "dsServiceName": {dc.name},
			"defaultNamingContext": {fakeDomain}, "configurationNamingContext": {"CN=Configuration," + fakeDomain}}, nil)
	case req.BaseDN == dc.name:
		b, _ := ldapentry.GUIDToBytes(dc.invocation)
		return one(nil, map[string][][]byte{"invocationId": {b}})
	case strings.HasPrefix(req.BaseDN, "CN=Directory Service,"):
		return one(map[string][]string{"tombstoneLifetime": {"180"}}, nil)
	}
	var lo, hi uint64
	if _, err := fmt.Sscanf(req.Filter, "(&(uSNChanged>=%d)(uSNChanged<=%d))", &lo, &hi); err != nil || req.BaseDN != fakeDomain {
		return &fakeResponse{err: goldap.NewError(goldap.LDAPResultFilterError, fmt.Errorf("fake: unsupported search %q", req.Filter))}
	}
	r := &fakeResponse{}
	for _, o := range dc.objs {
		if o.usn >= lo && o.usn <= hi {
			b, _ := ldapentry.GUIDToBytes(o.guid)
			r.items = append(r.items, fakeItem{entry: entryWith(map[string][]string{"objectClass": {"top", "group"}},
				map[string][][]byte{"objectGUID": {b}})})
		}
	}
	if s.failover != "" {
		// Part of the answer, then the connection is cut and the DC is gone.
		r.items, r.err = r.items[:len(r.items)/2], errCut
		c.closed.Store(true)
		s.cur, s.failover = s.failover, ""
	}
	return r
}

func (s *fakeDCs) changeSearches() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, q := range s.searches {
		if strings.Contains(q, "uSNChanged") {
			out = append(out, q)
		}
	}
	return out
}

var fakeNow = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newFakeDCDirectory(t *testing.T, s *fakeDCs) *Directory {
	t.Helper()
	cfg := Config{BaseDN: fakeDomain}.withDefaults()
	// One server whose address leads to whichever DC the test routes it to.
	d := newDirectory(cfg, dirgate.MustParseDN(cfg.BaseDN), []target{{url: "ldaps://dc:636", addr: "dc:636", implicitTLS: true}},
		func(t target) *server { return &server{t: t, pool: newPool(cfg.PoolSize, cfg.IdleTimeout, s.dial)} })
	d.now = func() time.Time { return fakeNow }
	t.Cleanup(d.Close)
	return d
}

func guidN(n int) string { return fmt.Sprintf("00000000-0000-0000-0000-%012d", n) }

func changedGUIDs(b dirgate.ChangeBatch) []string {
	var out []string
	for _, ch := range b.Changes {
		out = append(out, ch.GUID)
	}
	return out
}

func markSources(p dirgate.ChangePosition) []string {
	var out []string
	for _, m := range p.Marks {
		out = append(out, m.Source)
	}
	return out
}

const (
	invA  = "aaaaaaaa-0000-0000-0000-000000000001"
	invB  = "bbbbbbbb-0000-0000-0000-000000000001"
	invB2 = "bbbbbbbb-0000-0000-0000-000000000002"
)

var (
	srcA = ntds("DCA") + "|" + invA
	srcB = ntds("DCB") + "|" + invB
)

// TestReadChangesAcrossDCs: the change reader keeps a position per DC. Back on a DC
// it read before, it continues from that DC's mark (its USNs, not the other DC's);
// a DC it has no mark for, or whose mark names another database, is a resync; the
// position it returns always names the DC that answered and keeps the one it left
// as a mark.
func TestReadChangesAcrossDCs(t *testing.T) {
	ctx := context.Background()
	s := &fakeDCs{}
	a := s.add("DCA", invA, 100, fakeChanged{guidN(1), 90}, fakeChanged{guidN(2), 100})
	b := s.add("DCB", invB, 5000, fakeChanged{guidN(3), 4000}, fakeChanged{guidN(4), 4990})
	s.use("DCA")
	d := newFakeDCDirectory(t, s)
	hourAgo := fakeNow.Add(-time.Hour)

	// The same DC: from the position, the marks carried.
	posA := dirgate.ChangePosition{Source: srcA, USN: 95, Time: hourAgo,
		Marks: []dirgate.ChangeMark{{Source: srcB, USN: 4500, Time: hourAgo}}}
	got, err := d.ReadChanges(ctx, posA, 100)
	if err != nil || got.Resync != "" || fmt.Sprint(changedGUIDs(got)) != fmt.Sprint([]string{guidN(2)}) {
		t.Fatalf("same DC: %+v %v", got, err)
	}
	if got.Position.Source != srcA || got.Position.USN != 100 || fmt.Sprint(markSources(got.Position)) != fmt.Sprint([]string{srcB}) {
		t.Fatalf("same DC: position %+v", got.Position)
	}
	onA := got.Position

	// Another DC with a mark: its changes since the mark (4500), no resync; the
	// position is B's, with A's as a mark.
	s.use("DCB")
	s.searches = nil
	got, err = d.ReadChanges(ctx, onA, 100)
	if err != nil || got.Resync != "" || fmt.Sprint(changedGUIDs(got)) != fmt.Sprint([]string{guidN(4)}) {
		t.Fatalf("to B: %+v %v", got, err)
	}
	if got.Position.Source != srcB || got.Position.USN != 5000 || fmt.Sprint(markSources(got.Position)) != fmt.Sprint([]string{srcA}) ||
		got.Position.Marks[0].USN != 100 {
		t.Fatalf("to B: position %+v", got.Position)
	}
	if q := s.changeSearches(); len(q) != 1 || !strings.HasPrefix(q[0], ntds("DCB")+"|") || !strings.Contains(q[0], "(uSNChanged>=4501)") {
		t.Fatalf("to B: searches %q", q)
	}
	onB := got.Position

	// Back to A, which moved on meanwhile: from A's mark.
	s.mu.Lock()
	a.usn, a.objs = 120, append(a.objs, fakeChanged{guidN(5), 110})
	s.mu.Unlock()
	s.use("DCA")
	got, err = d.ReadChanges(ctx, onB, 100)
	if err != nil || got.Resync != "" || fmt.Sprint(changedGUIDs(got)) != fmt.Sprint([]string{guidN(5)}) {
		t.Fatalf("back to A: %+v %v", got, err)
	}
	if got.Position.Source != srcA || got.Position.USN != 120 || fmt.Sprint(markSources(got.Position)) != fmt.Sprint([]string{srcB}) ||
		got.Position.Marks[0].USN != 5000 {
		t.Fatalf("back to A: position %+v", got.Position)
	}

	// B's database restored (a new invocationId): its mark is no use.
	s.mu.Lock()
	b.invocation = invB2
	s.mu.Unlock()
	s.use("DCB")
	got, err = d.ReadChanges(ctx, onA, 100)
	if err != nil || got.Resync != dirgate.ResyncRestored || len(got.Changes) != 0 {
		t.Fatalf("restored B: %+v %v", got, err)
	}
	if got.Position.Source != ntds("DCB")+"|"+invB2 || fmt.Sprint(markSources(got.Position)) != fmt.Sprint([]string{srcA}) {
		t.Fatalf("restored B: position %+v", got.Position)
	}

	// No mark for the DC: a resync, and A's position kept to return to.
	noMark := onA
	noMark.Marks = nil
	got, err = d.ReadChanges(ctx, noMark, 100)
	if err != nil || got.Resync != dirgate.ResyncServerChanged || len(got.Changes) != 0 {
		t.Fatalf("no mark: %+v %v", got, err)
	}
	if got.Position.Source != ntds("DCB")+"|"+invB2 || fmt.Sprint(markSources(got.Position)) != fmt.Sprint([]string{srcA}) {
		t.Fatalf("no mark: position %+v", got.Position)
	}

	// A mark's checks are the position's: its USN above the DC's, or its age over
	// the tombstone lifetime (180 days here), is a resync.
	for _, c := range []struct {
		mark dirgate.ChangeMark
		want string
	}{
		{dirgate.ChangeMark{Source: ntds("DCB") + "|" + invB2, USN: 6000, Time: hourAgo}, dirgate.ResyncUSNBackwards},
		{dirgate.ChangeMark{Source: ntds("DCB") + "|" + invB2, USN: 10, Time: fakeNow.Add(-181 * 24 * time.Hour)}, dirgate.ResyncGap},
		{dirgate.ChangeMark{Source: ntds("DCB") + "|" + invB2, USN: 10, Time: fakeNow.Add(-179 * 24 * time.Hour)}, ""},
	} {
		p := onA
		p.Marks = []dirgate.ChangeMark{c.mark}
		got, err := d.ReadChanges(ctx, p, 100)
		if err != nil || got.Resync != c.want || got.Position.Source != ntds("DCB")+"|"+invB2 {
			t.Errorf("mark %+v: %q (%s), %v; want %q", c.mark, got.Resync, got.Detail, err, c.want)
		}
	}
}

// TestReadChangesMarksBounded: moving to a DC without a mark keeps the position
// left as the newest mark, and at most dirgate.MaxChangeMarks of them.
func TestReadChangesMarksBounded(t *testing.T) {
	s := &fakeDCs{}
	s.add("DCA", invA, 100)
	s.use("DCA")
	d := newFakeDCDirectory(t, s)
	p := dirgate.ChangePosition{Source: srcB, USN: 7, Time: fakeNow}
	for i := range dirgate.MaxChangeMarks {
		p.Marks = append(p.Marks, dirgate.ChangeMark{Source: ntds(fmt.Sprintf("DC%02d", i)) + "|" + invB, USN: 1, Time: fakeNow})
	}
	got, err := d.ReadChanges(context.Background(), p, 100)
	if err != nil || got.Resync != dirgate.ResyncServerChanged {
		t.Fatalf("%+v %v", got, err)
	}
	m := markSources(got.Position)
	if len(m) != dirgate.MaxChangeMarks || m[len(m)-1] != srcB || slices.Contains(m, p.Marks[0].Source) || m[0] != p.Marks[1].Source {
		t.Fatalf("marks: %q", m)
	}
}

// TestReadChangesFailoverMidRead: a DC lost in the middle of its change search
// (part of its answer read) makes the read start over on the next DC: the batch
// holds only that DC's changes, from its own mark, with its position.
func TestReadChangesFailoverMidRead(t *testing.T) {
	s := &fakeDCs{}
	s.add("DCA", invA, 100, fakeChanged{guidN(1), 96}, fakeChanged{guidN(2), 97}, fakeChanged{guidN(6), 98}, fakeChanged{guidN(7), 99})
	s.add("DCB", invB, 5000, fakeChanged{guidN(3), 4000}, fakeChanged{guidN(4), 4990})
	s.use("DCA")
	s.failover = "DCB"
	d := newFakeDCDirectory(t, s)
	pos := dirgate.ChangePosition{Source: srcA, USN: 95, Time: fakeNow.Add(-time.Minute),
		Marks: []dirgate.ChangeMark{{Source: srcB, USN: 4500, Time: fakeNow.Add(-time.Hour)}}}
	got, err := d.ReadChanges(context.Background(), pos, 100)
	if err != nil || got.Resync != "" {
		t.Fatalf("%+v %v", got, err)
	}
	if fmt.Sprint(changedGUIDs(got)) != fmt.Sprint([]string{guidN(4)}) || got.Position.Source != srcB || got.Position.USN != 5000 {
		t.Fatalf("changes %q, position %+v: want only B's since its mark", changedGUIDs(got), got.Position)
	}
	if fmt.Sprint(markSources(got.Position)) != fmt.Sprint([]string{srcA}) || got.Position.Marks[0].USN != 95 {
		t.Fatalf("marks %+v: A's mark must stay where A's answer was not taken", got.Position.Marks)
	}
	if q := s.changeSearches(); len(q) != 2 || !strings.HasPrefix(q[0], ntds("DCA")) || !strings.HasPrefix(q[1], ntds("DCB")) {
		t.Fatalf("searches %q", q)
	}
}
