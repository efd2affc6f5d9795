package memory_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/dirgate/dirgate/test/tools/load"
	"github.com/dirgate/dirgate/upstream/memory"
)

// BenchmarkLoadGenerated loads a generated AD export of n users (load.GeneratedExport,
// the export the load tool's large listings use) and reports what the loaded
// directory keeps on the heap per byte of LDIF (docs/benchmarks.md, "Large
// listings"; the target is at most 4), after a collection, the export itself not
// counted; and what the load allocated in all per byte of LDIF, most of it garbage
// the collector must get through. 100,000 members take a minute or more a load: run
// one size with, for example, -bench 'LoadGenerated/members=10000$'.
func BenchmarkLoadGenerated(b *testing.B) {
	for _, n := range []int{1000, 10000, 30000, 100000} {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			export := load.GeneratedExport(n)
			var held, allocated uint64
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				d, err := memory.Load("generated", export)
				if err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				held = after.HeapAlloc - before.HeapAlloc
				allocated = after.TotalAlloc - before.TotalAlloc
				runtime.KeepAlive(d)
			}
			b.ReportMetric(float64(held)/float64(len(export)), "heap-bytes/ldif-byte")
			b.ReportMetric(float64(allocated)/float64(len(export)), "alloc-bytes/ldif-byte")
			b.ReportMetric(float64(len(export))/float64(n), "ldif-bytes/member")
		})
	}
}
