package changefeed

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/cache"
	"github.com/dirgate/dirgate/internal/seal"
	"github.com/dirgate/dirgate/redisconn"
	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/test/harness/redistest"
)

// fakeSource is a directory's change log: each change gets the next USN, and a read
// returns every change after the position it is given.
type fakeSource struct {
	mu     sync.Mutex
	usn    uint64
	log    []dirgate.Change // log[i] has USN i+1
	resync string
	asked  []dirgate.ChangePosition
	fail   error
}

func (s *fakeSource) ReadChanges(ctx context.Context, pos dirgate.ChangePosition, max int) (dirgate.ChangeBatch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = append(s.asked, pos)
	if s.fail != nil {
		return dirgate.ChangeBatch{}, s.fail
	}
	b := dirgate.ChangeBatch{Position: dirgate.ChangePosition{Source: "fake", USN: s.usn, Time: time.Now()}}
	switch {
	case pos.Source == "":
		b.Resync = dirgate.ResyncNoPosition
	case s.resync != "":
		b.Resync, s.resync = s.resync, ""
	case pos.USN < s.usn:
		b.Changes = append(b.Changes, s.log[pos.USN:]...)
		if len(b.Changes) > max {
			b.Changes, b.Resync = nil, dirgate.ResyncBurst
		}
	}
	return b, nil
}

func (s *fakeSource) change(ch dirgate.Change) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.usn++
	s.log = append(s.log, ch)
}

func (s *fakeSource) setResync(reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resync = reason
}

func (s *fakeSource) lastAsked() dirgate.ChangePosition {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.asked[len(s.asked)-1]
}

// startFeed starts a feed of in's cache, as cmd/dirgate does: on its Redis client,
// with its key prefix, secret, timeouts and logger.
func startFeed(t *testing.T, in instance, src dirgate.ChangeSource, cfg Config) *Feed {
	t.Helper()
	cfg.Source, cfg.Cache = src, in.c
	cfg.Redis, cfg.KeyPrefix, cfg.Secret = in.cfg.Redis, in.cfg.KeyPrefix, in.cfg.Secret
	cfg.Timeout, cfg.RetryInterval = in.cfg.Timeout, in.cfg.RetryInterval
	if cfg.Logger = in.cfg.Logger; cfg.Logger == nil {
		cfg.Logger = quiet
	}
	if cfg.Interval == 0 {
		cfg.Interval = 10 * time.Millisecond
	}
	if cfg.Lease == 0 {
		cfg.Lease = 300 * time.Millisecond
	}
	f, err := Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// served lists group and returns how it was served.
func served(t *testing.T, in instance, group string, opts dirgate.ListOptions) dirgate.CacheStatus {
	t.Helper()
	_, st := in.list(t, group, opts)
	return st
}

var nested = dirgate.ListOptions{IncludeIndirect: true}

// TestFeedInvalidatesExactly: a changed object invalidates the listings of the groups
// it belongs to and of their ancestors, on every instance, and nothing else.
func TestFeedInvalidatesExactly(t *testing.T) {
	backends := append([]struct {
		name string
		cfg  func(t *testing.T) cache.Config
	}{{"in-process", func(*testing.T) cache.Config { return cache.Config{} }}}, sharedBackends()...)
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			dir := demo(t)
			cfg := b.cfg(t)
			a := newInstance(t, dir, cfg)
			ins := []instance{a}
			if cfg.Redis != nil {
				ins = append(ins, newInstance(t, dir, cfg))
			}
			src := &fakeSource{}
			feeds := make([]*Feed, len(ins))
			for i, in := range ins {
				feeds[i] = startFeed(t, in, src, Config{})
			}
			waitFor(t, "a position", func() bool { return feeds[0].Ready(t.Context()) == nil })
			// Desktop Engineers is the innermost of the chain; Project Alpha is unrelated.
			outer, inner := fixture.ChainDNs[0], fixture.DesktopEngineersDN
			for _, in := range ins {
				for range 2 {
					served(t, in, outer, nested)
					served(t, in, inner, dirgate.ListOptions{})
					served(t, in, fixture.ProjectAlphaDN, dirgate.ListOptions{})
				}
			}
			member := memberOf(t, dir, inner)
			src.change(dirgate.Change{Kind: dirgate.ChangeObject, GUID: member.GUID, GroupsKnown: true,
				Groups: []string{object(t, dir, inner).GUID}})
			waitFor(t, "the inner group's listing to be refilled", func() bool {
				return served(t, a, inner, dirgate.ListOptions{}) == dirgate.CacheMiss
			})
			// The outermost group's nested listing recorded the inner group's token.
			if st := served(t, a, outer, nested); st != dirgate.CacheMiss {
				t.Fatalf("outer nested listing after the change: %s", st)
			}
			for _, in := range ins {
				// Refilled by the first instance, in the shared store: current everywhere.
				if st := served(t, in, inner, dirgate.ListOptions{}); st != dirgate.CacheHit {
					t.Fatalf("inner: %s", st)
				}
				if st := served(t, in, fixture.ProjectAlphaDN, dirgate.ListOptions{}); st != dirgate.CacheHit {
					t.Fatalf("an unrelated listing was invalidated: %s", st)
				}
			}
		})
	}
}

