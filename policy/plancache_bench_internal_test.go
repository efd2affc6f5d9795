package policy

import (
	"strconv"
	"testing"
)

// BenchmarkPlanCache is the plan cache alone: "hit" is what every listing and every
// view decision pays to find its caller's plan (a key among 512 kept plans), from
// one goroutine and from all of them at once; "churn" is a workload of more keys
// than the cache keeps, where every request builds and evicts.
func BenchmarkPlanCache(b *testing.B) {
	const kept = 512
	keys := make([]string, 4*kept)
	for i := range keys {
		keys[i] = "view\x00CN=Caller " + strconv.Itoa(i) + ",OU=Staff,DC=corp,DC=example,DC=com\x00group"
	}
	build := func() (*plan, error) { return &plan{}, nil }
	warm := func() *planCache {
		c := newPlanCache(kept)
		for _, k := range keys[:kept] {
			c.put(k, &plan{})
		}
		return c
	}
	b.Run("hit", func(b *testing.B) {
		c := warm()
		i := 0
		for b.Loop() {
			if _, cached, _ := c.getOrBuild(keys[i%kept], build); !cached {
				b.Fatal("a kept plan was built again")
			}
			i++
		}
	})
	b.Run("hit-parallel", func(b *testing.B) {
		c := warm()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				if _, cached, _ := c.getOrBuild(keys[i%kept], build); !cached {
					b.Fatal("a kept plan was built again")
				}
				i += 7
			}
		})
	})
	b.Run("churn", func(b *testing.B) {
		c := warm()
		i := 0
		for b.Loop() {
			c.getOrBuild(keys[i%len(keys)], build)
			i++
		}
	})
}
