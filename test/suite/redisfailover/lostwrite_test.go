package redisfailover

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dirgate/dirgate/test/harness/child"
	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/test/harness/redistest"
)

// watchAfter is how long the instances are watched once both serve every checked
// listing from the cache again (and answer the token without Redis failing): the
// cache is then in use, with whatever the promoted replica holds.
const watchAfter = 5 * time.Second

// TestLostRemoval: a removal, a revocation and a session's exchange that the old
// primary acknowledged and never sent to its replica are lost in the failover;
// neither instance lists the removed member again, directly or nested, accepts the
// revoked token, or exchanges the session again.
func TestLostRemoval(t *testing.T) {
	testLostWrite(t, false, false)
}

// TestLostAddition: the same with an addition and an ended session: the added member
// never disappears from either instance's listings, and the ended session's token
// stays refused.
func TestLostAddition(t *testing.T) {
	testLostWrite(t, true, false)
}

// TestClusterLostRemoval: a removal lost by the Cluster shard that holds the group's
// keys, its replica promoted: neither instance lists the removed member again. (A
// token's record lands on any shard, so tokens are left to the Sentinel tests.)
func TestClusterLostRemoval(t *testing.T) {
	testLostWrite(t, false, true)
}

// shard is where the writes are lost: a primary and its replica, and how to wait
// for the replica's promotion once the primary is dead.
type shard struct {
	primary, replica *redistest.Server
	// fill is the prefix of the filler keys: none of dirgate's, all on primary.
	fill    string
	promote func(t *testing.T) redistest.Info
}

