package cache

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/proxy"
	"github.com/dirgate/dirgate/redisconn"
	"github.com/dirgate/dirgate/render"
	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/test/harness/redistest"
	"github.com/dirgate/dirgate/throttle"
)

// newInstanceWithStore builds an instance over a given store (a faulty one).
func newInstanceWithStore(t *testing.T, dir dirgate.Directory, cfg Config, st store) instance {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	c := newCache(cfg.withDefaults(), dir, st)
	t.Cleanup(func() { c.Close() })
	return instance{c: c, svc: &dirgate.MemberService{Dir: c, Listings: c}}
}

// TestStampede: concurrent misses of one listing cost one directory read per
// instance, whether the store is healthy or being bypassed.
func TestStampede(t *testing.T) {
	tests := []struct {
		name       string
		storeFails bool
	}{
		// Misses fill once and store.
		{"cached", false},
		// With the store down nothing is stored, but the directory is still read once.
		{"bypass", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			dir := &countingDir{Directory: demo(t), beforeMembers: func(dirgate.Object) { <-release }}
			st := &faultyStore{store: newMemoryStore(1<<24, time.Now)}
			in := newInstanceWithStore(t, dir, Config{}, st)
			joins := &joinCounter{}
			in.c.testHookJoined = joins.hook
			if _, err := in.c.Lookup(t.Context(), dirgate.MustParseIdentifier(fixture.AllStaffDN), nil); err != nil {
				t.Fatal(err)
			}
			st.failing.Store(tc.storeFails)
			const n = 8
			var wg sync.WaitGroup
			for range n {
				wg.Go(func() {
					if _, _, err := in.tryList(context.Background(), fixture.AllStaffDN, dirgate.ListOptions{}); err != nil {
						t.Error(err)
					}
				})
			}
			waitFor(t, "every request to wait on a read", func() bool { return joins.count("l:") >= n })
			close(release)
			wg.Wait()
			if got := dir.members.Load(); got != 1 {
				t.Errorf("%d concurrent misses read the directory %d times, want 1", n, got)
			}
		})
	}
}

// anyone authenticates every token, for tests of the HTTP path.
type anyone struct{}

func (anyone) Authenticate(context.Context, string) (dirgate.Principal, error) {
	return dirgate.Principal{DN: "CN=Test"}, nil
}

// httpClient drives the real HTTP handler in front of an instance.
type httpClient struct {
	t   *testing.T
	url string
}

func newHTTP(t *testing.T, in instance) httpClient {
	h, err := proxy.New(proxy.Config{Authenticator: anyone{}, Service: in.svc, Bodies: render.NewLister(in.svc, nil), Logger: quiet,
		Throttle: mustThrottle(t)})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return httpClient{t: t, url: ts.URL + proxy.DefaultBasePath + proxy.ResourcePath}
}

func (c httpClient) do(method string, q url.Values) (status int, cache string, body []byte, err error) {
	req, err := http.NewRequest(method, c.url+"?"+q.Encode(), nil)
	if err != nil {
		return 0, "", nil, err
	}
	req.Header.Set(proxy.HeaderToken, "t")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get(proxy.CacheHeader), body, err
}

// list GETs a nested listing and fails the test unless it is a 200.
func (c httpClient) list(group string) (cache string, objs []dirgate.Object) {
	c.t.Helper()
	status, cache, body, err := c.do(http.MethodGet, url.Values{"group": {group}, "includeIndirect": {"true"}})
	if err != nil || status != http.StatusOK {
		c.t.Fatalf("GET %s: %d %v %s", group, status, err, body)
	}
	if err := json.Unmarshal(body, &objs); err != nil {
		c.t.Fatal(err)
	}
	return cache, objs
}

