package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/ldapentry"
	"github.com/dirgate/dirgate/test/harness/redistest"
	goldap "github.com/go-ldap/ldap/v3"
)

// BenchmarkChangeFeedBulk is a bulk change on the DC (an HR import: by default 5,000
// membership changes spread over 50 groups within a minute) followed by the change
// feed, with default settings. It runs, on its own OU and in one process, phases of
// the same length whose DC CPU (the samba processes' utime+stime, from /proc) is
// compared:
//
//	idle         nothing runs: the DC's own background
//	bare         the changes, no dirgate running
//	feed-reader  the changes, two dirgate instances sharing Redis, listings cached,
//	             no client: the feed reader's own cost beside bare
//	feed-polled  the same with clients polling every group on both instances: for
//	             each change, the time from its write returning to both instances
//	             answering a listing that reflects it
//
// The changes return the directory to where it started, so every phase writes the
// same ones. Run it by hand against a DC of its own (docs/benchmarks.md, "A bulk
// change"); settings come from DIRGATE_BULK_* (bulkConfigFromEnv), the samples and
// figures go to DIRGATE_BULK_JSON, which test/tools/load/cmd/plot -changefeed draws:
//
//	DIRGATE_BULK_JSON=/tmp/bulk.json go test -run '^$' -bench ChangeFeedBulk -benchtime 1x -timeout 60m ./cmd/dirgate/
func BenchmarkChangeFeedBulk(b *testing.B) {
	cfg := bulkConfigFromEnv(b)
	bf := newBulkFixture(b, cfg)
	plan := bf.plan(cfg.Changes)
	rep := bulkReport{Config: cfg, Started: time.Now().UTC(), Planned: len(plan)}
	for r := range cfg.Repeat {
		for _, name := range []string{"idle", "bare", "feed-reader", "feed-polled"} {
			b.Run(name, func(b *testing.B) {
				ph := bf.phase(b, name, plan)
				ph.Repeat = r
				rep.Phases = append(rep.Phases, ph)
			})
		}
	}
	if cfg.JSON != "" {
		data, _ := json.MarshalIndent(rep, "", " ")
		if err := os.WriteFile(cfg.JSON, data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// bulkConfig is a bulk run's shape.
type bulkConfig struct {
	Groups   int           `json:"groups"`   // DIRGATE_BULK_GROUPS
	Users    int           `json:"users"`    // DIRGATE_BULK_USERS
	Members  int           `json:"members"`  // DIRGATE_BULK_MEMBERS: each group's initial members
	Changes  int           `json:"changes"`  // DIRGATE_BULK_CHANGES
	Writers  int           `json:"writers"`  // DIRGATE_BULK_WRITERS: LDAP connections writing in parallel
	Duration time.Duration `json:"duration"` // DIRGATE_BULK_DURATION: the changes are spread over it
	Settle   time.Duration `json:"settle"`   // DIRGATE_BULK_SETTLE: a phase's window is Duration+Settle
	Poll     time.Duration `json:"poll"`     // DIRGATE_BULK_POLL: each group's polling period on each instance
	Repeat   int           `json:"repeat"`   // DIRGATE_BULK_REPEAT
	JSON     string        `json:"-"`        // DIRGATE_BULK_JSON
	Env      []string      `json:"dirgateEnv,omitempty"`
}

func bulkConfigFromEnv(b *testing.B) bulkConfig {
	c := bulkConfig{Groups: 50, Users: 1000, Members: 100, Changes: 5000, Writers: 4,
		Duration: time.Minute, Settle: 15 * time.Second, Poll: 200 * time.Millisecond, Repeat: 1,
		JSON: os.Getenv("DIRGATE_BULK_JSON")}
	for name, p := range map[string]*int{"GROUPS": &c.Groups, "USERS": &c.Users, "MEMBERS": &c.Members,
		"CHANGES": &c.Changes, "WRITERS": &c.Writers, "REPEAT": &c.Repeat} {
		if v := os.Getenv("DIRGATE_BULK_" + name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				b.Fatalf("DIRGATE_BULK_%s=%q: want a positive number", name, v)
			}
			*p = n
		}
	}
	for name, p := range map[string]*time.Duration{"DURATION": &c.Duration, "SETTLE": &c.Settle, "POLL": &c.Poll} {
		if v := os.Getenv("DIRGATE_BULK_" + name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				b.Fatalf("DIRGATE_BULK_%s=%q: want a positive duration", name, v)
			}
			*p = d
		}
	}
	// Extra dirgate flags for the instances (e.g. to compare a setting).
	if v := os.Getenv("DIRGATE_BULK_DIRGATE_FLAGS"); v != "" {
		if err := json.Unmarshal([]byte(v), &c.Env); err != nil {
			b.Fatalf("DIRGATE_BULK_DIRGATE_FLAGS: want a JSON array of flags: %v", err)
		}
	}
	perGroup := c.Changes / c.Groups / 4 // adds of non-members and removals of members, each
	if perGroup == 0 || c.Members < perGroup || c.Users-c.Members < perGroup {
		b.Fatalf("bulk: %d changes over %d groups need each group to have %d members and %d non-members among %d users",
			c.Changes, c.Groups, perGroup, perGroup, c.Users)
	}
	return c
}

// bulkFixture is the run's OU: users, and groups holding some of them.
type bulkFixture struct {
	*feedFixture
	cfg        bulkConfig
	groups     []string // DNs
	groupGUIDs []string
	users      []string // DNs
	guids      []string // users' GUIDs
	members    [][]int  // each group's initial members (user indexes)
}

func newBulkFixture(b *testing.B, cfg bulkConfig) *bulkFixture {
	bf := &bulkFixture{feedFixture: newFeedFixture(b), cfg: cfg}
	ou := "OU=bulk," + bf.ou
	bf.add(b, ou, map[string][]string{"objectClass": {"organizationalUnit"}})
	tag := strconv.FormatInt(time.Now().UnixNano()%1e8, 36)
	for i := range cfg.Users {
		bf.users = append(bf.users, fmt.Sprintf("CN=bu%d,%s", i, ou))
	}
	start := time.Now()
	bf.parallel(b, cfg.Users, func(c *goldap.Conn, i int) error {
		a := goldap.NewAddRequest(bf.users[i], nil)
		a.Attribute("objectClass", []string{"user"})
		a.Attribute("sAMAccountName", []string{"bu" + tag + strconv.Itoa(i)})
		a.Attribute("userAccountControl", []string{"544"})
		return c.Add(a)
	})
	for g := range cfg.Groups {
		var m []int
		for k := range cfg.Members {
			m = append(m, (g*cfg.Members/2+k)%cfg.Users) // overlapping, as departments' groups do
		}
		bf.members = append(bf.members, m)
		bf.groups = append(bf.groups, fmt.Sprintf("CN=bg%d,%s", g, ou))
	}
	bf.parallel(b, cfg.Groups, func(c *goldap.Conn, g int) error {
		a := goldap.NewAddRequest(bf.groups[g], nil)
		a.Attribute("objectClass", []string{"group"})
		var dns []string
		for _, u := range bf.members[g] {
			dns = append(dns, bf.users[u])
		}
		a.Attribute("member", dns)
		return c.Add(a)
	})
	res, err := bf.adm.SearchWithPaging(goldap.NewSearchRequest(ou, goldap.ScopeSingleLevel, goldap.NeverDerefAliases, 0, 0, false,
		"(|(objectClass=user)(objectClass=group))", []string{"objectGUID", "cn"}, nil), 500)
	if err != nil {
		b.Fatal(err)
	}
	byCN := map[string]string{}
	for _, e := range res.Entries {
		byCN[e.GetAttributeValue("cn")] = ldapentry.GUIDFromBytes(e.GetRawAttributeValue("objectGUID"))
	}
	for i := range cfg.Users {
		g, ok := byCN["bu"+strconv.Itoa(i)]
		if !ok {
			b.Fatalf("user bu%d not found after seeding", i)
		}
		bf.guids = append(bf.guids, g)
	}
	for g := range cfg.Groups {
		bf.groupGUIDs = append(bf.groupGUIDs, byCN["bg"+strconv.Itoa(g)])
	}
	b.Logf("bulk fixture: %d users, %d groups of %d members, seeded in %v", cfg.Users, cfg.Groups, cfg.Members, time.Since(start).Round(time.Millisecond))
	return bf
}

// parallel runs op for 0..n-1 on the configured number of administrator connections.
func (bf *bulkFixture) parallel(b *testing.B, n int, op func(*goldap.Conn, int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range bf.cfg.Writers {
		c := bf.dc.DialAdmin(b)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := op(c, i); err != nil {
					b.Errorf("bulk: %d: %v", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
}

// bulkChange is one membership change of the plan.
type bulkChange struct {
	Group, User int
	Add         bool
}

// plan returns n membership changes that leave the directory as it was: each group
// first gains non-members and loses members, alternately, then loses those it
// gained and regains those it lost. Changes go round the groups, in a new random
// order each round, so that the two changes of one (group, member) pair are half
// the run apart.
func (bf *bulkFixture) plan(n int) []bulkChange {
	perGroup := n / len(bf.groups) / 4 * 4
	quarter := perGroup / 4
	steps := make([][]bulkChange, len(bf.groups))
	for g, members := range bf.members {
		in := map[int]bool{}
		for _, u := range members {
			in[u] = true
		}
		var out []int
		for u := (g*bf.cfg.Members/2 + bf.cfg.Members) % bf.cfg.Users; len(out) < quarter; u = (u + 1) % bf.cfg.Users {
			if !in[u] {
				out = append(out, u)
			}
		}
		for j := range quarter {
			steps[g] = append(steps[g], bulkChange{g, out[j], true}, bulkChange{g, members[j], false})
		}
		for j := range quarter {
			steps[g] = append(steps[g], bulkChange{g, out[j], false}, bulkChange{g, members[j], true})
		}
	}
	rng := rand.New(rand.NewPCG(26, 5000))
	var plan []bulkChange
	for k := range perGroup {
		for _, g := range rng.Perm(len(bf.groups)) {
			plan = append(plan, steps[g][k])
		}
	}
	return plan
}

// write makes the plan's changes, change i due at start+i*Duration/len(plan), on
// Writers connections (a writer that falls behind goes on at once: the achieved
// rate is what the DC sustains). committed is called as each write returns.
func (bf *bulkFixture) write(b *testing.B, plan []bulkChange, start time.Time, committed func(i int, issued, done time.Time)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range bf.cfg.Writers {
		c := bf.dc.DialAdmin(b)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < len(plan); i = int(next.Add(1) - 1) {
				time.Sleep(time.Until(start.Add(time.Duration(i) * bf.cfg.Duration / time.Duration(len(plan)))))
				ch := plan[i]
				m := goldap.NewModifyRequest(bf.groups[ch.Group], nil)
				if ch.Add {
					m.Add("member", []string{bf.users[ch.User]})
				} else {
					m.Delete("member", []string{bf.users[ch.User]})
				}
				issued := time.Now()
				if err := c.Modify(m); err != nil {
					b.Errorf("bulk change %d (%+v): %v", i, ch, err)
					return
				}
				committed(i, issued, time.Now())
			}
		}()
	}
	wg.Wait()
}

// phase runs one phase and returns its figures.
func (bf *bulkFixture) phase(b *testing.B, name string, plan []bulkChange) bulkPhase {
	var reads *readCounter
	var bases []string
	if name == "feed-reader" || name == "feed-polled" {
		reads = &readCounter{}
		rs := redistest.Start(b)
		for i := range 2 {
			hook := func(m *Main) {
				m.wrapChanges = func(s dirgate.ChangeSource) dirgate.ChangeSource { return &countingSource{ChangeSource: s, c: reads} }
				// DIRGATE_BULK_LOG: a directory for the instances' logs, at info.
				if dir := os.Getenv("DIRGATE_BULK_LOG"); dir != "" {
					f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%d.log", name, i)))
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { f.Close() })
					m.Logger = slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelInfo}))
				}
			}
			_, base := startFeedInstanceWith(b, bf.feedFixture, hook, bf.dc.BindDN, bf.dc.Password, append(withRedis(b, rs.Addr()), bf.cfg.Env...)...)
			bases = append(bases, base)
		}
		// The first read has no position and invalidates everything: cache after it.
		for deadline := time.Now().Add(feedBound); reads.count() < 2; time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatalf("the change feed made no read within %s", feedBound)
			}
		}
		bf.prime(b, bases)
	}
	var poll *bulkPoller
	if name == "feed-polled" {
		poll = newBulkPoller(bf, bases, len(plan))
		poll.logf = b.Logf
	}
	window := bf.cfg.Duration + bf.cfg.Settle
	ph := bulkPhase{Name: name, WindowS: window.Seconds(), LoadAvg: [2]string{loadAvg()}}
	cpu0, _ := dcCPU()
	self0 := processCPU()
	start := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if poll != nil {
		poll.start(ctx, start)
	}
	var w *bulkWrites
	if name != "idle" {
		w = newBulkWrites(len(plan))
		bf.write(b, plan, start, func(i int, issued, done time.Time) {
			w.record(i, start, issued, done)
			if poll != nil {
				poll.committed(i, plan[i], issued.Sub(start), done.Sub(start))
			}
		})
	}
	// Writes that overran the duration (the DC could not sustain the rate) still get
	// the settling time.
	end := start.Add(window)
	if w != nil {
		end = later(end, start.Add(w.lastDone()+bf.cfg.Settle))
	}
	ph.WindowS = end.Sub(start).Seconds()
	time.Sleep(time.Until(end))
	cpu1, procs := dcCPU()
	ph.DCCPUS, ph.DCProcesses = (cpu1 - cpu0).Seconds(), procs
	ph.ProcessCPUS = (processCPU() - self0).Seconds()
	ph.LoadAvg[1] = loadAvg()
	if w != nil {
		ph.Writes = w.summary()
	}
	if poll != nil {
		poll.wait(ctx, feedBound)
		cancel()
		poll.stop()
		ph.Polls, ph.PolledBytes, ph.Samples = poll.counts, poll.bytes.Load(), poll.samples
		reads.readOf(poll.samples, start, bf.groupGUIDs)
		ph.Latency = latencyOf(poll.samples)
		ph.FeedPart, ph.RefillPart = partsOf(poll.samples)
		b.ReportMetric(ph.Latency.P50S, "p50-s")
		b.ReportMetric(ph.Latency.P99S, "p99-s")
		b.ReportMetric(ph.Latency.MaxS, "max-s")
		b.ReportMetric(float64(ph.Latency.Unseen), "unseen")
	}
	if reads != nil {
		ph.Feed = reads.summary(start, end)
		b.ReportMetric(float64(ph.Feed.Reads), "reads")
	}
	b.ReportMetric(ph.DCCPUS, "dc-cpu-s")
	if ph.FeedPart != nil {
		b.Logf("%s: the feed's part %s; the refill's part %s", name, js(ph.FeedPart), js(ph.RefillPart))
	}
	b.Logf("%s: DC CPU %.1f s over %.0f s (%d samba processes), this process %.1f s, load %s -> %s; writes %s; feed %s; latency %s",
		name, ph.DCCPUS, ph.WindowS, ph.DCProcesses, ph.ProcessCPUS, ph.LoadAvg[0], ph.LoadAvg[1], js(ph.Writes), js(ph.Feed), js(ph.Latency))
	if poll != nil {
		b.Logf("%s: polls %v, %d MB", name, ph.Polls, ph.PolledBytes>>20)
	}
	return ph
}

// prime lists every group on every instance until it is served from the cache.
func (bf *bulkFixture) prime(b *testing.B, bases []string) {
	for _, base := range bases {
		for _, g := range bf.groups {
			for i := 0; ; i++ {
				_, st, err := bulkGet(base, g)
				if err == nil && st == "hit" {
					break
				}
				if i == 50 {
					b.Fatalf("%s on %s is never served from the cache (%s, %v)", g, base, st, err)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func js(v any) string {
	data, _ := json.Marshal(v)
	return string(data)
}