// TestFeedResyncInvalidatesEverything: a position that cannot be trusted (here an
// unparseable entry, as the LDAP source reports it) or a burst larger than a batch
// invalidates everything once, on every instance: every cached listing (direct,
// nested, with membership properties, of unrelated groups) and every identifier
// resolution kept in the first level; the feed keeps running.
func TestFeedResyncInvalidatesEverything(t *testing.T) {
	// Unrelated groups, nested and direct, with and without membership properties:
	// no change names any of them.
	listings := []struct {
		group string
		opts  dirgate.ListOptions
	}{
		{fixture.ProjectAlphaDN, dirgate.ListOptions{}},
		{fixture.ChainDNs[0], nested},
		{fixture.DesktopEngineersDN, dirgate.ListOptions{Properties: []string{"memberof"}}},
		{fixture.SalesEastDN, nested},
	}
	resolved := []string{fixture.ProjectBetaDN, fixture.AllStaffDN}
	backends := append([]struct {
		name string
		cfg  func(t *testing.T) cache.Config
	}{{"in-process", func(*testing.T) cache.Config { return cache.Config{} }}}, sharedBackends()...)
	for _, b := range backends {
		for _, reason := range []string{dirgate.ResyncUnparseable, dirgate.ResyncBurst} {
			t.Run(b.name+"/"+reason, func(t *testing.T) {
				dir := &countingDir{Directory: demo(t)}
				cfg := b.cfg(t)
				ins := []instance{newInstance(t, dir, cfg)}
				if cfg.Redis != nil {
					ins = append(ins, newInstance(t, dir, cfg))
				}
				src := &fakeSource{}
				var feeds []*Feed
				for _, in := range ins {
					feeds = append(feeds, startFeed(t, in, src, Config{MaxBatch: 3}))
				}
				for _, f := range feeds {
					waitFor(t, "a position", func() bool { return f.Ready(t.Context()) == nil })
				}
				// Each listing is checked on one instance (in turn): on a shared store, the
				// first instance to refill a listing would make it a hit for the others.
				on := func(i int) instance { return ins[i%len(ins)] }
				for i, l := range listings {
					served(t, on(i), l.group, l.opts)
					if st := served(t, on(i), l.group, l.opts); st != dirgate.CacheHit {
						t.Fatalf("%s not cached: %s", l.group, st)
					}
				}
				for _, in := range ins {
					for _, id := range resolved {
						lookup(t, in, id)
					}
				}
				before := dir.lookups.Load()
				for _, in := range ins {
					for _, id := range resolved {
						lookup(t, in, id)
					}
				}
				if dir.lookups.Load() != before {
					t.Fatal("a cached resolution reached the directory")
				}

				if reason == dirgate.ResyncBurst {
					for range 10 {
						src.change(dirgate.Change{Kind: dirgate.ChangeGroup, GUID: "0a0a0a0a-0000-0000-0000-000000000000", GroupsKnown: true})
					}
				} else {
					src.setResync(reason)
				}
				for i, l := range listings {
					waitFor(t, l.group+" invalidated", func() bool {
						return served(t, on(i), l.group, l.opts) == dirgate.CacheMiss
					})
				}
				// Each resolution is checked on one instance, for the same reason.
				for i, id := range resolved {
					n := dir.lookups.Load()
					waitFor(t, id+"'s resolution dropped", func() bool {
						lookup(t, on(i), id)
						return dir.lookups.Load() > n
					})
				}
				// Once: what was refilled is served again.
				for i, l := range listings {
					if st := served(t, on(i), l.group, l.opts); st != dirgate.CacheHit {
						t.Errorf("%s after the resync: %s, want a hit", l.group, st)
					}
				}

				// Still following: a later change is applied.
				served(t, ins[0], fixture.ProjectAlphaDN, dirgate.ListOptions{})
				src.change(dirgate.Change{Kind: dirgate.ChangeGroup, GUID: object(t, dir, fixture.ProjectAlphaDN).GUID, GroupsKnown: true})
				waitFor(t, "a later change", func() bool {
					return served(t, ins[0], fixture.ProjectAlphaDN, dirgate.ListOptions{}) == dirgate.CacheMiss
				})
			})
		}
	}
}

