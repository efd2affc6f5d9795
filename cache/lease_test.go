package cache

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/redisconn"
	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/test/harness/redistest"
)

// leasePair is two instances sharing one real Redis with leases of d, and the
// directory they front.
func leasePair(t *testing.T, d time.Duration) (a, b instance, dir dirgate.Directory, srv *redistest.Server) {
	t.Helper()
	srv = redistest.Start(t)
	dir = demo(t)
	cfg := Config{Secret: sealSecret, Redis: redisClient(t, redisconn.Config{Addrs: []string{srv.Addr()}}), Lease: new(d), Timeout: time.Second}
	a, b = newInstance(t, dir, cfg), newInstance(t, dir, cfg)
	for _, in := range []instance{a, b} {
		waitFor(t, "a lease", in.c.lease.held)
	}
	return a, b, dir, srv
}

// silence stops in's renewals until the test ends: an instance that stopped
// answering (paused, partitioned from Redis).
func silence(t *testing.T, in instance) {
	var silent atomic.Bool
	silent.Store(true)
	hook := func() bool { return !silent.Load() }
	in.c.lease.testHookRenew.Store(&hook)
	t.Cleanup(func() { silent.Store(false) })
}

// removeMember removes a user member of Desktop Engineers through in, and returns it.
func removeMember(t *testing.T, in instance, dir dirgate.Directory) dirgate.Object {
	t.Helper()
	member := memberOf(t, dir, fixture.DesktopEngineersDN)
	if err := in.c.RemoveMember(t.Context(), object(t, dir, fixture.DesktopEngineersDN), member); err != nil {
		t.Fatal(err)
	}
	return member
}

// trusted lists group on in until a listing is served without reading tokens, and
// returns the number of token reads so far.
func trusted(t *testing.T, in instance, group string) int64 {
	t.Helper()
	for range 5 {
		before := in.c.tokenReads.Load()
		if _, st := in.list(t, group, dirgate.ListOptions{}); st == dirgate.CacheHit && in.c.tokenReads.Load() == before {
			return before
		}
	}
	t.Fatalf("%s: never served from a trusted first level", group)
	return 0
}

// TestLeaseServesWithoutTokenReads: with a lease, repeated hits of one listing read
// no tokens; without one, every hit does.
func TestLeaseServesWithoutTokenReads(t *testing.T) {
	a, _, _, _ := leasePair(t, time.Second)
	before := trusted(t, a, fixture.DesktopEngineersDN)
	for range 100 {
		a.list(t, fixture.DesktopEngineersDN, dirgate.ListOptions{})
	}
	if n := a.c.tokenReads.Load() - before; n > 2 {
		t.Errorf("100 hits under a lease read tokens %d times", n)
	}

	off := newInstance(t, demo(t), Config{Secret: sealSecret, Redis: redisClient(t, redisconn.Config{Addrs: []string{redistest.Start(t).Addr()}}), Lease: new(time.Duration(0)), Timeout: time.Second})
	for range 3 {
		off.list(t, fixture.DesktopEngineersDN, dirgate.ListOptions{})
	}
	if n := off.c.tokenReads.Load(); n < 2 {
		t.Errorf("without leases, 2 hits read tokens %d times", n)
	}
}

// TestLeaseRemovalWaitsForEveryInstance: a removal through a is answered only once b,
// which trusted the group's listing, has dropped that trust; b's next listing is the
// directory's. With a long lease and a hash made old, the answer comes from b's
// acknowledgement, well before any lease could have run out.
func TestLeaseRemovalWaitsForEveryInstance(t *testing.T) {
	const d = 5 * time.Second
	a, b, dir, srv := leasePair(t, d)
	// As if the hash had been created long ago: no lost leases to wait out.
	if _, err := srv.Do("HSET", a.c.lease.key, "born", "0"); err != nil {
		t.Fatal(err)
	}
	trusted(t, b, fixture.DesktopEngineersDN)
	g := b.c.lease.current()
	start := time.Now()
	member := removeMember(t, a, dir)
	waited := time.Since(start)
	t.Logf("the removal waited %v", waited)
	if waited > d/2 {
		t.Errorf("the removal waited %v: the lease's expiry, not b's acknowledgement, ended it", waited)
	}
	if b.c.lease.current() == g {
		t.Error("the removal was answered before b withdrew its trust")
	}
	got, _ := b.list(t, fixture.DesktopEngineersDN, dirgate.ListOptions{})
	if guids(got)[member.GUID] {
		t.Fatalf("b still lists %s after the removal was answered", member.DN)
	}
}

