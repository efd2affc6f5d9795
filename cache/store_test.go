package cache

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dirgate/dirgate/redisconn"
	"github.com/dirgate/dirgate/test/harness/redistest"
)

// backend is one store under test, with a way to let time pass for its expiry.
type backend struct {
	name    string
	open    func(t *testing.T) store
	advance func(t *testing.T, d time.Duration)
}

// backends are every store, each against what it runs on in production: the memory
// store with a fake clock, Redis as one real server and as a real three-node cluster.
func backends() []backend {
	sleep := func(t *testing.T, d time.Duration) { time.Sleep(d) }
	var clock *fakeClock
	return []backend{
		{
			name: "memory",
			open: func(t *testing.T) store {
				clock = newFakeClock()
				return newMemoryStore(1<<20, clock.Now)
			},
			advance: func(t *testing.T, d time.Duration) { clock.Advance(d) },
		},
		{
			name: "redis",
			open: func(t *testing.T) store {
				return openRedisStore(t, redisconn.Config{Addrs: []string{redistest.Start(t).Addr()}, Mode: redisconn.ModeSingle})
			},
			advance: sleep,
		},
		{
			name: "cluster",
			open: func(t *testing.T) store {
				return openRedisStore(t, redisconn.Config{Addrs: redistest.StartCluster(t).Addrs(), Mode: redisconn.ModeCluster})
			},
			advance: sleep,
		},
	}
}

func openRedisStore(t *testing.T, cfg redisconn.Config) store {
	t.Helper()
	return newRedisStore(redisClient(t, cfg), quiet)
}

