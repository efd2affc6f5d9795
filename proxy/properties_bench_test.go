package proxy_test

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/dirgate/dirgate/proxy"
	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/test/harness/redistest"
)

// BenchmarkCachedListingProperties is BenchmarkCachedListing asking for four
// public properties, none secret (docs/policy.md, "Listings with properties"):
// the bundled policy's property rule withholds none of them from these callers.
func BenchmarkCachedListingProperties(b *testing.B) {
	authz := halfCallerPolicy(b)
	redis := redistest.Start(b)
	const n = 2000
	h := cachedHandler(b, largeDirectory(b, n), authz, redis.Addr(), "benchprops:")
	target := api + "?group=" + url.QueryEscape(fixture.AllStaffDN) + "&properties=mail,department,title,accountExpires"
	for _, caller := range []string{"all", "half"} {
		b.Run(fmt.Sprintf("members=%d/caller=%s", n, caller), func(b *testing.B) {
			r, _ := http.NewRequest(http.MethodGet, target, nil)
			r.Header.Set(proxy.HeaderToken, caller)
			r.Header.Set("Accept-Encoding", "identity")
			w := &discardWriter{h: http.Header{}}
			h.ServeHTTP(w, r) // fills the cache and the body
			if w.code != http.StatusOK {
				b.Fatalf("status %d", w.code)
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
