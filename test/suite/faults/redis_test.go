package faults

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dirgate/dirgate/test/harness/child"
	"github.com/dirgate/dirgate/test/harness/faultproxy"
	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/test/harness/redistest"
)

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}

// phased keeps one tally per phase of a fault (before, during, after).
type phased struct {
	phase   atomic.Int32
	tallies [3]*Tally
}

func newPhased() *phased {
	return &phased{tallies: [3]*Tally{NewTally(), NewTally(), NewTally()}}
}

// TestRedisFaultUnderLoad takes Redis away while four clients list cached groups
// (direct and nested) and one removal and one addition are made, then gives it back. Redis sits behind
// a fault proxy. Two faults: Redis killed with SIGKILL and restarted empty on the same
// port (a crash), and Redis hung (the proxy relays nothing, so every operation runs
// into DIRGATE_REDIS_TIMEOUT) then released.
//
// Expected, and asserted: nothing is lost. Every request answers 200 before, during
// and after the fault (bypassed requests read the DC); the outage is noticed
// (X-Dirgate-Cache: bypass) and the cache resumes by itself afterwards (hit); the
// member removed while Redis was away is never listed by a request that started after
// the removal was answered, and the member added is listed by every request that
// started after the addition was answered (docs/cache.md's guarantee); and no Redis
// connection is
// leaked (the proxy holds no more than before).
func TestRedisFaultUnderLoad(t *testing.T) {
	for _, tc := range []struct {
		name     string
		down, up func(*redistest.Server, *faultproxy.Proxy)
	}{
		// A crash: the process and its data are gone; it comes back empty.
		{name: "killed", down: func(s *redistest.Server, _ *faultproxy.Proxy) { s.Stop() },
			up: func(s *redistest.Server, _ *faultproxy.Proxy) { s.Restart() }},
		// A wedged server: connections stay open and nothing answers.
		{name: "hung", down: func(_ *redistest.Server, px *faultproxy.Proxy) { px.SetMode(faultproxy.Blackhole) },
			up: func(_ *redistest.Server, px *faultproxy.Proxy) { px.SetMode(faultproxy.Pass) }},
	} {
		t.Run(tc.name, func(t *testing.T) { testRedisFault(t, tc.name, tc.down, tc.up) })
	}
}

