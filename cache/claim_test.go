package cache

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/redisconn"
	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/test/harness/redistest"
)

// claimSetup is two instances sharing one Redis over one directory whose listing
// reads the test can hold after they have read (afterMembers), and the group both
// have resolved already (so that only listing reads reach the directory below).
func claimSetup(t *testing.T, fillWait time.Duration) (dir *countingDir, a, b instance, hold func() (release func())) {
	t.Helper()
	dir = &countingDir{Directory: demo(t)}
	cfg := Config{Secret: sealSecret, Timeout: testTimeout, FillWait: new(fillWait),
		Redis: redisClient(t, redisconn.Config{Addrs: []string{redistest.Start(t).Addr()}})}
	a, b = newInstance(t, &heldFailing{countingDir: dir}, cfg), newInstance(t, &heldFailing{countingDir: dir}, cfg)
	for _, in := range []instance{a, b} {
		if _, err := in.c.Lookup(t.Context(), dirgate.MustParseIdentifier(fixture.AllStaffDN), nil); err != nil {
			t.Fatal(err)
		}
	}
	var held atomic.Pointer[chan struct{}]
	dir.afterMembers = func(dirgate.Object) {
		if ch := held.Load(); ch != nil {
			<-*ch
		}
	}
	hold = func() func() {
		ch := make(chan struct{})
		held.Store(&ch)
		return func() { held.Store(nil); close(ch) }
	}
	return dir, a, b, hold
}

// heldFailing fails a listing read that was held, when the test has asked for a
// failure by the time it is released (countingDir fails only before reading).
type heldFailing struct{ *countingDir }

var errHeldRead = errors.New("directory down after the read (test)")

func (d *heldFailing) Members(ctx context.Context, group dirgate.Object, props []string) ([]dirgate.Object, error) {
	ms, err := d.countingDir.Members(ctx, group, props)
	if d.failWith.Load() != nil {
		return nil, errHeldRead
	}
	return ms, err
}

type listResult struct {
	objs []dirgate.Object
	st   dirgate.CacheStatus
	err  error
}

func listAsync(in instance, group string) <-chan listResult {
	ch := make(chan listResult, 1)
	go func() {
		objs, st, err := in.tryList(context.Background(), group, dirgate.ListOptions{})
		ch <- listResult{objs, st, err}
	}()
	return ch
}

// contend lists All Staff on a, whose fill is held once it has read the directory,
// runs between, then lists it on b and waits until b waits on a's claim.
func contend(t *testing.T, dir *countingDir, a, b instance, hold func() func(), between func()) (ra, rb <-chan listResult, release func()) {
	t.Helper()
	release = hold()
	ra = listAsync(a, fixture.AllStaffDN)
	waitFor(t, "a's fill to read the directory", func() bool { return dir.members.Load() == 1 })
	between()
	rb = listAsync(b, fixture.AllStaffDN)
	waitFor(t, "b to wait on a's claim", func() bool { return b.c.claimWaitCount.Load() == 1 })
	return ra, rb, release
}

// TestFillClaimAcrossInstances: when two instances miss one listing together, the
// directory is read once; the second serves the first's fill from the store.
func TestFillClaimAcrossInstances(t *testing.T) {
	dir, a, b, hold := claimSetup(t, time.Minute)
	ra, rb, release := contend(t, dir, a, b, hold, func() {})
	time.Sleep(4 * claimPoll) // b polls the store meanwhile, and must not read the directory
	if got := dir.members.Load(); got != 1 {
		t.Fatalf("b read the directory while a was filling: %d reads", got)
	}
	release()
	resA, resB := <-ra, <-rb
	if resA.err != nil || resB.err != nil {
		t.Fatal(resA.err, resB.err)
	}
	if resA.st != dirgate.CacheMiss || resB.st != dirgate.CacheHit {
		t.Errorf("served a %s, b %s; want miss, hit", resA.st, resB.st)
	}
	if want := truth(t, dir.Directory, fixture.AllStaffDN, dirgate.ListOptions{}); !sameListing(resA.objs, want) || !sameListing(resB.objs, want) {
		t.Error("a listing differs from the directory")
	}
	if got := dir.members.Load(); got != 1 {
		t.Errorf("the directory was read %d times, want 1", got)
	}
	// The claim is gone with a's fill: b's next miss fills at once.
	if v := mustGet(t, a.c.store, a.c.keys.fillClaim(directKey(a, fixture.AllStaffDN))); v[0] != "" {
		t.Errorf("claim still held after the fill: %q", v[0])
	}
}

