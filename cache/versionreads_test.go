package cache

import (
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestVersionReadsNeverEarly: however requests interleave, each one's values come
// from a read that began after the request did, and concurrent requests share reads.
func TestVersionReadsNeverEarly(t *testing.T) {
	var v versionReads
	var clock, reads atomic.Int64 // clock orders arrivals and read starts
	var wg sync.WaitGroup
	const workers, rounds = 16, 200
	for w := range workers {
		wg.Go(func() {
			keys := []string{"a", "b"}
			if w%4 == 0 {
				keys = []string{"c"} // another set of groups: never shares with a, b
			}
			for range rounds {
				arrived := clock.Add(1)
				vals, err := v.get(keys, func() ([]string, error) {
					reads.Add(1)
					started := clock.Add(1)
					time.Sleep(50 * time.Microsecond) // a round trip
					// The values say whose read it was and when it started.
					return []string{keys[0], strconv.FormatInt(started, 10)}, nil
				})
				if err != nil {
					t.Error(err)
					return
				}
				if vals[0] != keys[0] {
					t.Errorf("keys %v got the values of %v", keys, vals[0])
					return
				}
				if started, _ := strconv.ParseInt(vals[1], 10, 64); started <= arrived {
					t.Errorf("a request that arrived at %d used a read started at %d", arrived, started)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := reads.Load(); n >= workers*rounds {
		t.Errorf("%d reads for %d requests: none shared", n, workers*rounds)
	}
}

// A failed read fails every request that shared it, and the next request reads again.
func TestVersionReadsError(t *testing.T) {
	var v versionReads
	boom := errors.New("boom")
	if _, err := v.get([]string{"k"}, func() ([]string, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("err %v", err)
	}
	vals, err := v.get([]string{"k"}, func() ([]string, error) { return []string{"x"}, nil })
	if err != nil || len(vals) != 1 || vals[0] != "x" {
		t.Fatalf("after a failure: %v, %v", vals, err)
	}
}
