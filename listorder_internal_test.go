package dirgate

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkSortObjects sorts a shuffled listing of n generated members, as a first
// fill does. Comparing DNs with their case folded byte by byte, instead of keeping a
// lowered copy of each, halved what it allocates (4.8 against 9.8 MB at 100,000) but
// took 104 ms against 64: not kept.
func BenchmarkSortObjects(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			objs := make([]Object, n)
			for i := range objs {
				objs[i] = Object{DN: fmt.Sprintf("CN=Generated User %d,OU=Staff,DC=corp,DC=example,DC=com", i), GUID: fmt.Sprintf("%08x-0000-0000-0000-000000000000", i)}
			}
			rng := rand.New(rand.NewPCG(1, 2))
			work := make([]Object, n)
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				copy(work, objs)
				rng.Shuffle(n, func(i, j int) { work[i], work[j] = work[j], work[i] })
				b.StartTimer()
				SortObjects(work)
			}
		})
	}
}