// lookup resolves id through in's cache, as a listing's group is resolved.
func lookup(t *testing.T, in instance, id string) {
	t.Helper()
	if _, err := in.c.Lookup(t.Context(), dirgate.MustParseIdentifier(id), nil); err != nil {
		t.Fatal(err)
	}
}

// TestFeedDropsResolutions: identifier resolutions kept in the first level are not
// checked against tokens per request; the feed drops them when their object changes.
func TestFeedDropsResolutions(t *testing.T) {
	dir := &countingDir{Directory: demo(t)}
	in := newInstance(t, dir, cache.Config{})
	src := &fakeSource{}
	f := startFeed(t, in, src, Config{})
	waitFor(t, "a position", func() bool { return f.Ready(t.Context()) == nil })
	id := dirgate.MustParseIdentifier(fixture.ProjectAlphaDN)
	o, err := in.c.Lookup(t.Context(), id, nil)
	if err != nil {
		t.Fatal(err)
	}
	before := dir.lookups.Load()
	for range 3 {
		if _, err := in.c.Lookup(t.Context(), id, nil); err != nil {
			t.Fatal(err)
		}
	}
	if dir.lookups.Load() != before {
		t.Fatal("a cached resolution reached the directory")
	}
	src.change(dirgate.Change{Kind: dirgate.ChangeGroup, GUID: o.GUID, GroupsKnown: true})
	waitFor(t, "the resolution dropped", func() bool {
		in.c.Lookup(t.Context(), id, nil)
		return dir.lookups.Load() > before
	})
}

// TestFeedOneReaderTakesOver: instances sharing Redis elect one reader; when it
// dies (its lease lapses), another takes over from the stored position, so a change made meanwhile is
// not missed; resolutions are dropped on every instance through the event stream.
func TestFeedOneReaderTakesOver(t *testing.T) {
	dir := demo(t)
	// A generous Redis timeout: this tests the hand-over, not timeouts, and the
	// default 100 ms failed under a load average of 10.
	cfg := cache.Config{Secret: sealSecret, Redis: redisClient(t, redisconn.Config{Addrs: []string{redistest.Start(t).Addr()}}), Timeout: time.Second}
	src := &fakeSource{}
	var ins []instance
	var feeds []*Feed
	var mu sync.Mutex
	events := map[int]int{}
	for i := range 3 {
		in := newInstance(t, dir, cfg)
		ins = append(ins, in)
		feeds = append(feeds, startFeed(t, in, src, Config{OnEvent: func(Event) {
			mu.Lock()
			events[i]++
			mu.Unlock()
		}}))
	}
	leaders := func() (n, idx int) {
		for i, f := range feeds {
			if f.Leader() {
				n, idx = n+1, i
			}
		}
		return n, idx
	}
	waitFor(t, "one leader", func() bool { n, _ := leaders(); return n == 1 })
	_, first := leaders()
	// The first read (no position yet) resyncs and tells every instance: only the
	// events after it count below.
	waitFor(t, "a position", func() bool { return feeds[first].Ready(t.Context()) == nil })
	mu.Lock()
	clear(events)
	mu.Unlock()
	g := object(t, dir, fixture.ProjectAlphaDN)
	src.change(dirgate.Change{Kind: dirgate.ChangeGroup, GUID: g.GUID, GroupsKnown: true})
	polls := 0
	waitFor(t, "every instance told", func() bool {
		mu.Lock()
		told := events[0] > 0 && events[1] > 0 && events[2] > 0
		mu.Unlock()
		// A follower starts reading after the stream's last event: one that began
		// after this change was published (a slow start under a loaded CI) never
		// sees it, by design. Change again until every follower has read one.
		if polls++; !told && polls%20 == 0 {
			src.change(dirgate.Change{Kind: dirgate.ChangeGroup, GUID: g.GUID, GroupsKnown: true})
		}
		return told
	})
	for _, in := range ins {
		served(t, in, fixture.ProjectAlphaDN, dirgate.ListOptions{})
	}
	// The reader dies without giving up its lease: another takes over once it lapses.
	feeds[first].cancel()
	feeds[first].wg.Wait()
	src.change(dirgate.Change{Kind: dirgate.ChangeGroup, GUID: g.GUID, GroupsKnown: true})
	waitFor(t, "another leader", func() bool {
		n := 0
		for i, f := range feeds {
			if i != first && f.Leader() {
				n++
			}
		}
		return n == 1
	})
	other := ins[(first+1)%3]
	waitFor(t, "the change made while nobody read", func() bool {
		return served(t, other, fixture.ProjectAlphaDN, dirgate.ListOptions{}) == dirgate.CacheMiss
	})
	if p := src.lastAsked(); p.Source != "fake" || p.USN < 1 {
		t.Fatalf("the new reader did not continue from the stored position: %+v", p)
	}
}

