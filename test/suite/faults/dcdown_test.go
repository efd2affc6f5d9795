package faults

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dirgate/dirgate/test/harness/child"
	"github.com/dirgate/dirgate/test/harness/faultproxy"
	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/test/harness/sambatest"
)

// Breaker settings of the DC-down tests: three failures open it, and it lets a probe
// through after two seconds, so that an outage and its recovery fit in a few seconds.
// A hung DC costs each request the LDAP timeout, 3 s here, until the breaker opens.
var breakerArgs = []string{"--breaker-failures", "3", "--breaker-open-timeout", "2s", "--breaker-half-open-requests", "1",
	"--ldap-timeout", "3s"}

// startBehindProxy runs dirgate against the DC through a fault proxy, with a token
// acting as the fixture's administrator. The principal is kept for ten minutes so
// that authentication needs no directory while it is down (docs/cache.md: a longer
// outage refuses callers before any listing is read).
func startBehindProxy(t *testing.T, env map[string]string, extra ...string) (*child.Program, *faultproxy.Proxy, string, sambatest.DC) {
	t.Helper()
	dc := sambatest.Env(t)
	child.RequireFixture(t, dc)
	px, ldapURL := child.ProxyDC(t, dc)
	tok := child.NewToken(t, "fault-")
	args := append(child.LDAPArgs(t, dc, ldapURL, child.WriteTokens(t, map[string]string{tok: fixture.DemoAdminDN})),
		"--principal-ttl", "10m", "--request-timeout", "20s")
	return child.Start(t, env, append(args, extra...)...), px, tok, dc
}

// refusedAsDocumented is the expectation for a request while the directory is down
// and nothing can answer from a cache: 502 (the directory failed), 503 (the breaker
// is open) or 504, in the error shape, and never a hang (a transport error after the
// client's 60 s bound) or a 500.
func refusedAsDocumented(r child.Result) string {
	if r.Err != nil {
		return "no answer"
	}
	if r.Status != 502 && r.Status != 503 && r.Status != 504 {
		return fmt.Sprintf("status %d, want 502, 503 or 504", r.Status)
	}
	if _, err := child.CheckError(r); err != nil {
		return err.Error()
	}
	return ""
}

// latencies collects response times for the log (never asserted: they depend on
// the machine).
type latencies struct {
	mu sync.Mutex
	d  map[int][]time.Duration
}

func (l *latencies) add(r child.Result) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.d == nil {
		l.d = map[int][]time.Duration{}
	}
	l.d[r.Status] = append(l.d[r.Status], r.Elapsed)
}

func (l *latencies) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var parts []string
	for _, s := range sortedKeys(l.d) {
		d := slices.Clone(l.d[s])
		slices.Sort(d)
		parts = append(parts, fmt.Sprintf("%d: median %v max %v", s, d[len(d)/2].Round(time.Millisecond), d[len(d)-1].Round(time.Millisecond)))
	}
	return strings.Join(parts, "; ")
}

// TestDCDownWithoutCache stops the domain controller as dirgate sees it while four
// clients keep listing, then starts it again. Two ways of being down: a stopped DC
// (the proxy resets every new connection and cuts the open ones) and a hung one (the
// proxy accepts connections and relays nothing, on new and open connections alike:
// requests time out until the breaker opens).
//
// What is lost, by design: every request during the outage, since no cache can
// answer (the listings are cold: property sets never requested before). What is
// asserted: each of them is refused as documented (502/503/504 in the error shape,
// none hangs, none is a 500); the breaker opens, shows on /readyz and spares the DC
// (far fewer connection attempts than requests: the refusals are immediate, not one
// dial each); and once the DC is back, dirgate recovers by itself and then loses
// nothing.
func TestDCDownWithoutCache(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode faultproxy.Mode
	}{
		// The DC process is gone: connections are refused at once.
		{name: "stopped", mode: faultproxy.Refuse},
		// The DC hangs: nothing comes back, so every call waits for its deadline.
		{name: "hung", mode: faultproxy.Blackhole},
	} {
		t.Run(tc.name, func(t *testing.T) { testDCDown(t, tc.mode) })
	}
}

