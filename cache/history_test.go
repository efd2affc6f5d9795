package cache

import (
	"context"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/redisconn"
	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/test/harness/redistest"
	"github.com/redis/go-redis/v9"
)

// failoverRig is a primary and its replica (real redis-servers) behind clients that
// dial whichever of the two is current, as clients of a Sentinel or of a managed
// service's address do after a failover. Every client's connections report to one
// redisconn.History.
type failoverRig struct {
	primary, replica *redistest.Server
	current          atomic.Pointer[string]
	history          *redisconn.History
}

func newFailoverRig(t *testing.T) *failoverRig {
	r := &failoverRig{primary: redistest.Start(t), history: redisconn.NewHistory(quiet)}
	r.replica = redistest.StartReplica(t, r.primary)
	addr := r.primary.Addr()
	r.current.Store(&addr)
	return r
}

// client is one instance's client, with the cache's timeout.
func (r *failoverRig) client(t *testing.T) redis.UniversalClient {
	c := redis.NewClient(&redis.Options{
		Dialer: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, *r.current.Load())
		},
		OnConnect:   r.history.OnConnect,
		MaxRetries:  -1,
		DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// detach makes the replica stop following the primary: from now on it misses every
// write, as a replica that lags when its primary dies. It first waits until the
// replica has everything written so far: a replica that had not yet received the
// listings filled before the removal would hold nothing stale to serve (CI saw the
// control case lose nothing once).
func (r *failoverRig) detach(t *testing.T) {
	redistest.WaitReplicated(t, r.primary, r.replica, 10*time.Second)
	if _, err := r.replica.Do("REPLICAOF", "NO", "ONE"); err != nil {
		t.Fatal(err)
	}
}

// failOver kills the primary and sends every new connection to the replica.
func (r *failoverRig) failOver() {
	r.primary.Stop()
	addr := r.replica.Addr()
	r.current.Store(&addr)
}

// TestFailoverLosingARemoval: a removal through one instance, then a failover to a
// replica that missed it (and the new tokens, the announcement and the listings
// filled after it). Without History both instances serve the removed member again,
// from their first level and from Redis: the test can fail. With it, every listing
// either instance serves afterwards is the directory's.
func TestFailoverLosingARemoval(t *testing.T) {
	for _, detect := range []bool{false, true} {
		t.Run("history="+strconv.FormatBool(detect), func(t *testing.T) {
			dir := demo(t)
			rig := newFailoverRig(t)
			cfg := func() Config {
				c := Config{Secret: sealSecret, Timeout: time.Second, RetryInterval: 50 * time.Millisecond, Redis: rig.client(t)}
				if detect {
					c.History = rig.history
				}
				return c
			}
			// Not newInstance: it would give each instance a client of its own dialling
			// the primary's address.
			a, b := failoverInstance(t, dir, cfg()), failoverInstance(t, dir, cfg())
			groups := append([]string{fixture.ProjectAlphaDN}, affected...)
			warm := func() {
				for range 2 {
					for _, in := range []instance{a, b} {
						for _, g := range groups {
							for _, opts := range listOptions {
								in.list(t, g, opts)
							}
						}
					}
				}
			}
			warm()
			rig.detach(t)
			target := memberOf(t, dir, fixture.DesktopEngineersDN, fixture.RegularDN)
			res, err := a.svc.Remove(t.Context(), dirgate.Principal{}, dirgate.MustParseIdentifier(fixture.DesktopEngineersDN), dirgate.MustParseIdentifier(target.GUID))
			if err != nil || res.NoChanges {
				t.Fatalf("remove: %+v, %v", res, err)
			}
			warm() // filled after the removal, into the primary only
			rig.failOver()

			stale := 0
			deadline := time.Now().Add(2 * time.Second)
			for time.Now().Before(deadline) {
				for _, in := range []instance{a, b} {
					for _, g := range affected {
						for _, opts := range listOptions {
							got, _, err := in.tryList(t.Context(), g, opts)
							if err != nil {
								t.Fatalf("list %s: %v", g, err)
							}
							if guids(got)[target.GUID] {
								stale++
							}
						}
					}
				}
			}
			if detect && stale > 0 {
				t.Fatalf("after the failover, %d listings showed the removed member", stale)
			}
			if !detect && stale == 0 {
				t.Fatal("without History no listing showed the removed member: the failover lost nothing, so the test proves nothing")
			}
			if detect {
				if g := rig.history.Gen(); g != 1 {
					t.Fatalf("History.Gen = %d, want 1", g)
				}
				// Settled: the cache is used again, and serves what the directory says.
				waitFor(t, "the cache to be used again", func() bool { return a.c.usable() && b.c.usable() })
				for _, g := range affected {
					for _, opts := range listOptions {
						b.list(t, g, opts)
						if got, st := b.list(t, g, opts); st != dirgate.CacheHit || !sameListing(got, truth(t, dir, g, opts)) {
							t.Errorf("%s %+v after settling: %s, or not the directory's", g, opts, st)
						}
					}
				}
			}
		})
	}
}

// failoverInstance is newInstance with the client given.
func failoverInstance(t *testing.T, dir dirgate.Directory, cfg Config) instance {
	t.Helper()
	cfg.Logger = quiet
	c, err := cfg.Open(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return instance{c: c, svc: &dirgate.MemberService{Dir: c, Listings: c}}
}
