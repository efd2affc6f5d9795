package cache

import (
	"errors"
	"slices"
	"strconv"
	"strings"
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
			// Requests for different groups share reads too, each getting its own
			// keys' values.
			keys := []string{"a", "b"}
			if w%4 == 0 {
				keys = []string{"c", "a"}
			}
			for range rounds {
				arrived := clock.Add(1)
				vals, err := v.get(keys, func(ks []string) ([]string, error) {
					reads.Add(1)
					started := strconv.FormatInt(clock.Add(1), 10)
					time.Sleep(50 * time.Microsecond) // a round trip
					// Each value names its key and when the read started.
					out := make([]string, len(ks))
					for i, k := range ks {
						out[i] = k + "@" + started
					}
					return out, nil
				})
				if err != nil {
					t.Error(err)
					return
				}
				for i, k := range keys {
					key, at, _ := strings.Cut(vals[i], "@")
					if key != k {
						t.Errorf("key %s got the value of %s", k, key)
						return
					}
					if started, _ := strconv.ParseInt(at, 10, 64); started <= arrived {
						t.Errorf("a request that arrived at %d used a read started at %d", arrived, started)
						return
					}
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
	if _, err := v.get([]string{"k"}, func([]string) ([]string, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("err %v", err)
	}
	vals, err := v.get([]string{"k"}, func([]string) ([]string, error) { return []string{"x"}, nil })
	if err != nil || len(vals) != 1 || vals[0] != "x" {
		t.Fatalf("after a failure: %v, %v", vals, err)
	}
}

// Requests for different groups that arrive while a read is in flight share the
// next read, which asks for the union of their keys; a read that answers fewer
// values than keys fails its requests instead of misplacing values.
func TestVersionReadsUnion(t *testing.T) {
	var v versionReads
	release := make(chan struct{})
	var asked [][]string
	var mu sync.Mutex
	read := func(ks []string) ([]string, error) {
		mu.Lock()
		asked = append(asked, append([]string(nil), ks...))
		first := len(asked) == 1
		mu.Unlock()
		if first {
			<-release // the read in flight
		}
		return ks, nil // each key's value is its name
	}
	var wg sync.WaitGroup
	wg.Go(func() { v.get([]string{"a"}, read) })
	for { // until the first read is in flight
		mu.Lock()
		n := len(asked)
		mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	got := make([][]string, 2)
	for i, keys := range [][]string{{"b", "c"}, {"c", "d"}} {
		wg.Go(func() {
			vals, err := v.get(keys, read)
			if err != nil {
				t.Error(err)
			}
			got[i] = vals
		})
	}
	for { // until both have joined the next batch
		v.mu.Lock()
		n := 0
		if v.gathering != nil {
			n = len(v.gathering.keys)
		}
		v.mu.Unlock()
		if n == 3 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	if len(asked) == 2 {
		slices.Sort(asked[1]) // in the order the requests joined
	}
	if len(asked) != 2 || strings.Join(asked[1], ",") != "b,c,d" {
		t.Fatalf("reads %v, want [a] then one of [b c d]", asked)
	}
	if strings.Join(got[0], ",") != "b,c" || strings.Join(got[1], ",") != "c,d" {
		t.Fatalf("values %v", got)
	}

	if _, err := v.get([]string{"x", "y"}, func([]string) ([]string, error) { return []string{"x"}, nil }); !errors.Is(err, errShortRead) {
		t.Fatalf("a short read gave %v", err)
	}
}