// TestFillClaimEndsWithoutEntry: a fill that cannot be stored (a removal came in
// between) or fails releases its claim; the waiting instance then reads the
// directory itself at once, and its answer follows the removal.
func TestFillClaimEndsWithoutEntry(t *testing.T) {
	t.Run("removal during the fill", func(t *testing.T) {
		dir, a, b, hold := claimSetup(t, time.Minute)
		victim := memberOf(t, dir.Directory, fixture.AllStaffDN)
		// a reads with the victim and is held; b lists after the removal, and must
		// not get a's read.
		ra, rb, release := contend(t, dir, a, b, hold, func() {
			res, err := b.svc.Remove(t.Context(), dirgate.Principal{}, dirgate.MustParseIdentifier(fixture.AllStaffDN), dirgate.MustParseIdentifier(victim.GUID))
			if err != nil || res.NoChanges {
				t.Fatalf("remove: %+v, %v", res, err)
			}
		})
		release()
		<-ra
		resB := <-rb
		if resB.err != nil {
			t.Fatal(resB.err)
		}
		if guids(resB.objs)[victim.GUID] {
			t.Errorf("b, asked after the removal, listed %s (%s)", victim.DN, resB.st)
		}
		if got := dir.members.Load(); got < 2 {
			t.Errorf("the directory was read %d times: b served a's unstorable fill", got)
		}
	})
	t.Run("failed fill", func(t *testing.T) {
		dir, a, b, hold := claimSetup(t, time.Minute)
		ra, rb, release := contend(t, dir, a, b, hold, func() {})
		dir.fail(errors.New("directory down (test)")) // a's fill returns, b's own read fails
		release()
		if r := <-ra; r.err == nil {
			t.Fatal("a's fill did not fail")
		}
		dir.fail(nil)
		// b stops waiting when the claim goes (not after the minute of FillWait) and
		// reads the directory itself.
		var resB listResult
		select {
		case resB = <-rb:
		case <-time.After(10 * time.Second):
			t.Fatal("b still waits 10 s after a's claim ended (FillWait is a minute)")
		}
		if resB.err != nil && dir.members.Load() < 2 {
			t.Fatalf("b: %v without reading the directory", resB.err)
		}
	})
}

// TestFillClaimExpires: a claim whose holder never ends it (it stopped) holds the
// other instance back for FillWait at most.
func TestFillClaimExpires(t *testing.T) {
	dir, a, b, _ := claimSetup(t, 300*time.Millisecond)
	key := a.c.keys.fillClaim(directKey(a, fixture.AllStaffDN))
	if err := a.c.store.set(t.Context(), key, "an instance that stopped", time.Minute); err != nil {
		t.Fatal(err)
	}
	_, st := b.list(t, fixture.AllStaffDN, dirgate.ListOptions{})
	if st != dirgate.CacheMiss || dir.members.Load() != 1 || b.c.claimWaitCount.Load() != 1 {
		t.Errorf("served %s after %d reads and %d waits; want a miss after one wait and one read", st, dir.members.Load(), b.c.claimWaitCount.Load())
	}
}

// directKey is the store key of a group's direct listing without properties.
func directKey(in instance, dn string) string {
	g, err := in.c.Lookup(context.Background(), dirgate.MustParseIdentifier(dn), nil)
	if err != nil {
		panic(err)
	}
	k, _ := in.c.keys.listing(g.GUID, false, nil)
	return k
}

// TestFillClaimWaitsOncePerInstance: an instance's concurrent misses of a listing
// another instance is filling wait on it together: one claim read and one poll loop,
// and each answer is the other's fill.
func TestFillClaimWaitsOncePerInstance(t *testing.T) {
	dir, a, b, hold := claimSetup(t, time.Minute)
	ra, rb, release := contend(t, dir, a, b, hold, func() {})
	const n = 8
	more := make([]<-chan listResult, n)
	for i := range more {
		more[i] = listAsync(b, fixture.AllStaffDN)
	}
	time.Sleep(4 * claimPoll) // the others join b's wait meanwhile
	release()
	for _, ch := range append(more, ra, rb) {
		if r := <-ch; r.err != nil {
			t.Fatal(r.err)
		}
	}
	if got := b.c.claimWaitCount.Load(); got > 2 {
		t.Errorf("b's %d concurrent misses waited %d times, want 1 (2 if one came after the first wait ended)", n+1, got)
	}
	if got := dir.members.Load(); got != 1 {
		t.Errorf("the directory was read %d times, want 1", got)
	}
}