// TestFeedNewReaderReadsAtOnce: the instance that takes over from a reader that
// died reads as soon as it holds the lease, not at its next interval (an hour here,
// so that only that read can see the change): the lease is renewed and claimed
// apart from the reads.
func TestFeedNewReaderReadsAtOnce(t *testing.T) {
	dir := demo(t)
	cfg := cache.Config{Secret: sealSecret, Redis: redisClient(t, redisconn.Config{Addrs: []string{redistest.Start(t).Addr()}}), Timeout: time.Second}
	src := &fakeSource{}
	var ins []instance
	var feeds []*Feed
	for range 2 {
		in := newInstance(t, dir, cfg)
		ins = append(ins, in)
		feeds = append(feeds, startFeed(t, in, src, Config{Interval: time.Hour, Lease: 4 * time.Second}))
	}
	waitFor(t, "one leader with a position", func() bool {
		return feeds[0].Leader() != feeds[1].Leader() && (feeds[0].Ready(t.Context()) == nil || feeds[1].Ready(t.Context()) == nil)
	})
	first := 0
	if feeds[1].Leader() {
		first = 1
	}
	other := 1 - first
	served(t, ins[other], fixture.ProjectAlphaDN, dirgate.ListOptions{})
	if st := served(t, ins[other], fixture.ProjectAlphaDN, dirgate.ListOptions{}); st != dirgate.CacheHit {
		t.Fatalf("the listing is not cached: %s", st)
	}
	// The reader dies without giving up its lease.
	feeds[first].cancel()
	feeds[first].wg.Wait()
	g := object(t, dir, fixture.ProjectAlphaDN)
	src.change(dirgate.Change{Kind: dirgate.ChangeGroup, GUID: g.GUID, GroupsKnown: true})
	waitFor(t, "the new reader's first read", func() bool {
		return served(t, ins[other], fixture.ProjectAlphaDN, dirgate.ListOptions{}) == dirgate.CacheMiss
	})
	if !feeds[other].Leader() {
		t.Error("the change was seen, yet the other instance does not lead")
	}
}

func TestDecodePosition(t *testing.T) {
	p := dirgate.ChangePosition{Source: "x", USN: 7, Time: time.Unix(100, 0).UTC()}
	b, _ := json.Marshal(p)
	got, err := decodePosition(string(b))
	if err != nil || !reflect.DeepEqual(*got, p) {
		t.Fatalf("%+v %v", got, err)
	}
	for _, bad := range []string{"{", `{"source":""}`, `{"source":"x"}`, `{"source":"x","usn":-1,"time":"2020-01-01T00:00:00Z"}`,
		`{"source":"x","usn":1,"time":"2020-01-01T00:00:00Z","marks":[{"source":"","usn":1,"time":"2020-01-01T00:00:00Z"}]}`,
		`{"source":"x","usn":1,"time":"2020-01-01T00:00:00Z","marks":[{"source":"y","usn":1}]}`,
		`{"source":"x","usn":1,"time":"2020-01-01T00:00:00Z","marks":{"source":"y"}}`,
		`{"source":"` + strings.Repeat("x", maxSourceBytes+1) + `","usn":1,"time":"2020-01-01T00:00:00Z"}`,
		`{"source":"x","usn":1,"time":"2020-01-01T00:00:00Z","marks":[{"source":"` + strings.Repeat("y", maxSourceBytes+1) + `","usn":1,"time":"2020-01-01T00:00:00Z"}]}`,
		`{"source":"x","usn":1,"time":"2020-01-01T00:00:00Z","marks":[` + strings.Repeat(`{"source":"y","usn":1,"time":"2020-01-01T00:00:00Z"},`, dirgate.MaxChangeMarks) + `{"source":"y","usn":1,"time":"2020-01-01T00:00:00Z"}]}`,
		`{"source":"x","usn":1,"time":"2020-01-01T00:00:00Z","pad":"` + strings.Repeat(" ", maxPositionBytes) + `"}`,
		`{"source":"x","usn":1,"time":"2020-01-01T00:00:00Z","follow":[{"source":"y","usn":1}]}`,
		`{"source":"x","usn":1,"time":"2020-01-01T00:00:00Z","follow":[` + strings.Repeat(`{"source":"y","usn":1,"time":"2020-01-01T00:00:00Z"},`, dirgate.MaxChangeMarks) + `{"source":"y","usn":1,"time":"2020-01-01T00:00:00Z"}]}`,
	} {
		if _, err := decodePosition(bad); err == nil {
			t.Errorf("%.200s decoded", bad)
		}
	}
}