// TestRedisKilledCostsNoFailedRequest kills redis-server under load and starts it
// again: every request is answered 200 with the directory's listing (bypass while
// Redis is gone, a removal included), and the cache comes back by itself.
func TestRedisKilledCostsNoFailedRequest(t *testing.T) {
	srv := redistest.Start(t)
	dir := demo(t)
	in := newInstance(t, dir, Config{Secret: sealSecret, Redis: redisClient(t, redisconn.Config{Addrs: []string{srv.Addr()}}), RetryInterval: 20 * time.Millisecond, Timeout: 100 * time.Millisecond})
	c := newHTTP(t, in)
	group := fixture.ITDepartmentDN

	for _, want := range []string{"miss", "hit"} {
		if got, _ := c.list(group); got != want {
			t.Fatalf("X-Dirgate-Cache = %q, want %q", got, want)
		}
	}

	// Load from the side while Redis goes away and comes back.
	stop := make(chan struct{})
	var served, failed atomic.Int64
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				status, _, body, err := c.do(http.MethodGet, url.Values{"group": {group}, "includeIndirect": {"true"}})
				if err != nil || status != http.StatusOK {
					failed.Add(1)
					t.Errorf("request during the outage: %d %v %s", status, err, body)
					continue
				}
				served.Add(1)
			}
		})
	}

	if err := in.c.Ready(t.Context()); err != nil {
		t.Errorf("Ready with Redis up: %v", err)
	}
	srv.Stop()
	if err := in.c.Ready(t.Context()); err == nil {
		t.Error("Ready with Redis down reported nothing")
	}
	// Listings bypass Redis once an operation on it fails; between retries
	// (RetryInterval) the first level may still answer a hit while its lease holds
	// (docs/cache.md, "Leases: the first level without a read per request").
	waitFor(t, "listings to bypass Redis", func() bool { got, _ := c.list(group); return got == "bypass" })
	if got, objs := c.list(group); (got != "bypass" && got != "hit") || !sameJSON(objs, truth(t, dir, group, dirgate.ListOptions{IncludeIndirect: true})) {
		t.Errorf("with Redis down: X-Dirgate-Cache = %q, listing equals the directory's: %v", got, sameJSON(objs, truth(t, dir, group, dirgate.ListOptions{IncludeIndirect: true})))
	}
	// A removal while Redis is down succeeds; its invalidation waits for Redis.
	target := memberOf(t, dir, fixture.DesktopEngineersDN, fixture.RegularDN)
	status, _, body, err := c.do(http.MethodDelete, url.Values{"group": {fixture.DesktopEngineersDN}, "member": {target.GUID}})
	if err != nil || status != http.StatusOK {
		t.Fatalf("DELETE with Redis down: %d %v %s", status, err, body)
	}

	srv.Restart()
	waitFor(t, "the cache to serve hits again", func() bool { got, _ := c.list(group); return got == "hit" })
	close(stop)
	wg.Wait()
	if _, objs := c.list(group); !sameJSON(objs, truth(t, dir, group, dirgate.ListOptions{IncludeIndirect: true})) {
		t.Error("after Redis came back the listing differs from the directory")
	}
	if failed.Load() > 0 || served.Load() == 0 {
		t.Errorf("%d requests failed, %d served", failed.Load(), served.Load())
	}
}

func sameJSON(got, want []dirgate.Object) bool {
	a, _ := json.Marshal(got)
	b, _ := json.Marshal(want)
	return string(a) == string(b)
}

// TestSlowRedisIsBypassed: a Redis that stops answering (CLIENT PAUSE) costs a
// request the configured timeout, not an error, and is used again once it answers.
func TestSlowRedisIsBypassed(t *testing.T) {
	srv := redistest.Start(t)
	dir := demo(t)
	in := newInstance(t, dir, Config{Secret: sealSecret, Redis: redisClient(t, redisconn.Config{Addrs: []string{srv.Addr()}}), RetryInterval: 20 * time.Millisecond, Timeout: 50 * time.Millisecond})
	opts := dirgate.ListOptions{IncludeIndirect: true}
	in.list(t, fixture.HelpDeskDN, opts)
	// Every client is held for two seconds (CLIENT UNPAUSE would be held too): far
	// longer than the 50 ms timeout, and ending by itself.
	if _, err := srv.Do("CLIENT", "PAUSE", "2000", "ALL"); err != nil {
		t.Fatal(err)
	}
	got, st := in.list(t, fixture.HelpDeskDN, opts)
	if st != dirgate.CacheBypass || !sameListing(got, truth(t, dir, fixture.HelpDeskDN, opts)) {
		t.Errorf("with Redis paused: status %q, want bypass with the directory's listing", st)
	}
	waitFor(t, "hits after Redis answers again", func() bool { _, st := in.list(t, fixture.HelpDeskDN, opts); return st == dirgate.CacheHit })
}