// TestLeaseSilentInstance: an instance that stops renewing its lease (paused,
// partitioned from Redis) neither holds up a removal for longer than its lease nor
// serves what the removal changed once it is answered: it stops trusting its first
// level when its lease runs out, before the store drops the lease.
func TestLeaseSilentInstance(t *testing.T) {
	const d = 400 * time.Millisecond
	a, b, dir, _ := leasePair(t, d)
	trusted(t, b, fixture.DesktopEngineersDN)
	silence(t, b)
	start := time.Now()
	member := removeMember(t, a, dir)
	t.Logf("the removal waited %v for a silent instance with a %v lease", time.Since(start), d)
	if b.c.lease.held() {
		t.Fatal("the removal was answered while the silent instance still held its lease")
	}
	reads := b.c.tokenReads.Load()
	got, _ := b.list(t, fixture.DesktopEngineersDN, dirgate.ListOptions{})
	if guids(got)[member.GUID] {
		t.Fatalf("the silent instance lists %s after the removal was answered", member.DN)
	}
	if b.c.tokenReads.Load() == reads {
		t.Error("without a lease, the listing was served without reading tokens")
	}
}

// TestLeaseStoreLost: when the store loses the leases (restart, eviction, FLUSHALL),
// a writer cannot see who holds one and waits out a whole lease, so an instance that
// has not noticed the loss still stops trusting before the removal is answered; also
// when another instance's renewal has created a new hash before the announcement.
func TestLeaseStoreLost(t *testing.T) {
	for _, recreated := range []bool{false, true} {
		t.Run(map[bool]string{false: "deleted", true: "recreated by a renewal"}[recreated], func(t *testing.T) {
			const d = 400 * time.Millisecond
			a, b, dir, srv := leasePair(t, d)
			trusted(t, b, fixture.DesktopEngineersDN)
			silence(t, b)
			if _, err := srv.Do("DEL", a.c.lease.key); err != nil {
				t.Fatal(err)
			}
			if recreated {
				waitFor(t, "a's renewal to recreate the hash", func() bool {
					out, err := srv.Do("HEXISTS", a.c.lease.key, "inc")
					return err == nil && strings.TrimSpace(out) == "1"
				})
			}
			member := removeMember(t, a, dir)
			if b.c.lease.held() {
				t.Fatal("the removal was answered while an instance whose lease the store lost still held it")
			}
			got, _ := b.list(t, fixture.DesktopEngineersDN, dirgate.ListOptions{})
			if guids(got)[member.GUID] {
				t.Fatalf("b lists %s after the removal was answered", member.DN)
			}
		})
	}
}

