package proxy_test

import (
	"fmt"
	"net/http"
	"net/url"
	"runtime"
	"testing"

	"github.com/dirgate/dirgate/proxy"
)

// BenchmarkLargeListingHeap is the heap a served listing of a generated group of n
// members holds (the target: at most 3 times its body): the heap in use after a
// collection once the listing has been served (filled, then a hit, in identity,
// gzip and zstd, so that its body and compressed forms are made), less the heap
// before it with the same directory and handler. The in-process store (no Redis),
// an allow-all policy, the default bounds. Each iteration serves the listing from a
// new handler, and the last one is reported: run it with -benchtime 2x, the first
// iteration making what the process keeps once for every listing (the compressors'
// encoders and their history, the policy's compiled queries: 1 to 3 MB). A handler
// is only released when the benchmark ends. heap/body is the figure the issue
// bounds.
func BenchmarkLargeListingHeap(b *testing.B) {
	if testing.Short() {
		b.Skip("builds directories of up to 100,000 users")
	}
	authz := allowAllAuthorizer(b)
	target := api + "?group=" + url.QueryEscape(generatedGroupDN)
	for _, n := range []int{10000, 100000} {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			dir := generatedDirectory(b, n)
			var held, body int64
			for b.Loop() {
				h := inProcessHandler(b, dir, authz, 0)
				before := heapInUse()
				for _, coding := range []string{"identity", "identity", "gzip", "zstd"} {
					r, _ := http.NewRequest(http.MethodGet, target, nil)
					r.Header.Set(proxy.HeaderToken, "all")
					r.Header.Set("Accept-Encoding", coding)
					w := &discardWriter{h: http.Header{}}
					h.ServeHTTP(w, r)
					if w.code != http.StatusOK {
						b.Fatalf("status %d", w.code)
					}
					if coding == "identity" {
						body = int64(w.bytes)
					}
				}
				held = int64(heapInUse()) - int64(before)
				runtime.KeepAlive(h)
			}
			b.ReportMetric(float64(held)/float64(n), "heap-bytes/member")
			b.ReportMetric(float64(body)/float64(n), "body-bytes/member")
			b.ReportMetric(float64(held)/float64(body), "heap/body")
		})
	}
}

// heapInUse is the heap's live bytes after a full collection (two, so that objects
// freed by cleanups of the first are gone).
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