// TestDeferredInvalidation: a removal whose invalidation the store could not take
// makes this instance bypass the cache until the invalidation is retried, so the
// entry filled before the removal is never served; then caching resumes.
func TestDeferredInvalidation(t *testing.T) {
	dir := demo(t)
	st := &faultyStore{store: newMemoryStore(1<<24, time.Now)}
	// Retries are run by hand below, not by the background loop.
	in := newInstanceWithStore(t, dir, Config{RetryInterval: time.Hour}, st)
	opts := dirgate.ListOptions{}
	in.list(t, fixture.DesktopEngineersDN, opts)
	target := memberOf(t, dir, fixture.DesktopEngineersDN, fixture.RegularDN)
	st.failing.Store(true)
	if _, err := in.svc.Remove(t.Context(), dirgate.Principal{}, dirgate.MustParseIdentifier(fixture.DesktopEngineersDN), dirgate.MustParseIdentifier(target.GUID)); err != nil {
		t.Fatalf("removal with the store down: %v", err)
	}
	// The store answers again before the retry: the old entry is still there, and the
	// first level still holds it, but neither may be served.
	st.failing.Store(false)
	in.c.health.succeeded()
	got, status := in.list(t, fixture.DesktopEngineersDN, opts)
	if status != dirgate.CacheBypass || guids(got)[target.GUID] {
		t.Errorf("before the invalidation was retried: status %q, removed member listed: %v", status, guids(got)[target.GUID])
	}
	in.c.retryPending()
	if !in.c.pending.empty() {
		t.Fatal("the retried invalidation is still pending")
	}
	for _, want := range []dirgate.CacheStatus{dirgate.CacheMiss, dirgate.CacheHit} {
		got, status := in.list(t, fixture.DesktopEngineersDN, opts)
		if status != want || guids(got)[target.GUID] {
			t.Errorf("after the retry: status %q (want %q), removed member listed: %v", status, want, guids(got)[target.GUID])
		}
	}
}

