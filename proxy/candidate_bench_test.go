package proxy_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"syscall"
	"testing"
	"time"

	"github.com/dirgate/dirgate/policy"
	"github.com/dirgate/dirgate/policy/candidate"
	"github.com/dirgate/dirgate/proxy"
	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/test/harness/redistest"
)

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCachedListingCandidate is BenchmarkCachedListing's hot path (real
// redis-server, 2,000 members, the decision log on) without a candidate policy and
// with one at sample 1 that differs from the active policy (it grants the caller a
// different OU), for the ratio of their throughputs in one run. It also reports the
// process's CPU time per request.
func BenchmarkCachedListingCandidate(b *testing.B) {
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	redis := redistest.Start(b)
	dir := largeDirectory(b, 2000)
	active := policyWithRole(b, fixture.FutureExpiryDN, fixture.FinanceOU, fixture.HROU)
	candDir := policyWithRole(b, fixture.FutureExpiryDN, fixture.FinanceOU, fixture.SalesOU)
	for _, tc := range []struct{ name, candidate string }{{"none", ""}, {"sample1", candDir}} {
		dlog := discardedLines(b)
		pcfg := policy.Config{Dir: active, Logger: quiet, DecisionLog: dlog}
		if tc.candidate != "" {
			cand, err := candidate.Open(ctx, candidate.Config{Dir: tc.candidate, Logger: quiet, MaxNamed: dlog.MaxNamed()})
			if err != nil {
				b.Fatal(err)
			}
			pcfg.Shadow = cand
		}
		authz, err := policy.Open(ctx, pcfg)
		if err != nil {
			b.Fatal(err)
		}
		defer authz.Close()
		h := cachedHandler(b, dir, authz, redis.Addr(), "cand-"+tc.name+":")
		target := api + "?group=" + url.QueryEscape(fixture.AllStaffDN)
		for _, caller := range []string{"all", "half"} {
			b.Run(fmt.Sprintf("candidate=%s/caller=%s", tc.name, caller), func(b *testing.B) {
				r, _ := http.NewRequest(http.MethodGet, target, nil)
				r.Header.Set(proxy.HeaderToken, caller)
				w := &discardWriter{h: http.Header{}}
				h.ServeHTTP(w, r) // fills the cache, the plans and the body
				if w.code != http.StatusOK {
					b.Fatalf("status %d", w.code)
				}
				start := cpuTime()
				for b.Loop() {
					w = &discardWriter{h: http.Header{}}
					h.ServeHTTP(w, r)
					if w.code != http.StatusOK || w.h.Get(proxy.CacheHeader) != "hit" {
						b.Fatalf("status %d, cache %q", w.code, w.h.Get(proxy.CacheHeader))
					}
				}
				b.ReportMetric(float64((cpuTime()-start).Microseconds())/float64(b.N), "cpu-µs/op")
			})
		}
	}
}
