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