// TestStaleIfError: when the directory fails, a listing past its TTL but within
// MaxStale is served as stale (its lookup too); older ones, answers that are not
// failures, and listings a removal invalidated are not.
func TestStaleIfError(t *testing.T) {
	upstreamDown := dirgate.WrapError(dirgate.EUPSTREAM, "", errors.New("connection refused"))
	tests := []struct {
		name    string
		err     error
		age     time.Duration
		removed bool
		want    dirgate.CacheStatus // "" means the error reaches the client
	}{
		// Past its TTL, the directory failing: served stale.
		{"upstream error", upstreamDown, 2 * time.Minute, false, dirgate.CacheStale},
		// The breaker open and a timeout are failures as well.
		{"breaker open", dirgate.Errorf(dirgate.EUNAVAILABLE, "open"), 2 * time.Minute, false, dirgate.CacheStale},
		{"timeout", dirgate.Errorf(dirgate.ETIMEOUT, "slow"), 2 * time.Minute, false, dirgate.CacheStale},
		// Older than MaxStale: the failure is the answer.
		{"too old", upstreamDown, 11 * time.Minute, false, ""},
		// The directory answering "invalid" is an answer, not a failure.
		{"not a failure", dirgate.Errorf(dirgate.EINVALID, "bad"), 2 * time.Minute, false, ""},
		// A removal invalidated the listing: it must never come back, stale or not.
		{"removed since", upstreamDown, 2 * time.Minute, true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock()
			dir := &countingDir{Directory: demo(t)}
			in := newInstance(t, dir, Config{TTL: time.Minute, MaxStale: 10 * time.Minute, TTLJitter: new(0.0), now: clock.Now})
			opts := dirgate.ListOptions{IncludeIndirect: true}
			before, _ := in.list(t, fixture.HelpDeskDN, opts)
			if tc.removed {
				target := memberOf(t, dir, fixture.DesktopEngineersDN, fixture.RegularDN)
				if _, err := in.svc.Remove(t.Context(), dirgate.Principal{}, dirgate.MustParseIdentifier(fixture.DesktopEngineersDN), dirgate.MustParseIdentifier(target.GUID)); err != nil {
					t.Fatal(err)
				}
			}
			clock.Advance(tc.age)
			dir.fail(tc.err)
			got, status, err := in.tryList(t.Context(), fixture.HelpDeskDN, opts)
			if tc.want == "" {
				if err == nil || dirgate.ErrorCode(err) != dirgate.ErrorCode(tc.err) {
					t.Errorf("got %d objects (%q), err %v; want the directory's error", len(got), status, err)
				}
				return
			}
			if err != nil || status != tc.want || !sameListing(got, before) {
				t.Errorf("status %q, err %v; want %q with the listing cached before", status, err, tc.want)
			}
		})
	}
}

// TestDeferredFeedInvalidation: the change feed's invalidations take the same path as
// a removal's. With the store down, Invalidate and InvalidateAll report the failure
// (the feed reads the same changes again) and defer the token changes: until they
// land this instance bypasses the cache, never serving what they invalidate; then
// caching resumes.
func TestDeferredFeedInvalidation(t *testing.T) {
	for _, all := range []bool{false, true} {
		t.Run(map[bool]string{false: "these groups", true: "everything"}[all], func(t *testing.T) {
			dir := demo(t)
			st := &faultyStore{store: newMemoryStore(1<<24, time.Now)}
			in := newInstanceWithStore(t, dir, Config{RetryInterval: time.Hour}, st)
			in.c.Follow()
			opts := dirgate.ListOptions{}
			in.list(t, fixture.ProjectAlphaDN, opts)
			if _, status := in.list(t, fixture.ProjectAlphaDN, opts); status != dirgate.CacheHit {
				t.Fatalf("not cached: %s", status)
			}
			st.failing.Store(true)
			var err error
			if all {
				err = in.c.InvalidateAll(t.Context())
			} else {
				err = in.c.Invalidate(t.Context(), []string{object(t, dir, fixture.ProjectAlphaDN).GUID})
			}
			if err == nil {
				t.Fatal("an invalidation the store did not take reported no error")
			}
			st.failing.Store(false)
			in.c.health.succeeded()
			if _, status := in.list(t, fixture.ProjectAlphaDN, opts); status != dirgate.CacheBypass {
				t.Errorf("before the invalidation was retried: status %q, want bypass", status)
			}
			in.c.retryPending()
			if !in.c.pending.empty() {
				t.Fatal("the retried invalidation is still pending")
			}
			for _, want := range []dirgate.CacheStatus{dirgate.CacheMiss, dirgate.CacheHit} {
				if _, status := in.list(t, fixture.ProjectAlphaDN, opts); status != want {
					t.Errorf("after the retry: status %q, want %q", status, want)
				}
			}
		})
	}
}

// mustThrottle is the throttle of cfg (the defaults without one).
func mustThrottle(t testing.TB, cfg ...throttle.Config) *throttle.Throttle {
	t.Helper()
	var c throttle.Config
	if len(cfg) > 0 {
		c = cfg[0]
	}
	th, err := throttle.New(c)
	if err != nil {
		t.Fatalf("throttle.New: %v", err)
	}
	return th
}
