package failover

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dirgate/dirgate/test/harness/child"
)

// loadAfterFault is how long the load goes on after a fault was made: several
// attempt timeouts, health checks and change-feed intervals.
const loadAfterFault = 6 * time.Second

// feedBound bounds how long a change made directly on a DC may take to reach a
// cached listing: docs/cache.md's bound (one change-feed interval, 1 s, plus the
// read) with room for the feed's retry pause (up to 5 s) after the DC it followed
// died, replication between the DCs (1-2.4 s measured) and a loaded machine. The
// measured times are logged; this only catches a feed that stopped.
const feedBound = 20 * time.Second

// TestPreferredDCKilled follows a preferred DC through its crash and return:
//
//  1. Under load (cached and uncached listings, sign-ins, on two replicas), DC1,
//     the preferred DC, is killed: no request fails, none takes over 5 s. A change
//     made directly on DC2 meanwhile reaches both replicas' cached listings (the
//     change feed switches DC).
//  2. With DC1 down: a sign-in on replica A gives a token that works on B; a
//     removal and an addition through A show in B's next listing; a change made
//     directly on DC2 reaches both replicas.
//  3. DC1 comes back and is preferred again (/readyz upstream ok, calls counted on
//     DC1); the writes made while it was down are not undone in any listing; then
//     DC2 is killed under load: no request fails.
func TestPreferredDCKilled(t *testing.T) {
	cl := startCluster(t)
	ctx := context.Background()
	all := newGroups(t, cl.pair, []string{"load one", smith, quoted, hashUser, contact, pc},
		[]string{"load two", smith, zoe}, []string{"feed", smith, quoted}, []string{"writes", smith, quoted, contact})
	groups, feed, writes := all[:2], all[2], all[3]
	warm(t, cl, all...)

	// 1. DC1 dies under load; a change is made on DC2 as soon as it is dead.
	rec, at := underLoad(t, cl, groups, func(made func()) {
		cl.pair.Kill(t, 1)
		made()
		cl.pair.AdminModify(t, 2, modifyLDIF(feed, "add", zoe))
		cl.feedFreshness(t, "a change made on DC2 just after DC1 was killed (the feed followed DC1)", feed,
			func(dns []string) bool { return hasDN(dns, zoe) })
	}, loadAfterFault)
	rec.check(t, "DC1 killed under load", at)
	if sw, line := cl.feedSwitch(t, at); sw.IsZero() {
		t.Error("the change feed never logged that it follows DC2 after DC1 was killed")
	} else {
		t.Logf("FIGURES change feed: follows DC2 %v after the kill began: %s", sw.Sub(at).Round(time.Millisecond), line)
	}

	// 2. With DC1 down.
	cl.writesAcrossReplicas(t, writes, quoted, zoe)
	cl.pair.AdminModify(t, 2, modifyLDIF(feed, "delete", smith))
	cl.feedFreshness(t, "a change made on DC2, the DC followed, with DC1 down", feed,
		func(dns []string) bool { return !hasDN(dns, smith) })

	// 3. DC1 returns and is preferred again.
	cl.pair.Start(t, 1)
	back := time.Now()
	for name, p := range cl.replicas() {
		child.Eventually(t, 60*time.Second, "replica "+name+" prefers DC1 again", func() (bool, string) {
			s, err := upstreamCheck(ctx, p)
			return err == nil && s == "ok", fmt.Sprint(s, err)
		})
	}
	t.Logf("FIGURES DC1 back: both replicas report upstream ok %v after DC1 answered again (health interval %v)",
		time.Since(back).Round(time.Millisecond), healthInterval)
	before, err := serverCalls(ctx, cl.a, cl.pair.URL(1))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if r := cl.list(ctx, cl.a, groups[0], cl.newProps()); r.Status != 200 {
			t.Fatalf("uncached listing after DC1 came back: %s", r)
		}
	}
	if after, err := serverCalls(ctx, cl.a, cl.pair.URL(1)); err != nil || after <= before {
		t.Errorf("after DC1 came back, uncached listings on A did not go to DC1 (successful calls %v then %v, %v)", before, after, err)
	}
	// DC1 missed the writes made on DC2 until it replicates them in; listings read
	// from it must not undo them (A remembers its own writes; B knows them only
	// through the shared journal).
	cl.expectListed(t, "the writes made with DC1 down, read after DC1 is preferred again", writes,
		[]string{smith, contact, zoe}, []string{quoted}, 3)
	cl.pair.AdminModify(t, 2, modifyLDIF(feed, "add", smith))
	cl.feedFreshness(t, "a change made on DC2 while the feed follows DC1 again (replication included)", feed,
		func(dns []string) bool { return hasDN(dns, smith) })

	rec, at = underLoad(t, cl, groups, func(made func()) { cl.pair.Kill(t, 2); made() }, loadAfterFault)
	rec.check(t, "DC2 killed under load after DC1 came back", at)
}