func testRedisFault(t *testing.T, name string, down, up func(*redistest.Server, *faultproxy.Proxy)) {
	child.RequireSetting(t, "DIRGATE_REDIS_ADDR")
	rds := redistest.Start(t)
	rpx := faultproxy.Start(t, rds.Addr())
	env := map[string]string{"DIRGATE_REDIS_ADDR": rpx.Addr(), "DIRGATE_REDIS_RETRY_INTERVAL": "250ms",
		"DIRGATE_SECRET_FILE": child.WriteFile(t, "secret", "the fault tests' secret, 32 bytes or more\n")}
	p, lpx, tok, dc := startBehindProxy(t, env)
	group := child.TempGroup(t, dc, "dirgate faults redis "+name, fixture.RegularDN, fixture.NeverExpiresDN)
	c := child.NewClient()
	ctx := context.Background()

	urls := []string{child.ListURL(p.Base, group, "")}
	for _, g := range Groups[:6] {
		urls = append(urls, child.ListURL(p.Base, g, ""), child.ListURL(p.Base, g, "&includeIndirect=true&properties=mail"))
	}
	warm := time.Now()
	for _, u := range urls {
		child.Eventually(t, 30*time.Second, "the cache serves "+u, func() (bool, string) {
			r := c.Do(ctx, "GET", u, tok)
			return r.Status == 200 && r.Cache() == "hit", r.Cache() + " " + r.String()
		})
	}
	t.Logf("cache warm in %v", time.Since(warm).Round(time.Millisecond))

	ph := newPhased()
	var removedAt, addedAt atomic.Int64 // unix nanos when the removal and the addition were answered
	load := func(ctx context.Context) {
		Drive(ctx, 4, 0, func(ctx context.Context, i int) {
			phase, start := ph.phase.Load(), time.Now().UnixNano()
			u := urls[i%len(urls)]
			r := c.Do(context.Background(), "GET", u, tok)
			why := ""
			switch {
			case r.Status != 200:
				why = "listing failed"
			case u == urls[0] && removedAt.Load() != 0 && start > removedAt.Load() && containsFold(r.DNs(), fixture.RegularDN):
				why = "the removed member is still listed"
			case u == urls[0] && addedAt.Load() != 0 && start > addedAt.Load() && !containsFold(r.DNs(), fixture.DisabledDN):
				why = "the added member is not listed"
			}
			ph.tallies[phase].Add(r, why)
			time.Sleep(5 * time.Millisecond) // bounded load: the DC and this machine are shared
		})
	}
	// The same load before the fault, to measure the program as the load leaves it.
	before, cancel := context.WithTimeout(ctx, time.Second)
	load(before)
	cancel()
	seq := 0
	fillPool(t, c, p, lpx, tok, &seq) // equal LDAP pools in both readings: go-ldap runs goroutines per connection
	base := quiesce(t, c, p, rpx, lpx)

	loadCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); load(loadCtx) }()
	ph.phase.Store(1)
	down(rds, rpx)
	child.Eventually(t, 20*time.Second, "dirgate notices that Redis is gone", func() (bool, string) {
		return ph.tallies[1].Caches()["bypass"] > 0, fmt.Sprint(ph.tallies[1].Caches())
	})
	r := c.Do(ctx, "DELETE", child.RemoveURL(p.Base, group, fixture.RegularDN), tok)
	if r.Status != 200 || !strings.Contains(string(r.Body), `"noChanges":false`) {
		t.Errorf("removal while Redis is away: %s", r)
	}
	removedAt.Store(time.Now().UnixNano())
	r = c.Add(ctx, p.Base, group, fixture.DisabledDN, tok)
	if r.Status != 200 || !strings.Contains(string(r.Body), `"noChanges":false`) {
		t.Errorf("addition while Redis is away: %s", r)
	}
	addedAt.Store(time.Now().UnixNano())
	time.Sleep(time.Second)

	ph.phase.Store(2)
	up(rds, rpx)
	took := child.Eventually(t, 30*time.Second, "the cache resumes after Redis returns", func() (bool, string) {
		return ph.tallies[2].Caches()["hit"] > 0, fmt.Sprint(ph.tallies[2].Caches())
	})
	time.Sleep(time.Second)
	stopLoad()
	wg.Wait()

	expect := "every listing 200; the removed member never listed after the removal, the added one always after the addition"
	lost := 0
	for i, name := range []string{"before", "during", "after"} {
		t.Logf("Redis %s: %s", name, ph.tallies[i].Summary(expect))
		lost += ph.tallies[i].Lost()
	}
	t.Logf("the cache resumed %v after Redis returned", took.Round(time.Millisecond))
	if lost != 0 {
		t.Errorf("%d requests lost across the Redis fault", lost)
	}
	if got := child.Members(t, dc, group); containsFold(got, fixture.RegularDN) || !containsFold(got, fixture.DisabledDN) || len(got) != 2 {
		t.Errorf("the DC's members after the removal and the addition: %v", got)
	}
	fillPool(t, c, p, lpx, tok, &seq)
	after := quiesce(t, c, p, rpx, lpx)
	t.Logf("resources before the fault: %s; after: %s", base, after)
	if after.res.Goroutines > base.res.Goroutines+leakSlack {
		t.Errorf("goroutines: %d after the fault, %d before (slack %d): a leak", after.res.Goroutines, base.res.Goroutines, leakSlack)
	}
	if after.otherFDs() > base.otherFDs() {
		t.Errorf("descriptors other than live Redis and LDAP connections: %d after the fault, %d before: sockets of the dead or hung server were kept", after.otherFDs(), base.otherFDs())
	}
}

// quiet is a settled reading of the program with the connections the proxies see.
type quiet struct {
	res         child.Resources
	redis, ldap int
}

func (q quiet) String() string {
	return fmt.Sprintf("%s, %d Redis and %d LDAP connections", q.res, q.redis, q.ldap)
}

// otherFDs are the program's descriptors that are not a live connection to Redis or
// the DC: a socket kept after its peer died shows up here, while the pools may hold
// a different number of live connections after a fault.
func (q quiet) otherFDs() int { return q.res.OpenFDs - q.redis - q.ldap }

