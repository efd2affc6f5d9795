package policy

import (
	"errors"
	"testing"
	"time"
)

// TestPlanCacheRemembersFailures: with retryAfter, a failed build answers its error
// without building again until retryAfter has passed; without it, every request
// builds again.
func TestPlanCacheRemembersFailures(t *testing.T) {
	boom := errors.New("ran out of its budget")
	for _, retry := range []time.Duration{0, time.Hour, time.Nanosecond} {
		c := newPlanCache(4)
		c.retryAfter = retry
		builds := 0
		build := func() (*plan, error) { builds++; return nil, boom }
		for range 3 {
			if _, _, err := c.getOrBuild("k", build); !errors.Is(err, boom) {
				t.Fatalf("retry %v: err %v", retry, err)
			}
			time.Sleep(time.Millisecond)
		}
		want := 3
		if retry == time.Hour {
			want = 1
		}
		if builds != want {
			t.Errorf("retry %v: %d builds, want %d", retry, builds, want)
		}
		// Another key is not affected, and a success is cached as before.
		ok := func() (*plan, error) { return &plan{}, nil }
		if _, _, err := c.getOrBuild("other", ok); err != nil {
			t.Fatal(err)
		}
		if _, cached, _ := c.getOrBuild("other", ok); !cached {
			t.Errorf("retry %v: a built plan was not cached", retry)
		}
	}
	// The failures kept are bounded.
	c := newPlanCache(2)
	c.retryAfter = time.Hour
	for i := range 10 {
		c.getOrBuild(string(rune('a'+i)), func() (*plan, error) { return nil, boom })
	}
	if len(c.failed) > 2 {
		t.Errorf("%d failures kept, max 2", len(c.failed))
	}
}

// TestPlanCacheBoundedLRU: the cache keeps at most max plans; beyond it the least
// recently used goes, where a get counts as a use and a put of a kept key replaces
// its plan.
func TestPlanCacheBoundedLRU(t *testing.T) {
	c := newPlanCache(3)
	plans := map[string]*plan{}
	for _, k := range []string{"a", "b", "c"} {
		plans[k] = &plan{why: k}
		c.put(k, plans[k])
	}
	if _, ok := c.get("a"); !ok { // a is now the most recent; b the least
		t.Fatal("a is missing")
	}
	c.put("d", &plan{why: "d"})
	if n := c.len(); n != 3 {
		t.Errorf("%d plans kept, max 3", n)
	}
	if _, ok := c.get("b"); ok {
		t.Error("b was kept, the least recently used")
	}
	for _, k := range []string{"a", "c", "d"} {
		if _, ok := c.get(k); !ok {
			t.Errorf("%s was dropped", k)
		}
	}
	// Replacing c's plan keeps one entry for c and makes it the most recent: the
	// next new key drops a (used before c and d above).
	c.put("c", &plan{why: "c2"})
	c.put("e", &plan{why: "e"})
	if p, ok := c.get("c"); !ok || p.why != "c2" {
		t.Errorf("c = %v, %v; want the replaced plan", p, ok)
	}
	if _, ok := c.get("a"); ok {
		t.Error("a was kept, the least recently used")
	}
	if n := c.len(); n != 3 {
		t.Errorf("%d plans kept, max 3", n)
	}
	// The default size when none is given.
	if c := newPlanCache(0); c.max != DefaultPlanCacheSize {
		t.Errorf("newPlanCache(0).max = %d, want %d", c.max, DefaultPlanCacheSize)
	}
}