// TestPositionWithMarksFits: a position with the most marks, each naming an AD
// source of a realistic length (an NTDS Settings DN and an invocationId), is
// stored and read back whole; one with overlong or excess marks is stored without
// them rather than refused when read.
func TestPositionWithMarksFits(t *testing.T) {
	src := func(i int) string {
		return fmt.Sprintf("CN=NTDS Settings,CN=DC%02d,CN=Servers,CN=Default-First-Site-Name,CN=Sites,CN=Configuration,DC=corp,DC=example,DC=com|%08d-1111-2222-3333-444455556666", i, i)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := dirgate.ChangePosition{Source: src(99), USN: 1 << 40, Time: t0}
	for i := range dirgate.MaxChangeMarks {
		p.Marks = append(p.Marks, dirgate.ChangeMark{Source: src(i), USN: 1<<40 + uint64(i), Time: t0.Add(time.Duration(i) * time.Second)})
		p.Follow = append(p.Follow, dirgate.ChangeMark{Source: src(50 + i), USN: 1<<40 + uint64(i), Time: t0})
	}
	b, err := encodePosition(p)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodePosition(string(b))
	if err != nil || !reflect.DeepEqual(*got, p) {
		t.Fatalf("%d bytes: %v", len(b), err)
	}
	t.Logf("a position with %d marks and %d follow marks of %d-byte sources: %d bytes (bound %d)", len(p.Marks), len(p.Follow), len(src(0)), len(b), maxPositionBytes)

	// Sources as long as allowed: the oldest marks give way to fit the bound.
	long := func(i int) string { return fmt.Sprintf("%04d", i) + strings.Repeat(`\x`, (maxSourceBytes-4)/2) }
	q := dirgate.ChangePosition{Source: "s", USN: 1, Time: t0}
	for i := range dirgate.MaxChangeMarks + 3 {
		q.Marks = append(q.Marks, dirgate.ChangeMark{Source: long(i), USN: 1, Time: t0})
	}
	q.Marks = append(q.Marks, dirgate.ChangeMark{Source: strings.Repeat("z", maxSourceBytes+1), USN: 1, Time: t0}, dirgate.ChangeMark{Source: "nt", USN: 1})
	// Follow marks as long: they give way first.
	q.Follow = []dirgate.ChangeMark{{Source: long(100), USN: 1, Time: t0}, {Source: long(101), USN: 1, Time: t0}}
	b, err = encodePosition(q)
	if err != nil {
		t.Fatal(err)
	}
	got, err = decodePosition(string(b))
	if err != nil {
		t.Fatalf("%d bytes refused: %v", len(b), err)
	}
	if len(got.Marks) == 0 || len(got.Marks) >= dirgate.MaxChangeMarks || got.Marks[len(got.Marks)-1].Source != long(dirgate.MaxChangeMarks+2) {
		t.Fatalf("%d marks kept, the last %.10q", len(got.Marks), got.Marks[len(got.Marks)-1].Source)
	}
	if len(got.Follow) != 0 {
		t.Fatalf("%d follow marks kept while marks gave way", len(got.Follow))
	}
	if len(q.Marks) != dirgate.MaxChangeMarks+5 || len(q.Follow) != 2 {
		t.Fatal("encodePosition changed its argument")
	}
}

func FuzzDecodePosition(f *testing.F) {
	f.Add(`{"source":"a|b","usn":12,"time":"2026-01-01T00:00:00Z"}`)
	f.Add(`{"source":1}`)
	f.Add(`{"source":"a|b","usn":12,"time":"2026-01-01T00:00:00Z","marks":[{"source":"c|d","usn":3,"time":"2026-01-01T00:00:00Z"}]}`)
	f.Add(`{"source":"a|b","usn":12,"time":"2026-01-01T00:00:00Z","marks":[{"source":"","usn":3,"time":"2026-01-01T00:00:00Z"}]}`)
	f.Add(`{"source":"a|b","usn":12,"time":"2026-01-01T00:00:00Z","marks":null}`)
	f.Add(`{"source":"a|b","usn":12,"time":"2026-01-01T00:00:00Z","follow":[{"source":"c|d","usn":3,"time":"2026-01-01T00:00:00Z"}]}`)
	f.Fuzz(func(t *testing.T, s string) {
		p, err := decodePosition(s)
		if err != nil || p == nil {
			return
		}
		if p.Source == "" || p.Time.IsZero() || len(p.Source) > maxSourceBytes {
			t.Fatal("incomplete position accepted")
		}
		if len(p.Marks) > dirgate.MaxChangeMarks || len(p.Follow) > dirgate.MaxChangeMarks {
			t.Fatalf("%d marks, %d follow marks accepted", len(p.Marks), len(p.Follow))
		}
		for _, m := range append(slices.Clone(p.Marks), p.Follow...) {
			if m.Source == "" || m.Time.IsZero() || len(m.Source) > maxSourceBytes {
				t.Fatalf("mark %+v accepted", m)
			}
		}
		// What was accepted is stored and read back the same.
		b, err := encodePosition(*p)
		if err != nil {
			t.Fatal(err)
		}
		q, err := decodePosition(string(b))
		if err != nil || q.Source != p.Source || q.USN != p.USN || len(q.Marks) > len(p.Marks) {
			t.Fatalf("re-encoded %+v: %+v %v", p, q, err)
		}
	})
}

func FuzzParseEvent(f *testing.F) {
	f.Add("1", "0", "1", "0a0a0a0a-0000-0000-0000-000000000000,0b0a0a0a-0000-0000-0000-000000000000", true)
	f.Add("x", "0", "0", "", true)
	f.Add("2", "0", "0", "NOT-A-GUID", true)
	f.Add("3", "0", "0", "0a0a0a0a-0000-0000-0000-000000000000", false)
	rf := &redisFeed{seal: seal.New(sealSecret), events: "p:{changefeed}:events", now: time.Now}
	f.Fuzz(func(t *testing.T, seq, all, groups, ids string, sealed bool) {
		ts := strconv.FormatInt(time.Now().UnixMilli(), 10)
		vals := map[string]any{"seq": seq, "t": ts, "all": all, "groups": groups, "guids": ids}
		if sealed {
			vals["mac"] = hex.EncodeToString(rf.seal.MAC(rf.events, eventBody(seq, ts, all, groups, ids)))
		}
		e := rf.parseEvent("1-0", vals)
		if e.ev.All && len(e.ev.GUIDs) > 0 {
			t.Fatal("an event that drops everything also names objects")
		}
		if !sealed && !e.ev.All {
			t.Fatal("an unsealed event was believed")
		}
		for _, g := range e.ev.GUIDs {
			if !canonicalGUID(g) {
				t.Fatalf("accepted %q", g)
			}
		}
	})
}

// TestFeedBacksOff: a directory that keeps failing is read with a growing pause (not
// every interval), and the feed recovers by itself.
func TestFeedBacksOff(t *testing.T) {
	in := newInstance(t, demo(t), cache.Config{})
	src := &fakeSource{fail: dirgate.Errorf(dirgate.EUNAVAILABLE, "down (test)")}
	f := startFeed(t, in, src, Config{Interval: 10 * time.Millisecond})
	time.Sleep(500 * time.Millisecond)
	src.mu.Lock()
	reads := len(src.asked)
	src.fail = nil
	src.mu.Unlock()
	// 50 intervals passed; with the pause doubling from 20 ms, about 5 reads.
	if reads > 15 {
		t.Fatalf("%d reads of a failing directory in 50 intervals", reads)
	}
	if f.Ready(t.Context()) == nil {
		t.Fatal("ready without a position")
	}
	waitFor(t, "recovery", func() bool { return f.Ready(t.Context()) == nil })
}