func testDCDown(t *testing.T, mode faultproxy.Mode) {
	p, px, tok, _ := startBehindProxy(t, nil, breakerArgs...)
	c := child.NewClient()
	ctx := context.Background()
	for _, g := range Groups[:3] {
		if r := c.Do(ctx, "GET", child.ListURL(p.Base, g, ""), tok); r.Status != 200 {
			t.Fatalf("warm-up listing of %s: %s", g, r)
		}
	}

	px.SetMode(mode)
	cut := 0
	if mode == faultproxy.Refuse {
		cut = px.Cut() // a stopped server's connections are gone; a hung one's stay open
	}
	before := px.Stats()
	down, lat := NewTally(), &latencies{}
	const n = 120
	Drive(ctx, 4, n, func(ctx context.Context, i int) {
		r := c.Do(ctx, "GET", child.ListURL(p.Base, Groups[i%len(Groups)], child.PropsFor(i+1)), tok)
		lat.add(r)
		down.Add(r, refusedAsDocumented(r))
	})
	dials := px.Stats().Accepted - before.Accepted
	t.Logf("DC %s (%d open connections cut): %s", mode, cut, down.Summary("every request refused with 502/503/504 in the error shape; none hangs"))
	t.Logf("DC down: %d connection attempts reached the proxy for %d requests; latencies %s", dials, n, lat)
	if down.Lost() != 0 {
		t.Errorf("%d requests were not refused as documented during the outage", down.Lost())
	}
	if got := down.Statuses()[503]; got < n/2 {
		t.Errorf("%d of %d requests got 503: the breaker did not take over", got, n)
	}
	// Without the breaker every request dials at least once (the retry of a read dials
	// afresh); with it, only the failures that open it and the half-open probes do.
	if dials > n/4 {
		t.Errorf("%d connection attempts for %d requests: the open breaker did not spare the DC", dials, n)
	}
	child.Eventually(t, 20*time.Second, "/readyz reports the open breaker", func() (bool, string) {
		c.Do(ctx, "GET", child.ListURL(p.Base, Groups[0], child.PropsFor(n+1)), tok) // a probe, if half-open, fails and reopens it
		status, body, err := p.Ready(ctx)
		return err == nil && status == 200 && strings.Contains(body, `"upstream":"no domain controller takes calls`) && strings.Contains(body, "circuit breaker open"), fmt.Sprintf("%d %s %v", status, body, err)
	})

	px.SetMode(faultproxy.Pass)
	i := n + 2
	took := child.Eventually(t, 60*time.Second, "listings succeed again after the DC returns", func() (bool, string) {
		i++
		r := c.Do(ctx, "GET", child.ListURL(p.Base, Groups[i%len(Groups)], child.PropsFor(i)), tok)
		return r.Status == 200, r.String()
	})
	t.Logf("DC back: the first listing succeeded %v after the DC returned (breaker open timeout 2s)", took.Round(time.Millisecond))
	if status, body, err := p.Ready(ctx); err != nil || !strings.Contains(body, `"upstream":"ok"`) {
		t.Errorf("/readyz after recovery: %d %s %v", status, body, err)
	}
	after := NewTally()
	Drive(ctx, 4, 40, func(ctx context.Context, j int) {
		r := c.Do(ctx, "GET", child.ListURL(p.Base, Groups[j%len(Groups)], child.PropsFor(i+1+j)), tok)
		why := ""
		if r.Status != 200 {
			why = "not 200 after recovery"
		}
		after.Add(r, why)
	})
	t.Log("DC recovered: " + after.Summary("every listing succeeds"))
	if after.Lost() != 0 {
		t.Errorf("%d listings failed after the DC recovered", after.Lost())
	}
}