// TestStoreConformance runs one suite against every backend: the cache's logic
// relies on nothing but what it checks.
func TestStoreConformance(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			s := b.open(t)
			ctx := t.Context()
			// Keys spread over cluster slots, and pairs that share a hash tag.
			ks := keys{prefix: "conf:"}
			g1, g2 := "00000000-0000-0000-0000-000000000001", "00000000-0000-0000-0000-000000000002"
			l1, _ := ks.listing(g1, false, nil)
			l2, _ := ks.listing(g2, true, []string{"mail"})

			t.Run("MissingKeysAreEmpty", func(t *testing.T) {
				got := mustGet(t, s, "conf:absent", ks.version(g1))
				if got[0] != "" || got[1] != "" {
					t.Errorf("get of missing keys = %q", got)
				}
			})
			t.Run("SetGetManyBinary", func(t *testing.T) {
				// Values are binary entries: every byte value must survive.
				var bin strings.Builder
				for i := range 256 {
					bin.WriteByte(byte(i))
				}
				want := []string{bin.String(), "two", strings.Repeat("x", 1<<16)}
				for i, k := range []string{l1, l2, "conf:big"} {
					if err := s.set(ctx, k, want[i], time.Minute); err != nil {
						t.Fatalf("set %s: %v", k, err)
					}
				}
				got := mustGet(t, s, l1, "conf:nothing", l2, "conf:big")
				if got[0] != want[0] || got[1] != "" || got[2] != want[1] || got[3] != want[2] {
					t.Errorf("get = lengths %d %d %d %d, want the values set around one missing key", len(got[0]), len(got[1]), len(got[2]), len(got[3]))
				}
				if err := s.set(ctx, l1, "replaced", time.Minute); err != nil {
					t.Fatal(err)
				}
				if got := mustGet(t, s, l1); got[0] != "replaced" {
					t.Errorf("after overwrite get = %q", got[0])
				}
			})
			t.Run("SetAll", func(t *testing.T) {
				// Tokens of groups in different slots, in one round trip.
				// Groups of their own: the other cases expect theirs missing or as they set them.
				v1, v2, v3 := ks.version("00000000-0000-0000-0000-0000000000a5"), ks.version("00000000-0000-0000-0000-0000000000a6"), ks.version("00000000-0000-0000-0000-0000000000a7")
				if err := s.setAll(ctx, []string{v1, v2, v3}, []string{"a", "b", "c"}, time.Minute); err != nil {
					t.Fatal(err)
				}
				if got := mustGet(t, s, v1, v2, v3); got[0] != "a" || got[1] != "b" || got[2] != "c" {
					t.Errorf("after setAll get = %q", got)
				}
				if err := s.setAll(ctx, []string{v1}, []string{"a2"}, time.Minute); err != nil {
					t.Fatal(err)
				}
				if got := mustGet(t, s, v1); got[0] != "a2" {
					t.Errorf("after setAll of one key get = %q", got[0])
				}
				if err := s.setAll(ctx, []string{v1, v2}, []string{"x", ""}, time.Minute); err == nil {
					t.Error("setAll with an empty value succeeded")
				}
			})
			t.Run("EmptyValueRefused", func(t *testing.T) {
				// "" means missing, so it can never be a value.
				if err := s.set(ctx, "conf:e", "", time.Minute); err == nil {
					t.Error("set of an empty value succeeded")
				}
			})
			t.Run("SetIf", func(t *testing.T) {
				v, l := ks.version(g2), func() string { k, _ := ks.listing(g2, false, []string{"a"}); return k }()
				if err := s.set(ctx, v, "tok1", time.Minute); err != nil {
					t.Fatal(err)
				}
				tests := []struct {
					name  string
					guard string
					want  bool
				}{
					// The version is what the fill read: the entry is stored.
					{"guard holds", "tok1", true},
					// The version changed since (a removal): the entry must not be stored.
					{"guard changed", "tok0", false},
				}
				for _, tc := range tests {
					ok, err := s.setIf(ctx, l, "val-"+tc.guard, time.Minute, v, tc.guard)
					if err != nil || ok != tc.want {
						t.Errorf("%s: setIf = %v, %v; want %v", tc.name, ok, err, tc.want)
					}
				}
				if got := mustGet(t, s, l); got[0] != "val-tok1" {
					t.Errorf("value = %q, want the one stored under the holding guard", got[0])
				}
				// A missing guard key never matches: a version that is gone cannot vouch.
				if ok, err := s.setIf(ctx, l, "x", time.Minute, "conf:{"+g2+"}:absent", "tok1"); err != nil || ok {
					t.Errorf("setIf with a missing guard = %v, %v; want false", ok, err)
				}
			})
			t.Run("GetOrSet", func(t *testing.T) {
				k := ks.version("00000000-0000-0000-0000-000000000003")
				if got, err := s.getOrSet(ctx, k, "first", time.Minute); err != nil || got != "first" {
					t.Fatalf("getOrSet on a missing key = %q, %v; want first", got, err)
				}
				if got, err := s.getOrSet(ctx, k, "second", time.Minute); err != nil || got != "first" {
					t.Errorf("getOrSet on a present key = %q, %v; want first (not overwritten)", got, err)
				}
			})
			t.Run("DelIf", func(t *testing.T) {
				k := ks.version("00000000-0000-0000-0000-000000000006")
				if err := s.set(ctx, k, "mine", time.Minute); err != nil {
					t.Fatal(err)
				}
				if err := s.delIf(ctx, k, "theirs"); err != nil {
					t.Fatal(err)
				}
				if got := mustGet(t, s, k); got[0] != "mine" {
					t.Fatalf("after delIf with another value: %q, want mine", got[0])
				}
				if err := s.delIf(ctx, k, "mine"); err != nil {
					t.Fatal(err)
				}
				if got := mustGet(t, s, k); got[0] != "" {
					t.Fatalf("after delIf with its value: %q, want nothing", got[0])
				}
				if err := s.delIf(ctx, k, "mine"); err != nil {
					t.Errorf("delIf on a missing key: %v", err)
				}
			})
			t.Run("GetOrSetIsAtomic", func(t *testing.T) {
				// Concurrent fills of one group must agree on one version token.
				k := ks.version("00000000-0000-0000-0000-000000000004")
				const n = 16
				got := make([]string, n)
				var wg sync.WaitGroup
				for i := range n {
					wg.Go(func() {
						v, err := s.getOrSet(ctx, k, "tok-"+string(rune('a'+i)), time.Minute)
						if err != nil {
							t.Error(err)
						}
						got[i] = v
					})
				}
				wg.Wait()
				for _, v := range got {
					if v != got[0] {
						t.Fatalf("concurrent getOrSet returned different tokens: %q", got)
					}
				}
			})
			t.Run("Expiry", func(t *testing.T) {
				// Every write takes a TTL, and values are gone once it has passed.
				v := ks.version("00000000-0000-0000-0000-000000000005")
				l, _ := ks.listing("00000000-0000-0000-0000-000000000005", false, nil)
				if err := s.set(ctx, "conf:ttl", "v", 50*time.Millisecond); err != nil {
					t.Fatal(err)
				}
				if _, err := s.getOrSet(ctx, v, "tok", 50*time.Millisecond); err != nil {
					t.Fatal(err)
				}
				if ok, err := s.setIf(ctx, l, "e", 50*time.Millisecond, v, "tok"); err != nil || !ok {
					t.Fatalf("setIf = %v, %v", ok, err)
				}
				if err := s.set(ctx, "conf:long", "v", time.Hour); err != nil {
					t.Fatal(err)
				}
				b.advance(t, 200*time.Millisecond)
				got := mustGet(t, s, "conf:ttl", v, l, "conf:long")
				if got[0] != "" || got[1] != "" || got[2] != "" || got[3] != "v" {
					t.Errorf("after the TTL get = %q; want the three short-lived values gone", got)
				}
			})
			t.Run("CanceledContext", func(t *testing.T) {
				cctx, cancel := context.WithCancel(ctx)
				cancel()
				if _, err := s.get(cctx, "conf:x"); err == nil {
					t.Error("get with a canceled context succeeded")
				}
			})
		})
	}
}

