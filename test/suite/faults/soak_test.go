package faults

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dirgate/dirgate/test/harness/child"
	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/test/harness/redistest"
	"github.com/dirgate/dirgate/test/harness/sambatest"
)

// soakDuration is DIRGATE_SOAK_DURATION (a Go duration), else 60 s, or 10 s with
// -short (go test ./... in make test runs the short form; make test-faults the long).
func soakDuration(t *testing.T) time.Duration {
	if v := os.Getenv("DIRGATE_SOAK_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("DIRGATE_SOAK_DURATION=%q: want a positive duration", v)
		}
		return d
	}
	if testing.Short() {
		return 10 * time.Second
	}
	return 60 * time.Second
}

// soakRequest is one kind of request of the soak's mix, with its documented answer.
type soakRequest struct {
	name   string
	method string
	url    func(i int) string
	token  string
	client *child.Client
	check  func(child.Result) string // "" when the answer is the documented one
}

func wantStatus(status int) func(child.Result) string {
	return func(r child.Result) string {
		if r.Status != status {
			return fmt.Sprintf("want %d", status)
		}
		if status >= 400 {
			if _, err := child.CheckError(r); err != nil {
				return err.Error()
			}
		}
		return ""
	}
}

// TestSoak runs a mix of requests over a fixed set of listings for soakDuration
// against the DC (through the Redis cache when the program has it, with a 5 s TTL)
// and samples the program's heap, goroutines
// and descriptors every 500 ms from its /metrics.
//
// Expected, and asserted: every request gets its documented answer (nothing lost),
// and memory is flat. The heap saw-tooths between collections, so the test compares
// its lows (just after a collection, close to the live heap): the lowest sample of
// the last third of the run may be at most 1.5 times the lowest of the first third
// plus 4 MiB. A leak of a kilobyte per request over 60 s at this rate would exceed it;
// the collector's and the allocator's noise does not. Goroutines and descriptors may
// not grow by more than 10 (connections opening and closing between samples). The
// first 10% of the run (at least 5 s) warms the caches and pools and is not compared.
func TestSoak(t *testing.T) {
	dc := sambatest.Env(t)
	child.RequireFixture(t, dc)
	duration := soakDuration(t)
	tok := child.NewToken(t, "soak-")
	// A short TTL makes the fixed set of listings refill from the DC every few
	// seconds, so that fills, not only hits, run all along; the set is fixed so that
	// the caches stop growing once it is warm.
	env := map[string]string{"DIRGATE_CACHE_TTL": "5s"}
	cached := strings.Contains(child.HelpText(t), "[DIRGATE_REDIS_ADDR]")
	if cached {
		env["DIRGATE_REDIS_ADDR"] = redistest.Start(t).Addr()
		env["DIRGATE_SECRET_FILE"] = child.WriteFile(t, "secret", "the soak test's secret, 32 bytes or more\n")
	}
	group := child.TempGroup(t, dc, "dirgate soak", fixture.RegularDN)
	p := child.Start(t, env, child.LDAPArgs(t, dc, dc.URL, child.WriteTokens(t, map[string]string{tok: fixture.DemoAdminDN}))...)
	c, guesser := child.NewClient(), child.ClientFrom("127.0.0.2")
	root := "http://" + p.Addr

	mix := []soakRequest{
		{name: "direct listing", url: func(i int) string { return child.ListURL(p.Base, Groups[i%len(Groups)], "") }, check: wantStatus(200)},
		{name: "nested listing with properties", url: func(i int) string {
			return child.ListURL(p.Base, Groups[i%len(Groups)], "&includeIndirect=true&properties=mail,description")
		}, check: wantStatus(200)},
		{name: "size-limited listing", url: func(i int) string { return child.ListURL(p.Base, fixture.AllStaffDN, "&sizeLimit=2") }, check: func(r child.Result) string {
			if r.Status != 200 || len(r.DNs()) != 2 {
				return "want 200 with 2 objects"
			}
			return ""
		}},
		{name: "listing with rotating properties", url: func(i int) string { return child.ListURL(p.Base, Groups[i%len(Groups)], child.PropsFor(i%8)) }, check: wantStatus(200)},
		{name: "unknown group", url: func(i int) string {
			return child.ListURL(p.Base, "CN=Nobody "+fmt.Sprint(i%7)+","+fixture.GroupsOU, "")
		}, check: wantStatus(404)},
		{name: "invalid parameter", url: func(i int) string { return child.ListURL(p.Base, Groups[0], "&sizeLimit=x") }, check: wantStatus(400)},
		{name: "unknown path", url: func(int) string { return root + "/restApi/api/nothing" }, check: wantStatus(404)},
		{name: "wrong method", method: "PUT", url: func(i int) string { return child.ListURL(p.Base, Groups[0], "") }, check: wantStatus(405)},
		{name: "removal of a non-member", method: "DELETE", url: func(int) string { return child.RemoveURL(p.Base, group, fixture.NeverExpiresDN) },
			check: func(r child.Result) string {
				if r.Status != 200 || !strings.Contains(string(r.Body), `"noChanges":true`) {
					return "want 200 noChanges"
				}
				return ""
			}},
		{name: "guessed token", client: guesser, token: "guess", url: func(i int) string { return child.ListURL(p.Base, Groups[0], "") },
			check: func(r child.Result) string {
				if r.Status != 401 && r.Status != 429 {
					return "want 401, or 429 once throttled"
				}
				_, err := child.CheckError(r)
				if err != nil {
					return err.Error()
				}
				return ""
			}},
	}
	// Weights: mostly listings, as in production.
	var schedule []int
	for k, w := range []int{20, 10, 4, 1, 2, 2, 1, 1, 1, 2} {
		for range w {
			schedule = append(schedule, k)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), duration)
	defer cancel()
	var samples []child.Resources
	var sampleTimes []time.Duration
	sampled := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(sampled)
		for ctx.Err() == nil {
			if r, err := p.Resources(context.Background()); err == nil {
				samples = append(samples, r)
				sampleTimes = append(sampleTimes, time.Since(start))
			}
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	tally := NewTally()
	var kindsMu sync.Mutex
	kinds := map[string]int{}
	Drive(ctx, 4, 0, func(ctx context.Context, i int) {
		m := mix[schedule[i%len(schedule)]]
		cl, tk, method := c, tok, "GET"
		if m.client != nil {
			cl = m.client
		}
		if m.token != "" {
			tk = m.token
		}
		if m.method != "" {
			method = m.method
		}
		r := cl.Do(context.Background(), method, m.url(i), tk)
		why := m.check(r)
		if why != "" {
			why = m.name + ": " + why
		}
		tally.Add(r, why)
		kindsMu.Lock()
		kinds[m.name]++
		kindsMu.Unlock()
		time.Sleep(10 * time.Millisecond) // bounded rate: the DC and this machine are shared
	})
	<-sampled
	if err := p.Stop(); err != nil {
		t.Errorf("dirgate did not exit cleanly after the soak: %v", err)
	}

	t.Logf("soak %v (Redis cache: %v): %s", duration, cached, tally.Summary("every request its documented answer"))
	t.Logf("request kinds: %v", kinds)
	if tally.Lost() != 0 {
		t.Errorf("%d requests lost during the soak", tally.Lost())
	}
	warm := max(5*time.Second, duration/10)
	var first, last []child.Resources
	for i, r := range samples {
		switch at := sampleTimes[i]; {
		case at < warm:
		case at < warm+(duration-warm)/3:
			first = append(first, r)
		case at >= duration-(duration-warm)/3:
			last = append(last, r)
		}
	}
	if len(first) < 3 || len(last) < 3 {
		t.Fatalf("too few samples to compare (%d first, %d last of %d)", len(first), len(last), len(samples))
	}
	heapLow := func(rs []child.Resources) float64 {
		return slices.MinFunc(rs, func(a, b child.Resources) int { return int(a.HeapAlloc - b.HeapAlloc) }).HeapAlloc
	}
	peak := func(rs []child.Resources, f func(child.Resources) int) int {
		m := 0
		for _, r := range rs {
			m = max(m, f(r))
		}
		return m
	}
	goroutines := func(r child.Resources) int { return r.Goroutines }
	fds := func(r child.Resources) int { return r.OpenFDs }
	const mib = 1 << 20
	t.Logf("heap low %.1f MiB -> %.1f MiB; goroutines peak %d -> %d; descriptors peak %d -> %d (%d samples)",
		heapLow(first)/mib, heapLow(last)/mib, peak(first, goroutines), peak(last, goroutines),
		peak(first, fds), peak(last, fds), len(samples))
	if heapLow(last) > 1.5*heapLow(first)+4*mib {
		t.Errorf("heap grew from %.1f MiB to %.1f MiB over the soak: more than 1.5x + 4 MiB", heapLow(first)/mib, heapLow(last)/mib)
	}
	if peak(last, goroutines) > peak(first, goroutines)+10 {
		t.Errorf("goroutines grew from %d to %d over the soak", peak(first, goroutines), peak(last, goroutines))
	}
	if peak(last, fds) > peak(first, fds)+10 {
		t.Errorf("descriptors grew from %d to %d over the soak", peak(first, fds), peak(last, fds))
	}
}
