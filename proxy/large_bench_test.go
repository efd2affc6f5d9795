package proxy_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/cache"
	"github.com/dirgate/dirgate/policy"
	"github.com/dirgate/dirgate/proxy"
	"github.com/dirgate/dirgate/render"
	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/test/harness/redistest"
	"github.com/dirgate/dirgate/test/tools/load"
	"github.com/dirgate/dirgate/throttle"
	"github.com/dirgate/dirgate/upstream/memory"
)

// BenchmarkLargeCachedListing is a repeated cached listing of a generated group of n
// members (docs/benchmarks.md, "Large listings"), as the large-group target measures it: the
// memory upstream, the in-process store (no Redis), an allow-all policy, bodies kept
// in a quarter of the cache's bound as cmd/dirgate keeps them. max-bytes=default is
// DIRGATE_CACHE_MAX_BYTES's default (256 MiB), 64MiB a quarter of it: the 100,000-
// and 250,000-member listings exceed it, decoded and rendered. The metric to compare
// across sizes is ns/member: a flat line is no cliff.
func BenchmarkLargeCachedListing(b *testing.B) {
	if testing.Short() {
		b.Skip("builds directories of up to 100,000 users")
	}
	sizes := []int{1000, 10000, 30000, 60000, 100000, 250000}
	authz := allowAllAuthorizer(b)
	for _, n := range sizes {
		// One parent per size, so that -bench selecting one size builds only its
		// directory (the sub-benchmarks keep their names).
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			dir := generatedDirectory(b, n)
			for _, mb := range []int64{0, 64 << 20} {
				name := "default"
				if mb != 0 {
					name = fmt.Sprintf("%dMiB", mb>>20)
				}
				h := inProcessHandler(b, dir, authz, mb)
				for _, coding := range []string{"identity", "gzip"} {
					b.Run(fmt.Sprintf("max-bytes=%s/coding=%s", name, coding), func(b *testing.B) {
						benchCachedHit(b, h, n, coding)
					})
				}
			}
		})
	}
}

