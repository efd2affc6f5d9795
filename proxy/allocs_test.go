package proxy_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/dirgate/dirgate/proxy"
	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/test/harness/redistest"
)

// maxCachedAllocs bounds the allocations of one cached listing served through the
// handler (BenchmarkCachedListing's path: token, resolution, the first level trusted
// under the cache's lease in a real Redis, the bundled policy, the shared body, the
// named group's visibility decision). It measures 55 without the race detector, for
// the administrator and for a caller denied half the listing; a regression that
// allocates per object adds a thousand. (AllocsPerRun counts every goroutine's
// allocations: the headroom is for the cache's and the Redis client's background
// work, and for requests that read tokens while the lease is being renewed on a
// loaded machine, about 40 more each.)
const maxCachedAllocs = 100

// TestCachedListingAllocations keeps the bound stated in docs/benchmarks.md from
// regressing unseen: allocations per cached request do not grow with the listing.
func TestCachedListingAllocations(t *testing.T) {
	redis := redistest.Start(t)
	h := cachedHandler(t, largeDirectory(t, 1000), halfCallerPolicy(t), redis.Addr(), "allocs:")
	for _, caller := range []string{"all", "half"} {
		r, _ := http.NewRequest(http.MethodGet, api+"?group="+url.QueryEscape(fixture.AllStaffDN), nil)
		r.Header.Set(proxy.HeaderToken, caller)
		r.Header.Set("Accept-Encoding", "gzip")
		serve := func() {
			w := &discardWriter{h: http.Header{}}
			h.ServeHTTP(w, r)
			if w.code != http.StatusOK {
				t.Fatalf("status %d", w.code)
			}
		}
		serve() // fills the cache, the decisions and the body
		serve()
		n := testing.AllocsPerRun(200, serve)
		t.Logf("%s: %.0f allocations per cached request", caller, n)
		if n > maxCachedAllocs {
			t.Errorf("%s: %.0f allocations per cached request, more than %d", caller, n, maxCachedAllocs)
		}
	}
}