// TestLeaseDropsTrustOnEveryAnnouncement: a change announced by the change feed (no
// wait) still ends every instance's trust in its first level once applied.
func TestLeaseDropsTrustOnEveryAnnouncement(t *testing.T) {
	a, b, _, _ := leasePair(t, time.Second)
	trusted(t, b, fixture.DesktopEngineersDN)
	g := b.c.lease.current()
	if _, err := a.c.announce(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b to apply the announcement", func() bool { return b.c.lease.current() > g })
	reads := b.c.tokenReads.Load()
	b.list(t, fixture.DesktopEngineersDN, dirgate.ListOptions{})
	if b.c.tokenReads.Load() == reads {
		t.Error("after an announcement, a listing was served without reading tokens")
	}
}

// TestLeaseAnnouncementRefused: when the store takes the tokens but refuses the
// announcement, the writer bypasses the cache until a retry announces them, and the
// retry ends every other instance's trust.
func TestLeaseAnnouncementRefused(t *testing.T) {
	srv := redistest.Start(t)
	dir := demo(t)
	cfg := Config{Secret: sealSecret, Redis: redisClient(t, redisconn.Config{Addrs: []string{srv.Addr()}}), Lease: new(time.Second), Timeout: time.Second, RetryInterval: 50 * time.Millisecond}
	a, b := newInstance(t, dir, cfg), newInstance(t, dir, cfg)
	for _, in := range []instance{a, b} {
		waitFor(t, "a lease", in.c.lease.held)
	}
	trusted(t, b, fixture.DesktopEngineersDN)
	// HINCRBY is the announcement's increment; scripts obey the ACL.
	if _, err := srv.Do("ACL", "SETUSER", "default", "-hincrby"); err != nil {
		t.Fatal(err)
	}
	member := removeMember(t, a, dir)
	if a.c.usable() {
		t.Fatal("the writer uses the cache while its announcement is deferred")
	}
	got, st := a.list(t, fixture.DesktopEngineersDN, dirgate.ListOptions{})
	if guids(got)[member.GUID] || st != dirgate.CacheBypass {
		t.Fatalf("the writer served %s (%s) with its announcement deferred", st, member.DN)
	}
	g := b.c.lease.current()
	if _, err := srv.Do("ACL", "SETUSER", "default", "+hincrby"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the retry to announce", func() bool { return a.c.usable() && b.c.lease.current() > g })
	got, _ = b.list(t, fixture.DesktopEngineersDN, dirgate.ListOptions{})
	if guids(got)[member.GUID] {
		t.Fatalf("b lists %s after the deferred announcement", member.DN)
	}
}

// TestLeaseClose: a closed cache trusts nothing and gives its lease up.
func TestLeaseClose(t *testing.T) {
	a, b, _, srv := leasePair(t, time.Second)
	trusted(t, b, fixture.DesktopEngineersDN)
	b.c.Close()
	if b.c.lease.held() {
		t.Error("a closed cache still holds its lease")
	}
	out, err := srv.Do("HEXISTS", a.c.lease.key, "h:"+b.c.lease.id)
	if err != nil || strings.TrimSpace(out) != "0" {
		t.Errorf("the closed cache's lease is still in the store: %q, %v", out, err)
	}
}

// TestLeaseCluster: on a Redis Cluster (the hash in one slot, nudges published
// across nodes) instances hold leases, trust their first level, and a removal through
// one is followed by the directory's listing on the other.
func TestLeaseCluster(t *testing.T) {
	dir := demo(t)
	cfg := Config{Secret: sealSecret, Redis: redisClient(t, redisconn.Config{Addrs: redistest.StartCluster(t).Addrs(), Mode: redisconn.ModeCluster}), Timeout: time.Second}
	a, b := newInstance(t, dir, cfg), newInstance(t, dir, cfg)
	for _, in := range []instance{a, b} {
		waitFor(t, "a lease", in.c.lease.held)
	}
	trusted(t, b, fixture.DesktopEngineersDN)
	start := time.Now()
	member := removeMember(t, a, dir)
	t.Logf("the removal waited %v", time.Since(start))
	got, _ := b.list(t, fixture.DesktopEngineersDN, dirgate.ListOptions{})
	if guids(got)[member.GUID] {
		t.Fatalf("b still lists %s after the removal was answered", member.DN)
	}
}

// TestLeaseLongerElsewhere: a writer whose own lease is shorter than a silent
// instance's waits as long as that instance's lease can last.
func TestLeaseLongerElsewhere(t *testing.T) {
	srv := redistest.Start(t)
	dir := demo(t)
	cfg := Config{Secret: sealSecret, Redis: redisClient(t, redisconn.Config{Addrs: []string{srv.Addr()}}), Lease: new(200 * time.Millisecond), Timeout: time.Second}
	a := newInstance(t, dir, cfg)
	cfg.Lease = new(800 * time.Millisecond)
	b := newInstance(t, dir, cfg)
	for _, in := range []instance{a, b} {
		waitFor(t, "a lease", in.c.lease.held)
	}
	time.Sleep(800 * time.Millisecond) // the hash is older than either lease
	trusted(t, b, fixture.DesktopEngineersDN)
	silence(t, b)
	removeMember(t, a, dir)
	if b.c.lease.held() {
		t.Fatal("the removal was answered while an instance with a longer lease still held it")
	}
}