// benchCachedHit fills h's cache with the generated listing of n members and
// measures the cached hits that follow.
func benchCachedHit(b *testing.B, h http.Handler, n int, coding string) {
	r, _ := http.NewRequest(http.MethodGet, api+"?group="+url.QueryEscape(generatedGroupDN), nil)
	r.Header.Set(proxy.HeaderToken, "all")
	r.Header.Set("Accept-Encoding", coding)
	w := &discardWriter{h: http.Header{}}
	h.ServeHTTP(w, r) // fills the cache and the body
	if w.code != http.StatusOK {
		b.Fatalf("status %d", w.code)
	}
	if h.ServeHTTP(w, r); w.h.Get(proxy.CacheHeader) != "hit" {
		b.Skipf("not cached (cache %q): the entry exceeds the store's bound", w.h.Get(proxy.CacheHeader))
	}
	for b.Loop() {
		w = &discardWriter{h: http.Header{}}
		h.ServeHTTP(w, r)
		if w.code != http.StatusOK || w.h.Get(proxy.CacheHeader) != "hit" {
			b.Fatalf("status %d, cache %q", w.code, w.h.Get(proxy.CacheHeader))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/member")
	b.ReportMetric(float64(w.bytes), "body-bytes")
}

// generatedDirectory is the large fixture in the memory upstream with n more users
// under OU=Staff, all of them the direct members of generatedGroupDN.
func generatedDirectory(tb testing.TB, n int) *memory.Directory {
	tb.Helper()
	dir, err := memory.Load(fmt.Sprintf("generated%d", n), load.GeneratedExport(n))
	if err != nil {
		tb.Fatal(err)
	}
	return dir
}

const generatedGroupDN = load.GeneratedGroupDN

// allowAllAuthorizer is a policy allowing every caller everything.
func allowAllAuthorizer(tb testing.TB) *policy.Authorizer {
	tb.Helper()
	d := tb.TempDir()
	if err := os.WriteFile(filepath.Join(d, "authz.rego"), []byte("package dirgate.authz\n\nallow if true\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	authz, err := policy.Open(context.Background(), policy.Config{Dir: d, Logger: quiet, DecisionLog: discardedLines(tb)})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { authz.Close() })
	return authz
}

// inProcessHandler is the API as cmd/dirgate wires it without Redis: the in-process
// store and first level bounded by maxBytes (0: the default), bodies by a quarter of
// it, and the token "all" for the administrator.
func inProcessHandler(tb testing.TB, dir dirgate.Directory, authz dirgate.Authorizer, maxBytes int64) http.Handler {
	tb.Helper()
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	c, err := cache.Config{Logger: quiet, MaxBytes: maxBytes}.Open(ctx, dir)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	if maxBytes == 0 {
		maxBytes = cache.DefaultMaxBytes
	}
	svc := &dirgate.MemberService{Dir: c, Listings: c, Authz: authz}
	p, err := svc.Principal(ctx, dirgate.MustParseIdentifier(fixture.DemoAdminDN))
	if err != nil {
		tb.Fatal(err)
	}
	h, err := proxy.New(proxy.Config{Authenticator: tokenAuth{"all": p}, Service: svc,
		Bodies: render.NewLister(svc, render.NewBodyCache(maxBytes/4)), Logger: quiet,
		Throttle: newThrottle(tb, &proxy.Config{}, throttle.Config{})})
	if err != nil {
		tb.Fatal(err)
	}
	return h
}

// BenchmarkLargeFirstListing is the first listing of a generated group of n members
// (docs/benchmarks.md, "Large listings"): a cache miss, read from the memory
// upstream, encoded, stored, decided and written, each iteration on a new cache.
// cpu-ns/member is the figure the large-group target bounds (10 µs); divide allocs/op by the
// members for what the collector follows per member.
func BenchmarkLargeFirstListing(b *testing.B) {
	if testing.Short() {
		b.Skip("builds directories of up to 100,000 users")
	}
	authz := allowAllAuthorizer(b)
	target := api + "?group=" + url.QueryEscape(generatedGroupDN)
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			dir := generatedDirectory(b, n)
			b.ReportAllocs()
			var cpu time.Duration
			for b.Loop() {
				b.StopTimer()
				h := inProcessHandler(b, dir, authz, 0)
				r, _ := http.NewRequest(http.MethodGet, target, nil)
				r.Header.Set(proxy.HeaderToken, "all")
				w := &discardWriter{h: http.Header{}}
				b.StartTimer()
				start := cpuTime()
				h.ServeHTTP(w, r)
				cpu += cpuTime() - start
				if w.code != http.StatusOK || w.h.Get(proxy.CacheHeader) != "miss" {
					b.Fatalf("status %d, cache %q", w.code, w.h.Get(proxy.CacheHeader))
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/member")
			// The process's CPU (every thread: the collector's too) during the listings:
			// on a shared machine wall time also counts the waits for a core.
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/float64(n), "cpu-ns/member")
		})
	}
}

// BenchmarkLargeRedisListing is a cached listing of a generated group of n members
// with Redis (docs/benchmarks.md, "Large listings"), and reports what Redis holds for
// it: the largest key's MEMORY USAGE (the listing's sealed entry) per member, and the
// share of requests served as hits.
func BenchmarkLargeRedisListing(b *testing.B) {
	if testing.Short() {
		b.Skip("builds directories of up to 60,000 users")
	}
	authz := allowAllAuthorizer(b)
	for _, n := range []int{1000, 10000, 60000} {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			redis := redistest.Start(b)
			// A second for Redis, not 100 ms: writing a listing of 60,000 members (38 MB)
			// takes longer than the default on a busy machine.
			h := cachedHandlerTimeout(b, generatedDirectory(b, n), authz, redis.Addr(), "large:", time.Second)
			r, _ := http.NewRequest(http.MethodGet, api+"?group="+url.QueryEscape(generatedGroupDN), nil)
			r.Header.Set(proxy.HeaderToken, "all")
			// On a busy machine the first fill's write can outlast the Redis timeout
			// (the cache then bypasses Redis for a second): fill until it is stored.
			// A listing is kept in the first level only once it is stored: fill
			// until the next request is a hit.
			var w *discardWriter
			for try := 0; ; try++ {
				if try == 5 {
					b.Fatalf("the listing was not stored in 5 tries")
				}
				time.Sleep(time.Duration(try) * 1100 * time.Millisecond)
				for range 2 {
					w = &discardWriter{h: http.Header{}}
					h.ServeHTTP(w, r)
					if w.code != http.StatusOK {
						b.Fatalf("status %d", w.code)
					}
				}
				if w.h.Get(proxy.CacheHeader) == "hit" {
					break
				}
			}
			largest := largestValue(b, redis, "large:*")
			hits := 0
			for b.Loop() {
				w = &discardWriter{h: http.Header{}}
				h.ServeHTTP(w, r)
				if w.code != http.StatusOK {
					b.Fatalf("status %d", w.code)
				}
				if w.h.Get(proxy.CacheHeader) == "hit" {
					hits++
				}
			}
			b.ReportMetric(float64(hits)/float64(b.N), "hit-share")
			b.ReportMetric(float64(largest)/float64(n), "redis-bytes/member")
			b.ReportMetric(float64(w.bytes)/float64(n), "body-bytes/member")
		})
	}
}

// largestValue is the largest MEMORY USAGE of the keys matching pattern.
func largestValue(b *testing.B, redis *redistest.Server, pattern string) int {
	keys, err := redis.Do("KEYS", pattern)
	if err != nil {
		b.Fatal(err)
	}
	largest := 0
	for _, k := range strings.Fields(keys) {
		v, err := redis.Do("MEMORY", "USAGE", k)
		if err != nil {
			b.Fatal(err)
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatalf("MEMORY USAGE %s: %q", k, v)
		}
		largest = max(largest, n)
	}
	return largest
}

// BenchmarkLargeUpstreamMembers is the memory upstream's part of a first listing:
// Members of the generated group of n members, each rendered by Entry.ToObject, and
// nothing else. Beside BenchmarkLargeFirstListing it splits a fill's cost between
// the upstream and the rest (encoding, storing, deciding, rendering).
func BenchmarkLargeUpstreamMembers(b *testing.B) {
	if testing.Short() {
		b.Skip("builds directories of up to 100,000 users")
	}
	ctx := context.Background()
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			dir := generatedDirectory(b, n)
			group, err := dir.Lookup(ctx, dirgate.MustParseIdentifier(generatedGroupDN), nil)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			var cpu time.Duration
			for b.Loop() {
				start := cpuTime()
				objs, err := dir.Members(ctx, group, nil)
				cpu += cpuTime() - start
				if err != nil || len(objs) < n {
					b.Fatalf("%d members, %v", len(objs), err)
				}
			}
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/float64(n), "cpu-ns/member")
		})
	}
}
