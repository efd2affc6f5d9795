package redisfailover

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dirgate/dirgate/test/harness/child"
	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/test/harness/redistest"
)

// TestSentinelFailoverUnderLoad kills the Sentinel-managed primary while clients list
// groups (directly and nested, on both instances, with a tokens-file token); the
// Sentinel promotes the replica. No request fails, every listing is the
// directory's before, during and after, the cache is used again afterwards, and
// both instances report the history change.
func TestSentinelFailoverUnderLoad(t *testing.T) {
	dc := harnessDC(t)
	rds := startSentinelRedis(t)
	d := startDeployment(t, dc, rds.env())
	failoverUnderLoad(t, d, func() {
		rds.primary.Stop()
		i := rds.awaitPromotion(t)
		t.Logf("the Sentinel promoted the replica (INFO: replid %s, replid2 %s, promoted at offset %s)",
			i["master_replid"], i["master_replid2"], i["second_repl_offset"])
	})
}

// TestClusterFailoverUnderLoad does the same in a Redis Cluster with a replica per
// primary: the primary that owns the slot of the lease hash ({lease}, which every
// instance renews every quarter of a second) is killed and its replica promoted.
func TestClusterFailoverUnderLoad(t *testing.T) {
	dc := harnessDC(t)
	// cluster-node-timeout: how long the primary is silent before its replica is
	// promoted. Shorter would risk promotions of live primaries on a loaded machine.
	cl := redistest.StartClusterWithReplicas(t, 2*time.Second)
	owner, err := cl.Owner("{lease}")
	if err != nil {
		t.Fatal(err)
	}
	replica := cl.ReplicaOf(owner)
	if replica == nil {
		t.Fatalf("the primary %s owning {lease} has no replica", owner.Addr())
	}
	d := startDeployment(t, dc, map[string]string{"DIRGATE_REDIS_MODE": "cluster", "DIRGATE_REDIS_ADDR": strings.Join(cl.Addrs(), ",")})
	failoverUnderLoad(t, d, func() {
		redistest.WaitReplicated(t, owner, replica, 30*time.Second)
		owner.Stop()
		cl.WaitPromoted(t, replica, 60*time.Second)
		t.Logf("the cluster promoted %s, replica of the killed primary %s owning {lease}", replica.Addr(), owner.Addr())
	})
}

// listing is one URL the load sends, with the DNs it must answer.
type listing struct {
	name   string // for messages: instance, group, direct or nested
	url    string
	group  string
	nested bool
	want   []string // lower-cased and sorted
}