// TestPreferredDCLinkDown drops every packet to and from DC1 under load (a DC that
// hangs or whose network fails: no reset, no refusal), so that only the attempt
// timeout and the dial timeout get dirgate off it: no request may fail or take over
// 5 s. With the link still down, a removal and an addition through A show on B.
// After the link comes back DC1 is preferred again.
func TestPreferredDCLinkDown(t *testing.T) {
	cl := startCluster(t)
	ctx := context.Background()
	all := newGroups(t, cl.pair, []string{"link one", smith, quoted, hashUser, contact, pc},
		[]string{"link two", smith, zoe}, []string{"link writes", smith, quoted, contact})
	groups, writes := all[:2], all[2]
	warm(t, cl, all...)

	rec, at := underLoad(t, cl, groups, func(made func()) { cl.pair.LinkDown(t, 1); made() }, loadAfterFault)
	rec.check(t, "DC1's link down (packets dropped) under load", at)
	if sw, line := cl.feedSwitch(t, at); sw.IsZero() {
		t.Error("the change feed never logged that it follows DC2 after DC1's link went down")
	} else {
		t.Logf("FIGURES change feed: follows DC2 %v after DC1's link went down: %s", sw.Sub(at).Round(time.Millisecond), line)
	}
	cl.writesAcrossReplicas(t, writes, quoted, zoe)

	cl.pair.LinkUp(t, 1)
	back := time.Now()
	for name, p := range cl.replicas() {
		child.Eventually(t, 60*time.Second, "replica "+name+" prefers DC1 again", func() (bool, string) {
			s, err := upstreamCheck(ctx, p)
			return err == nil && s == "ok", fmt.Sprint(s, err)
		})
	}
	t.Logf("FIGURES DC1's link up: both replicas report upstream ok %v later (health interval %v)",
		time.Since(back).Round(time.Millisecond), healthInterval)
	cl.expectListed(t, "the writes made with DC1's link down, after it came back", writes,
		[]string{smith, contact, zoe}, []string{quoted}, 3)
}