// quiesce closes the client's idle connections and waits until two readings in a
// row agree, so that connections closing in the background are not counted.
func quiesce(t *testing.T, c *child.Client, p *child.Program, rpx, lpx *faultproxy.Proxy) quiet {
	t.Helper()
	c.CloseIdle()
	var last quiet
	took := child.Eventually(t, 30*time.Second, "the program settles", func() (bool, string) {
		res, err := p.Resources(context.Background())
		if err != nil {
			return false, err.Error()
		}
		q := quiet{res: res, redis: rpx.Live(), ldap: lpx.Live()}
		same := q.res.Goroutines == last.res.Goroutines && q.otherFDs() == last.otherFDs()
		last = q
		time.Sleep(200 * time.Millisecond)
		return same, q.String()
	})
	t.Logf("settled in %v: %s", took.Round(time.Millisecond), last)
	return last
}

// TestDCDownWithStaleCache stops the DC while four clients list groups whose
// listings are cached with a one-second TTL, then starts it again. With
// stale-if-error (DIRGATE_CACHE_MAX_STALE) and a warm cache nothing is lost: every
// listing answers 200, fresh while the TTL lasts, then stale (X-Dirgate-Cache: stale)
// while the directory fails and the breaker is open; after the DC returns, listings
// are fresh again by themselves.
func TestDCDownWithStaleCache(t *testing.T) {
	child.RequireSetting(t, "DIRGATE_CACHE_MAX_STALE")
	rds := redistest.Start(t)
	env := map[string]string{"DIRGATE_REDIS_ADDR": rds.Addr(), "DIRGATE_CACHE_TTL": "1s", "DIRGATE_CACHE_MAX_STALE": "1h",
		"DIRGATE_SECRET_FILE": child.WriteFile(t, "secret", "the fault tests' secret, 32 bytes or more\n")}
	p, px, tok, _ := startBehindProxy(t, env, breakerArgs...)
	c := child.NewClient()
	ctx := context.Background()
	var urls []string
	for _, g := range Groups[:6] {
		urls = append(urls, child.ListURL(p.Base, g, ""), child.ListURL(p.Base, g, "&includeIndirect=true"))
	}
	for _, u := range urls {
		child.Eventually(t, 30*time.Second, "the cache holds "+u, func() (bool, string) {
			r := c.Do(ctx, "GET", u, tok)
			return r.Status == 200 && r.Cache() == "hit", r.Cache() + " " + r.String()
		})
	}

	px.SetMode(faultproxy.Refuse)
	px.Cut()
	down := NewTally()
	// Longer than the TTL, so that entries go stale while the DC is down.
	loadCtx, cancel := context.WithTimeout(ctx, 4*time.Second)
	Drive(loadCtx, 4, 2000, func(_ context.Context, i int) {
		r := c.Do(ctx, "GET", urls[i%len(urls)], tok)
		why := ""
		if r.Status != 200 || (r.Cache() != "hit" && r.Cache() != "stale") {
			why = "want 200 from the cache (hit or stale)"
		}
		down.Add(r, why)
		time.Sleep(10 * time.Millisecond)
	})
	cancel()
	t.Log("DC down, warm cache: " + down.Summary("every listing 200, hit then stale"))
	if down.Lost() != 0 {
		t.Errorf("%d listings failed while the DC was down although the cache held them", down.Lost())
	}
	if down.Caches()["stale"] == 0 {
		t.Errorf("no stale answer during a 4 s outage with a 1 s TTL: the test did not exercise stale-if-error")
	}
	if refused := px.Stats().Refused; refused == 0 {
		t.Errorf("no connection to the DC was refused during the outage: the listings never tried the directory, so stale-if-error was not exercised")
	}
	status, body, _ := p.Ready(ctx)
	t.Logf("/readyz at the end of the outage: %d %s", status, strings.TrimSpace(body))
	// docs/operations.md: a shared dependency down is reported, never unready.
	if status != 200 || !strings.Contains(body, `"upstream"`) {
		t.Errorf("/readyz during the outage: %d %s, want 200 reporting the upstream", status, strings.TrimSpace(body))
	}

	px.SetMode(faultproxy.Pass)
	took := child.Eventually(t, 60*time.Second, "listings are fresh again after the DC returns", func() (bool, string) {
		r := c.Do(ctx, "GET", urls[0], tok)
		return r.Status == 200 && r.Cache() != "stale", r.Cache() + " " + r.String()
	})
	t.Logf("DC back: fresh listings %v after it returned", took.Round(time.Millisecond))
}