// failoverUnderLoad warms both instances' caches, runs a load of listings through
// fail (which makes the failover and returns once Redis has a primary again), until
// every listing is served from the cache again and two seconds more, and checks that
// no answer failed or differed from the directory's.
func failoverUnderLoad(t *testing.T, d *deployment, fail func()) {
	ctx := context.Background()
	inner, outer := nestedPair(t, d.dc, t.Name())
	groups := []string{inner, outer, fixture.ITSupportDN, fixture.HelpDeskDN, fixture.ProjectAlphaDN,
		fixture.SalesEastDN, fixture.EscapedGroupDN}

	// What each listing must answer: for the tests' own groups, the directory's
	// members read over LDAP; for the fixture's (which nothing changes), the first
	// listing, read from the directory (a miss).
	var all []listing
	for _, g := range groups {
		for _, nested := range []bool{false, true} {
			extra, kind := "", "direct"
			if nested {
				extra, kind = "&includeIndirect=true", "nested"
			}
			r := d.c.Do(ctx, "GET", child.ListURL(d.a.Base, g, extra), d.tok)
			// A miss, or a bypass when Redis was slow to answer: read from the directory.
			if r.Status != 200 || (r.Cache() != "miss" && r.Cache() != "bypass") {
				t.Fatalf("first listing of %s (%s): %s, cache %q; want 200 from the directory", g, kind, r, r.Cache())
			}
			want := normalized(r.DNs())
			if g == inner || g == outer {
				if dir := directoryDNs(t, d.dc, g, nested); !slices.Equal(want, dir) {
					t.Fatalf("listing of %s (%s) = %v; the directory holds %v", g, kind, want, dir)
				}
			}
			for name, p := range d.instances() {
				all = append(all, listing{name: fmt.Sprintf("%s %s %s", name, kind, g), url: child.ListURL(p.Base, g, extra),
					group: g, nested: nested, want: want})
			}
		}
	}
	tallies := [3]*tally{newTally(), newTally(), newTally()}
	var phase atomic.Int32
	get := func(l listing) child.Result {
		r := d.c.Do(ctx, "GET", l.url, d.tok)
		why := ""
		switch {
		case r.Err != nil || r.Status != 200:
			why = "listing failed: " + l.name
		case !slices.Equal(normalized(r.DNs()), l.want):
			why = fmt.Sprintf("listing differs from the directory's: %s: %v, want %v", l.name, normalized(r.DNs()), l.want)
		}
		tallies[phase.Load()].add(r, why)
		return r
	}
	// The bound is above go-redis's Cluster client's default reload of its slot map
	// (every 60 s), should nothing else make it reload after the promotion.
	servedFromCache := func(what string) {
		for _, l := range all {
			child.Eventually(t, 90*time.Second, what+": "+l.name+" is served from the cache", func() (bool, string) {
				r := get(l)
				return r.Cache() == "hit", r.Cache() + " " + r.String()
			})
		}
	}
	servedFromCache("warm")

	loadCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for loadCtx.Err() == nil {
				get(all[int(next.Add(1))%len(all)])
				time.Sleep(5 * time.Millisecond) // a bounded load: the DC and the machine are shared
			}
		}()
	}
	time.Sleep(time.Second)
	phase.Store(1)
	start := time.Now()
	fail()
	promoted := time.Since(start)
	servedFromCache("after the failover")
	resumed := time.Since(start)
	phase.Store(2)
	time.Sleep(2 * time.Second)
	stop()
	wg.Wait()

	t.Logf("Redis had a primary again %v after the kill; every listing was served from the cache again after %v",
		promoted.Round(time.Millisecond), resumed.Round(time.Millisecond))
	for i, name := range []string{"before the failover", "during it", "after it"} {
		t.Logf("%s: %s", name, tallies[i].summary())
		if n := tallies[i].lost(); n > 0 {
			t.Errorf("%s: %d listings failed or differed from the directory's", name, n)
		}
	}
	// Exact afterwards: the tests' own groups against the directory read now.
	for _, l := range all {
		if l.group != inner && l.group != outer {
			continue
		}
		want := directoryDNs(t, d.dc, l.group, l.nested)
		if r := d.c.Do(ctx, "GET", l.url, d.tok); r.Status != 200 || !slices.Equal(normalized(r.DNs()), want) {
			t.Errorf("after the failover, %s: %s; the directory holds %v", l.name, r, want)
		}
	}
	d.checkHistoryChange(t)
}

// tally counts the answers of a load and those that failed its expectation.
type tally struct {
	mu       sync.Mutex
	total    int
	failed   int
	statuses map[int]int
	caches   map[string]int
	errors   int // transport errors
	examples []string
}

func newTally() *tally { return &tally{statuses: map[int]int{}, caches: map[string]int{}} }

// add records r; a non-empty why marks it failed, with the reason.
func (t *tally) add(r child.Result, why string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.total++
	if r.Err != nil {
		t.errors++
	} else {
		t.statuses[r.Status]++
		if c := r.Cache(); c != "" {
			t.caches[c]++
		}
	}
	if why != "" {
		t.failed++
		if len(t.examples) < 8 {
			t.examples = append(t.examples, fmt.Sprintf("%s: %s", why, r))
		}
	}
}

func (t *tally) lost() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}

func (t *tally) summary() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := fmt.Sprintf("%d of %d failed (statuses %v, cache %v, transport errors %d)", t.failed, t.total, t.statuses, t.caches, t.errors)
	if len(t.examples) > 0 {
		s += "\n    first failures:\n      " + strings.Join(t.examples, "\n      ")
	}
	return s
}