// writesAcrossReplicas checks, with a DC down: a sign-in on A gives a token that B
// accepts; removing gone and adding added through A show in B's next listing.
func (cl *cluster) writesAcrossReplicas(t *testing.T, group, gone, added string) {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	post := func(u, body string) child.Result {
		req, _ := http.NewRequestWithContext(ctx, "POST", u, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		return cl.c.Send(req)
	}
	r := post(root(cl.a)+"/api/authSessions/create", `{"username":"`+aliceUPN+`","password":"`+alicePw+`"}`)
	var s struct{ SessionID string }
	if r.Status != 200 || json.Unmarshal(r.Body, &s) != nil {
		t.Errorf("sign-in on A: %s", r)
	} else {
		r = post(root(cl.b)+"/api/auth", `{"sessionId":"`+s.SessionID+`"}`)
		var tk struct{ Token string }
		if r.Status != 200 || json.Unmarshal(r.Body, &tk) != nil || tk.Token == "" {
			t.Errorf("exchange on B of a session made on A: %s", r)
		} else if r := cl.c.Do(ctx, "GET", child.ListURL(cl.b.Base, group, ""), tk.Token); r.Status != 200 {
			t.Errorf("listing on B with the token signed in on A: %s", r)
		}
	}
	if r := cl.remove(ctx, cl.a, group, gone); r.Status != 200 {
		t.Errorf("removal through A: %s", r)
	}
	if r := cl.list(ctx, cl.b, group, ""); r.Status != 200 || hasDN(r.DNs(), gone) {
		t.Errorf("B's next listing after A removed %s: %s", gone, r)
	}
	if r := cl.add(ctx, cl.a, group, added); r.Status != 200 {
		t.Errorf("addition through A: %s", r)
	}
	if r := cl.list(ctx, cl.b, group, ""); r.Status != 200 || !hasDN(r.DNs(), added) {
		t.Errorf("B's next listing after A added %s: %s", added, r)
	}
	t.Logf("sign-in on A used on B, removal and addition on A listed on B: %v", time.Since(start).Round(time.Millisecond))
}

// feedFreshness waits until the cached listing of group (no properties: the
// listing warm cached) shows a change on both replicas and logs how long each took.
func (cl *cluster) feedFreshness(t *testing.T, what, group string, shows func([]string) bool) {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	var took []string
	for _, name := range []string{"A", "B"} {
		p := cl.replicas()[name]
		child.Eventually(t, feedBound, what+": replica "+name+"'s listing shows it", func() (bool, string) {
			r := cl.list(ctx, p, group, "")
			return r.Status == 200 && shows(r.DNs()), r.Cache() + " " + r.String()
		})
		took = append(took, fmt.Sprintf("%s %v", name, time.Since(start).Round(time.Millisecond)))
	}
	t.Logf("FIGURES change-feed freshness, %s: listed after %s", what, strings.Join(took, ", "))
}

// expectListed lists group on both replicas rounds times, cached (no properties)
// and refilled (a properties set never asked for), and reports every listing that
// lacks a member of want or shows one of gone. The writes were made through A: a
// listing B refills from a DC that lacks them can only be corrected through the
// write journal the replicas share in Redis (writejournal/journal.go); such
// failures are marked [journal].
func (cl *cluster) expectListed(t *testing.T, what, group string, want, gone []string, rounds int) {
	t.Helper()
	ctx := context.Background()
	for i := range rounds {
		for _, name := range []string{"A", "B"} {
			p := cl.replicas()[name]
			for _, kind := range []string{"cached", "refilled"} {
				extra := ""
				if kind == "refilled" {
					extra = cl.newProps()
				}
				r := cl.list(ctx, p, group, extra)
				if r.Status != 200 {
					t.Errorf("%s: %s listing on %s: %s", what, kind, name, r)
					continue
				}
				dns := r.DNs()
				mark := ""
				if name == "B" {
					mark = "[journal] "
				}
				for _, w := range want {
					if !hasDN(dns, w) {
						t.Errorf("%s%s: %s listing on %s (round %d, cache %s) lacks %s", mark, what, kind, name, i, r.Cache(), w)
					}
				}
				for _, g := range gone {
					if hasDN(dns, g) {
						t.Errorf("%s%s: %s listing on %s (round %d, cache %s) shows %s again", mark, what, kind, name, i, r.Cache(), g)
					}
				}
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// modifyLDIF is an ldapmodify change adding or deleting one member value.
func modifyLDIF(group, op, member string) string {
	return fmt.Sprintf("dn: %s\nchangetype: modify\n%s: member\nmember: %s\n-\n", group, op, member)
}

// TestRemovalNotUndoneByFailover: a removal and an addition through replica A land
// on DC1; DC2's inbound replication is paused so that it does not receive them;
// then DC1 is killed before replicating, and both replicas read from DC2, which
// still holds the old membership. The removed member must never be listed again,
// nor the added one be missing, on either replica, from a cached listing or one
// refilled from DC2 (docs/cache.md's promise; docs/directory.md, "Writes laid over
// listings"). Replica A made the writes and remembers them in process; replica B
// knows them only through the journal the replicas share in Redis. Then DC2's
// replication resumes, DC1 comes back, and everything converges.
func TestRemovalNotUndoneByFailover(t *testing.T) {
	cl := startCluster(t)
	ctx := context.Background()
	group := newGroups(t, cl.pair, []string{"stranded", smith, quoted, contact})[0]
	warm(t, cl, group)

	cl.pair.PauseInbound(t, 2)
	if r := cl.remove(ctx, cl.a, group, quoted); r.Status != 200 {
		t.Fatalf("removal through A: %s", r)
	}
	if r := cl.add(ctx, cl.a, group, zoe); r.Status != 200 {
		t.Fatalf("addition through A: %s", r)
	}
	// The writes went to DC1 (preferred and up); DC2 must not have them, or this
	// test would not test anything.
	dc2 := cl.pair.DC(2).DialAdmin(t)
	if got, err := dcMembers(dc2, group); err != nil || !hasDN(got, quoted) || hasDN(got, zoe) {
		t.Fatalf("DC2 should still hold the old membership (inbound replication paused): %v, %v", got, err)
	}
	cl.expectListed(t, "before the failover", group, []string{smith, contact, zoe}, []string{quoted}, 1)

	cl.pair.Kill(t, 1)
	killed := time.Now()
	// Listings now come from DC2, which lacks both writes; several rounds so that
	// the change feed's switch to DC2 (and any resync it causes) happens meanwhile.
	cl.expectListed(t, "after DC1 died holding the writes (B's refills rely on the shared journal)", group,
		[]string{smith, contact, zoe}, []string{quoted}, 8)
	if got, err := dcMembers(dc2, group); err != nil || !hasDN(got, quoted) {
		t.Fatalf("DC2 received the removal while it was to be paused: %v, %v", got, err)
	}
	t.Logf("listings checked for %v after DC1 died with the writes unreplicated", time.Since(killed).Round(time.Millisecond))

	cl.pair.ResumeInbound(t, 2)
	cl.pair.Start(t, 1)
	converge := time.Now()
	took := waitOnDC(t, cl.pair, 2, group, []string{smith, contact, zoe})
	t.Logf("FIGURES DC2 received the stranded writes %v after DC1 started again", took.Round(time.Millisecond))
	cl.expectListed(t, "after DC1 returned and DC2 replicated", group, []string{smith, contact, zoe}, []string{quoted}, 2)
	t.Logf("converged: DC2 holds the writes and every listing agrees, %v after DC1 started", time.Since(converge).Round(time.Millisecond))
}