func testLostWrite(t *testing.T, addition, cluster bool) {
	ctx := context.Background()
	dc := harnessDC(t)
	env := map[string]string{
		// The change feed would repair a listing that the lost write left stale (it
		// reads the directory's changes): off, the guarantee under test stands alone.
		"DIRGATE_CHANGEFEED": "false",
		// The watchers present the revoked token 50 times a second: a window of 1 ms
		// keeps the throttle of failed authentications (which would answer 429, or
		// hold the 401s back) out of the way.
		"DIRGATE_AUTH_FAILURE_WINDOW": "1ms",
	}
	var pick func(groupGUID string) shard
	if cluster {
		cl := redistest.StartClusterWithReplicas(t, 2*time.Second)
		env["DIRGATE_REDIS_MODE"], env["DIRGATE_REDIS_ADDR"] = "cluster", strings.Join(cl.Addrs(), ",")
		pick = func(guid string) shard {
			tag := "{" + guid + "}"
			owner, err := cl.Owner(tag)
			if err != nil {
				t.Fatal(err)
			}
			// docs/cache.md: <prefix>{<group guid>}:v is the group's version token.
			if n, err := owner.Do("EXISTS", "dirgate:"+tag+":v"); err != nil || n != "1" {
				t.Fatalf("the group's version token dirgate:%s:v is not on its slot's primary %s (%q, %v): the key layout changed", tag, owner.Addr(), n, err)
			}
			replica := cl.ReplicaOf(owner)
			if replica == nil {
				t.Fatalf("the primary %s has no replica", owner.Addr())
			}
			return shard{primary: owner, replica: replica, fill: tag + "redisfo-filler:", promote: func(t *testing.T) redistest.Info {
				cl.WaitPromoted(t, replica, 60*time.Second)
				i, err := replica.Info("replication")
				if err != nil {
					t.Fatal(err)
				}
				return i
			}}
		}
	} else {
		rds := startSentinelRedis(t)
		for k, v := range rds.env() {
			env[k] = v
		}
		pick = func(string) shard {
			return shard{primary: rds.primary, replica: rds.replica, fill: "redisfo-filler:", promote: rds.awaitPromotion}
		}
	}
	d := startDeployment(t, dc, env)
	name, member := "removal", fixture.RegularDN
	if addition {
		name, member = "addition", fixture.FutureExpiryDN
	}
	if cluster {
		name = "cluster " + name
	}
	inner, outer := nestedPair(t, d.dc, "lost "+name)

	// Both instances hold both listings in their first level and in Redis.
	type check struct {
		inst string
		p    *child.Program
		url  string
		what string
	}
	var checks []check
	for inst, p := range d.instances() {
		checks = append(checks, check{inst, p, child.ListURL(p.Base, inner, ""), "direct listing of the inner group"},
			check{inst, p, child.ListURL(p.Base, outer, "&includeIndirect=true"), "nested listing of the outer group"})
	}
	var innerGUID string
	for _, c := range checks {
		child.Eventually(t, 30*time.Second, c.inst+": the cache serves the "+c.what, func() (bool, string) {
			r := d.c.Do(ctx, "GET", c.url, d.tok)
			if g := guidOf(r, inner); g != "" {
				innerGUID = g
			}
			return r.Status == 200 && r.Cache() == "hit" && hasDN(r.DNs(), member) != addition, r.Cache() + " " + r.String()
		})
	}
	if innerGUID == "" {
		t.Fatal("the nested listing of the outer group does not list the inner group")
	}
	sh := pick(innerGUID)

	// In Sentinel mode, a signed-in token (signed in on A, exchanged on B), accepted
	// by both instances, and a second session, before the replica stops: the
	// promoted replica will hold their records.
	var session, token, session2 string
	if !cluster {
		upn := account(t, d, name)
		session = createSession(t, d, d.a, upn)
		var st int
		if st, token = exchange(d, d.b, session); st != 200 || token == "" {
			t.Fatalf("exchange on B: %d", st)
		}
		session2 = createSession(t, d, d.a, upn)
		for inst, p := range d.instances() {
			if st := tokenStatus(ctx, d, p, token); st == 401 || st == 503 {
				t.Fatalf("the signed-in token on %s: %d, want it accepted", inst, st)
			}
		}
	}
	redistest.WaitReplicated(t, sh.primary, sh.replica, 30*time.Second)

	// The replica stops; what the primary writes from now on beyond the kernel's
	// buffers stays in the primary's memory, and dies with it.
	sh.replica.Pause()
	resumed := false
	defer func() {
		if !resumed {
			sh.replica.Resume()
		}
	}()
	if err := sh.primary.Fill(sh.fill, 40, 1<<20); err != nil {
		t.Fatal(err)
	}
	pi, err := sh.primary.Info("replication")
	if err != nil {
		t.Fatal(err)
	}
	before := pi.Int("master_repl_offset")

	// The change and (Sentinel) the revocation and the exchange, through A.
	var r child.Result
	if addition {
		r = d.c.Add(ctx, d.a.Base, inner, member, d.tok)
	} else {
		r = d.c.Do(ctx, "DELETE", child.RemoveURL(d.a.Base, inner, member), d.tok)
	}
	if r.Status != 200 || !strings.Contains(string(r.Body), `"noChanges":false`) {
		t.Fatalf("%s through A: %s", name, r)
	}
	tokenWhat := "revoked token"
	if !cluster {
		var revoke child.Result
		if addition {
			tokenWhat = "token of the ended session"
			revoke = d.c.Do(ctx, "DELETE", root(d.a)+"/api/authSessions?id="+url.QueryEscape(session), "")
		} else {
			revoke = d.c.Do(ctx, "DELETE", root(d.a)+"/api/auth?token="+url.QueryEscape(token), "")
		}
		if revoke.Status != 204 {
			t.Fatalf("revocation through A: %s", revoke)
		}
		// A session is exchanged once.
		if st, tok2 := exchange(d, d.a, session2); st != 200 || tok2 == "" {
			t.Fatalf("exchange of the second session through A: %d", st)
		}
	}

	// From here on, both instances are watched.
	w := &watch{}
	watchCtx, stopWatch := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, c := range checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for watchCtx.Err() == nil {
				r := d.c.Do(ctx, "GET", c.url, d.tok)
				why := ""
				switch {
				case r.Status != 200:
					why = "the listing failed"
				case addition && !hasDN(r.DNs(), member):
					why = "the added member is missing"
				case !addition && hasDN(r.DNs(), member):
					why = "the removed member is listed"
				}
				w.add(c.inst+" "+c.what, r, why)
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	for inst, p := range d.instances() {
		if token == "" {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for watchCtx.Err() == nil {
				st := tokenStatus(ctx, d, p, token)
				why := ""
				// 503: the instance could not read Redis (documented for signed-in
				// tokens while Redis is away); anything else but 401 accepted it.
				if st != 401 && st != 503 {
					why = "not refused (want 401, or 503 while Redis is away)"
				}
				w.add(inst+" "+tokenWhat, child.Result{Status: st}, why)
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}

	sh.primary.Stop()
	killed := time.Now()
	sh.replica.Resume()
	resumed = true
	info := sh.promote(t)
	promotedAfter := time.Since(killed)
	at, ok := info.PromotedAt()
	if !ok || at >= before {
		stopWatch()
		wg.Wait()
		t.Fatalf("the test is wrongly set up: the promoted replica reached offset %d (promoted: %v), not below %d, the primary's offset before the %s: the writes were not lost, so the test proves nothing",
			at, ok, before, name)
	}
	t.Logf("lost: the replica was promoted at offset %d, %.1f MiB short of the primary's %d before the %s; promoted %v after the kill",
		at, float64(before-at)/(1<<20), before, name, promotedAfter.Round(time.Millisecond))

	// Watch until both instances serve the checked listings from the cache again,
	// and answer the token without Redis failing, then a while longer.
	for _, c := range checks {
		child.Eventually(t, 90*time.Second, c.inst+": the "+c.what+" is served from the cache after the failover", func() (bool, string) {
			r := d.c.Do(ctx, "GET", c.url, d.tok)
			return r.Cache() == "hit", r.Cache() + " " + r.String()
		})
	}
	for inst, p := range d.instances() {
		if token == "" {
			break
		}
		child.Eventually(t, 60*time.Second, inst+": the token is answered with Redis after the failover", func() (bool, string) {
			st := tokenStatus(ctx, d, p, token)
			return st != 503, fmt.Sprint(st)
		})
	}
	t.Logf("both instances served from the cache again %v after the kill", time.Since(killed).Round(time.Millisecond))
	time.Sleep(watchAfter)
	stopWatch()
	wg.Wait()

	t.Logf("watched from the %s until %v after the kill: %s", name, time.Since(killed).Round(time.Millisecond), w.summary(killed))
	if w.failures > 0 {
		t.Errorf("%d answers broke the guarantee across the failover (times from the kill)", w.failures)
	}
	if !cluster {
		for inst, p := range d.instances() {
			if st := tokenStatus(ctx, d, p, token); st != 401 {
				t.Errorf("the %s on %s after the failover: %d, want 401", tokenWhat, inst, st)
			}
		}
		// B first: an exchange that A wrongly allowed would use the session up.
		for _, inst := range []string{"B", "A"} {
			if st, _ := exchange(d, d.instances()[inst], session2); st != 401 {
				t.Errorf("the session exchanged before the failover, exchanged again on %s after it: %d, want 401", inst, st)
			}
		}
	}
	if got := child.Members(t, d.dc, inner); hasDN(got, member) != addition {
		t.Errorf("the directory's members of the inner group after the %s: %v", name, got)
	}
	d.checkHistoryChange(t)
}

// guidOf returns the GUID a listing gives for dn, or "".
func guidOf(r child.Result, dn string) string {
	var objs []struct {
		GUID string `json:"guid"`
		DN   string `json:"dn"`
	}
	if json.Unmarshal(r.Body, &objs) != nil {
		return ""
	}
	for _, o := range objs {
		if strings.EqualFold(o.DN, dn) {
			return o.GUID
		}
	}
	return ""
}
