package faults

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dirgate/dirgate/test/harness/child"
	"github.com/dirgate/dirgate/test/harness/faultproxy"
)

// poolSize is dirgate's LDAP pool in the slow-upstream test: the proxy must never
// hold more connections than this once dirgate has settled.
const poolSize = 4

// leakSlack is how many goroutines the program may have above its baseline once it
// has settled: net/http's connection-closing goroutines finish a moment after the
// client closes, and a scrape has one of its own. A leak per request, per cut or per
// discarded LDAP connection in this test would be tens to hundreds.
const leakSlack = 3

// fillPool lists concurrently until dirgate holds poolSize connections to the DC, so
// that two measurements compare equal pools.
func fillPool(t *testing.T, c *child.Client, p *child.Program, px *faultproxy.Proxy, tok string, seq *int) {
	t.Helper()
	ctx := context.Background()
	child.Eventually(t, 60*time.Second, "the LDAP pool fills", func() (bool, string) {
		var wg sync.WaitGroup
		for range 2 * poolSize {
			*seq++
			u := child.ListURL(p.Base, Groups[*seq%len(Groups)], child.PropsFor(*seq))
			wg.Add(1)
			go func() { defer wg.Done(); c.Do(ctx, "GET", u, tok) }()
		}
		wg.Wait()
		return px.Live() == poolSize, fmt.Sprintf("%d connections", px.Live())
	})
	c.CloseIdle()
}

// TestSlowUpstream puts latency and connection cuts between dirgate and the DC.
//
// Phase 1: every chunk is delayed 6 s, beyond the 5 s LDAP timeout: every listing
// must answer 504 upstreamTimeout in the error shape (the breaker threshold is set
// out of reach so that timeouts are not turned into 503s). Lost: all of them, by
// design; none may hang or be another status.
//
// Phase 2: 10 ms of latency per chunk, and every open connection cut every 400 ms
// while four clients list: a read cut once is retried on a fresh connection, so some
// succeed (at least one must: the retry works); one cut twice answers 502 (or 504 if
// the retry runs out of time). Lost: those, counted; a 500 or a transport error is a
// failure.
//
// Phase 3: the upstream is healthy again and every listing succeeds.
//
// Leaks: with the pool full before and after, dirgate's goroutines and descriptors
// (its /metrics) return to the baseline, and the proxy holds no more than the pool's
// connections: none of the timed-out, cut or discarded connections is left open.
func TestSlowUpstream(t *testing.T) {
	p, px, tok, _ := startBehindProxy(t, nil, "--breaker-failures", "1000", "--ldap-timeout", "5s",
		"--ldap-pool-size", fmt.Sprint(poolSize))
	c := child.NewClient()
	ctx := context.Background()
	seq := 0
	fillPool(t, c, p, px, tok, &seq)
	base := settled(t, p, child.Resources{}, 0)
	t.Logf("baseline: %s, %d LDAP connections", base, px.Live())

	px.SetLatency(6 * time.Second)
	slow := NewTally()
	Drive(ctx, 4, 8, func(ctx context.Context, i int) {
		r := c.Do(ctx, "GET", child.ListURL(p.Base, Groups[i%len(Groups)], child.PropsFor(1000+i)), tok)
		why := ""
		if r.Status != 504 {
			why = "want 504"
		} else if _, err := child.CheckError(r); err != nil {
			why = err.Error()
		}
		slow.Add(r, why)
	})
	t.Log("upstream slower than the timeout: " + slow.Summary("every listing 504 upstreamTimeout in the error shape (all lost by design)"))
	if slow.Lost() != 0 {
		t.Errorf("%d listings were not 504 while the upstream was too slow", slow.Lost())
	}

	px.SetLatency(10 * time.Millisecond)
	cutCtx, stopCuts := context.WithCancel(ctx)
	cuts := 0
	cutsDone := make(chan struct{})
	go func() {
		defer close(cutsDone)
		for {
			select {
			case <-cutCtx.Done():
				return
			case <-time.After(400 * time.Millisecond):
				cuts += px.Cut()
			}
		}
	}()
	cut := NewTally()
	Drive(ctx, 4, 60, func(ctx context.Context, i int) {
		r := c.Do(ctx, "GET", child.ListURL(p.Base, Groups[i%len(Groups)], child.PropsFor(2000+i)), tok)
		why := ""
		switch {
		case r.Err != nil:
			why = "no answer"
		case r.Status != 200 && r.Status != 502 && r.Status != 504:
			why = "want 200, or 502/504 when the retry was cut too"
		case r.Status != 200:
			if _, err := child.CheckError(r); err != nil {
				why = err.Error()
			}
		}
		cut.Add(r, why)
	})
	stopCuts()
	<-cutsDone
	st := cut.Statuses()
	t.Logf("connections cut every 400 ms (%d cut): %s; requests failed as documented (502/504): %d",
		cuts, cut.Summary("200, or 502/504 in the error shape when the retry was cut as well"), st[502]+st[504])
	if cut.Lost() != 0 {
		t.Errorf("%d listings failed in an undocumented way while connections were cut", cut.Lost())
	}
	if st[200] == 0 {
		t.Errorf("no listing succeeded while connections were cut every 400 ms: the retry on a fresh connection did not help")
	}

	px.SetLatency(0)
	healthy := NewTally()
	Drive(ctx, 4, 20, func(ctx context.Context, i int) {
		r := c.Do(ctx, "GET", child.ListURL(p.Base, Groups[i%len(Groups)], child.PropsFor(3000+i)), tok)
		why := ""
		if r.Status != 200 {
			why = "not 200 on a healthy upstream"
		}
		healthy.Add(r, why)
	})
	t.Log("healthy again: " + healthy.Summary("every listing succeeds"))
	if healthy.Lost() != 0 {
		t.Errorf("%d listings failed once the upstream was healthy", healthy.Lost())
	}

	fillPool(t, c, p, px, tok, &seq)
	after := settled(t, p, base, leakSlack)
	t.Logf("after: %s, %d LDAP connections (baseline %s)", after, px.Live(), base)
	if px.Live() > poolSize {
		t.Errorf("the proxy holds %d connections, more than the pool's %d", px.Live(), poolSize)
	}
}

// settled waits until the program's goroutines and descriptors are at most limit's
// plus slack (any values when limit is zero, once two readings agree), and returns
// the reading. It fails the test, naming the excess, when they do not get there: a
// leak.
func settled(t *testing.T, p *child.Program, limit child.Resources, slack int) child.Resources {
	t.Helper()
	ctx := context.Background()
	var last child.Resources
	child.Eventually(t, 30*time.Second, "goroutines and descriptors settle at the baseline", func() (bool, string) {
		r, err := p.Resources(ctx)
		if err != nil {
			return false, err.Error()
		}
		prev := last
		last = r
		if limit.Goroutines == 0 {
			return r.Goroutines == prev.Goroutines && r.OpenFDs == prev.OpenFDs, r.String()
		}
		return r.Goroutines <= limit.Goroutines+slack && r.OpenFDs <= limit.OpenFDs,
			fmt.Sprintf("%s, baseline %s (slack %d goroutines): a leak", r, limit, slack)
	})
	return last
}