func mustGet(t *testing.T, s store, keys ...string) []string {
	t.Helper()
	got, err := s.get(t.Context(), keys...)
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if len(got) != len(keys) {
		t.Fatalf("get returned %d values for %d keys", len(got), len(keys))
	}
	return got
}

// fakeClock is a settable clock for the memory store and the cache.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestMemoryStoreBound: the in-process store keeps its values within its bound in
// bytes, pushing out the least recently used (a read counts as a use) until a new one
// fits; a value larger than the whole store is not kept, and takes the key's old value
// with it; an expired value is dropped when read; the bytes follow every way a value
// leaves.
func TestMemoryStoreBound(t *testing.T) {
	ctx := t.Context()
	clock := newFakeClock()
	// Each value below is accounted as 1 + 1 + memItemOverhead bytes: three fit.
	const each = 2 + memItemOverhead
	m := newMemoryStore(3*each+each/2, clock.Now)
	set := func(k, v string, ttl time.Duration) {
		t.Helper()
		if err := m.set(ctx, k, v, ttl); err != nil {
			t.Fatal(err)
		}
	}
	get := func(k string) string {
		t.Helper()
		v, err := m.get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		return v[0]
	}
	set("a", "1", time.Hour)
	set("b", "2", time.Hour)
	set("c", "3", time.Minute)
	get("a")
	set("d", "4", time.Hour) // b, the least recently used, goes
	if get("b") != "" || get("a") != "1" || get("c") != "3" || get("d") != "4" || m.bytes != 3*each || m.lru.Len() != 3 {
		t.Fatalf("after an evicting set: b %q, %d bytes, %d values (want b gone, %d, 3)", get("b"), m.bytes, m.lru.Len(), 3*each)
	}
	clock.Advance(2 * time.Minute)
	if get("c") != "" || m.bytes != 2*each || m.lru.Len() != 2 {
		t.Fatalf("an expired value read: %q, %d bytes, %d values (want none, %d, 2)", get("c"), m.bytes, m.lru.Len(), 2*each)
	}
	set("a", strings.Repeat("x", 4*each), time.Hour) // larger than the store
	if get("a") != "" || get("d") != "4" || m.bytes != each || m.lru.Len() != 1 {
		t.Fatalf("a value larger than the store: a %q, %d bytes, %d values (want a gone, d kept, %d, 1)", get("a"), m.bytes, m.lru.Len(), each)
	}
	if err := m.delIf(ctx, "d", "4"); err != nil {
		t.Fatal(err)
	}
	if m.bytes != 0 || m.lru.Len() != 0 {
		t.Fatalf("after delIf: %d bytes, %d values (want 0, 0)", m.bytes, m.lru.Len())
	}
}
