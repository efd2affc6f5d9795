package proxy_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/cache"
	"github.com/dirgate/dirgate/policy"
	"github.com/dirgate/dirgate/policy/decisionlog"
	"github.com/dirgate/dirgate/proxy"
	"github.com/dirgate/dirgate/redisconn"
	"github.com/dirgate/dirgate/render"
	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/test/harness/redistest"
	"github.com/dirgate/dirgate/throttle"
	"github.com/dirgate/dirgate/upstream/memory"
)

// discardWriter is a ResponseWriter that counts the bytes written and keeps none, so
// that the benchmark measures the handler, not a recorder's copy.
type discardWriter struct {
	h     http.Header
	code  int
	bytes int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }
func (w *discardWriter) Write(b []byte) (int, error) { w.bytes += len(b); return len(b), nil }

// cachedHandler is the API as deployed over dir: the cache in Redis at addr (keys
// under prefix), authz, shared bodies, and the tokens "all" (the administrator) and
// "half" (a caller who may view about half of All Staff with policyWithRole).
func cachedHandler(b testing.TB, dir dirgate.Directory, authz dirgate.Authorizer, addr, prefix string) http.Handler {
	b.Helper()
	return cachedHandlerTimeout(b, dir, authz, addr, prefix, cache.DefaultTimeout)
}

// cachedHandlerTimeout is cachedHandler with another DIRGATE_REDIS_TIMEOUT.
func cachedHandlerTimeout(b testing.TB, dir dirgate.Directory, authz dirgate.Authorizer, addr, prefix string, timeout time.Duration) http.Handler {
	b.Helper()
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	client, err := redisconn.Config{Addrs: []string{addr}, Metrics: true}.Open(timeout) // as cmd/dirgate opens it
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { client.Close() })
	c, err := cache.Config{Logger: quiet, Secret: []byte("the proxy benchmarks secret, 32+ bytes"), Redis: client, KeyPrefix: prefix, Timeout: timeout}.Open(ctx, dir)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	svc := &dirgate.MemberService{Dir: c, Listings: c, Authz: authz}
	auth := tokenAuth{}
	for name, dn := range map[string]string{"all": fixture.DemoAdminDN, "half": fixture.FutureExpiryDN} {
		if auth[name], err = svc.Principal(ctx, dirgate.MustParseIdentifier(dn)); err != nil {
			b.Fatal(err)
		}
	}
	h, err := proxy.New(proxy.Config{Authenticator: auth, Service: svc, Bodies: render.NewLister(svc, render.NewBodyCache(64<<20)), Logger: quiet,
		Throttle: newThrottle(b, &proxy.Config{}, throttle.Config{})})
	if err != nil {
		b.Fatal(err)
	}
	return h
}

// largeDirectory is the large fixture in the memory upstream, with All Staff cut to
// its first n members.
func largeDirectory(tb testing.TB, n int) *memory.Directory {
	tb.Helper()
	org := fixture.Large()
	all := org.MustObject(fixture.AllStaffDN)
	all.Members = all.Members[:n]
	dir, err := memory.Load("large", fixture.Export(org))
	if err != nil {
		tb.Fatal(err)
	}
	return dir
}

// halfCallerPolicy is the bundled policy plus a role letting the "half" caller view
// the Finance and HR OUs, with its decision log encoded to io.Discard.
func halfCallerPolicy(tb testing.TB) *policy.Authorizer {
	tb.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	authz, err := policy.Open(context.Background(), policy.Config{Dir: policyWithRole(tb, fixture.FutureExpiryDN, fixture.FinanceOU, fixture.HROU),
		Logger: quiet, DecisionLog: discardedLines(tb)})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { authz.Close() })
	return authz
}

// BenchmarkCachedListing is the hot path of a cached listing through the handler as
// deployed: token to principal (a map here), the group's resolution and its listing
// from the cache's first level, trusted under the cache's lease in a real
// redis-server (docs/cache.md), the bundled policy plus one role, the shared body, and its coding.
// The group is the large fixture's All Staff cut to n members; "all" is the
// administrator, "half" a caller who may view the Finance and HR OUs (about half).
func BenchmarkCachedListing(b *testing.B) {
	authz := halfCallerPolicy(b)
	redis := redistest.Start(b)
	for _, n := range []int{1000, 2000} {
		h := cachedHandler(b, largeDirectory(b, n), authz, redis.Addr(), fmt.Sprintf("bench%d:", n))
		target := api + "?group=" + url.QueryEscape(fixture.AllStaffDN)
		for _, caller := range []string{"all", "half"} {
			for _, coding := range []string{"identity", "gzip", "zstd"} {
				b.Run(fmt.Sprintf("members=%d/caller=%s/coding=%s", n, caller, coding), func(b *testing.B) {
					r, _ := http.NewRequest(http.MethodGet, target, nil)
					r.Header.Set(proxy.HeaderToken, caller)
					r.Header.Set("Accept-Encoding", coding)
					w := &discardWriter{h: http.Header{}}
					h.ServeHTTP(w, r) // fills the cache and the body
					if w.code != http.StatusOK || w.h.Get(proxy.CacheHeader) != "miss" && w.h.Get(proxy.CacheHeader) != "hit" {
						b.Fatalf("status %d, cache %q", w.code, w.h.Get(proxy.CacheHeader))
					}
					for b.Loop() {
						w = &discardWriter{h: http.Header{}}
						h.ServeHTTP(w, r)
						if w.code != http.StatusOK || w.h.Get(proxy.CacheHeader) != "hit" {
							b.Fatalf("status %d, cache %q", w.code, w.h.Get(proxy.CacheHeader))
						}
					}
					b.ReportMetric(float64(w.bytes), "body-bytes")
				})
			}
		}
	}
}

// discardedLines is a decision log encoding every line, as dirgate does, to
// io.Discard.
func discardedLines(tb testing.TB) policy.DecisionLog {
	dlog, err := decisionlog.New(decisionlog.Config{Writer: io.Discard})
	if err != nil {
		tb.Fatal(err)
	}
	return dlog
}
