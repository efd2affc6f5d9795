package ldap

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/test/harness/sambatest"
	goldap "github.com/go-ldap/ldap/v3"
)

// TestOverlayFollowsReplicationState: the write overlay corrects a listing exactly
// while the DC that answers it lacks the write, as that DC's up-to-dateness vector
// says (replstate.go), on the two replicating DCs of test/harness/samba/pair.sh.
//
// Replica a writes through DC1, replica b reads from DC2, and they share a journal as
// replicas share Redis. A removal through a, once DC2 holds it, no longer hides a
// member added back directly on DC2: b never saw DC2 agree with the removal, which is
// all the overlay had to go on before writes were stamped. And while DC2's inbound
// replication is paused, b's listings from DC2 still reflect a's removal.
func TestOverlayFollowsReplicationState(t *testing.T) {
	p := sambatest.PairFromEnv(t)
	ctx := context.Background()
	group := pairGroup(t, p, "overlay-repl", smokeAlice, smokeSmith)

	j := &memJournal{}
	acfg := pairConfig(p)
	acfg.Journal = j
	a := openDC(t, acfg)
	b := openDC(t, Config{URL: p.URL(2) + " " + p.URL(1), BindDN: p.BindDN,
		PasswordFile: os.Getenv(sambatest.VarPairPasswordFile), BaseDN: p.BaseDN, CAFile: p.CAFile, Journal: j})
	g, alice, smith := mustLookup(t, a, group), mustLookup(t, a, smokeAlice), mustLookup(t, a, smokeSmith)

	if err := a.RemoveMember(ctx, g, alice); err != nil {
		t.Fatalf("remove alice through DC1: %v", err)
	}
	j.mu.Lock()
	w := j.w[len(j.w)-1]
	j.mu.Unlock()
	if !stamped(w) || w.Server != p.URL(1) {
		t.Fatalf("the removal is remembered as %+v: want DC1's stamp", w)
	}
	waitMembers(t, p, 2, group, smokeSmith)
	modifyOn(t, p, 2, group, goldap.AddAttribute, smokeAlice)
	if got := memberKeys(t, b, g); !slices.Contains(got, key(smokeAlice)) {
		t.Errorf("listing from DC2, which holds the removal and then alice added back directly, = %v: the removal was laid over it", got)
	}

	// DC2 stops pulling changes: the next removal through DC1 is not there, and
	// listings read from DC2 must still reflect it.
	p.PauseInbound(t, 2)
	if err := a.RemoveMember(ctx, g, smith); err != nil {
		t.Fatalf("remove smith through DC1: %v", err)
	}
	time.Sleep(2 * time.Second) // longer than the pair's replication takes when it runs
	if got := dcMemberKeys(t, p, 2, group); !slices.Contains(got, key(smokeSmith)) {
		t.Fatalf("DC2 received the removal while its inbound replication was paused: %v", got)
	}
	if got := memberKeys(t, b, g); slices.Contains(got, key(smokeSmith)) {
		t.Errorf("listing from DC2, which lacks the removal made through DC1, = %v: the removal is not laid over it", got)
	}
	p.ResumeInbound(t, 2)
	p.Replicate(t)
	waitMembers(t, p, 2, group, smokeAlice)
	modifyOn(t, p, 2, group, goldap.AddAttribute, smokeSmith)
	if got := memberKeys(t, b, g); !slices.Contains(got, key(smokeSmith)) {
		t.Errorf("listing from DC2 after it caught up and smith was added back directly = %v: the removal was laid over it", got)
	}
}

// pairGroup creates a group of the test's own in the smoke OU on DC1, waits until DC2
// holds it, and deletes it when the test ends.
func pairGroup(t *testing.T, p sambatest.Pair, name string, members ...string) string {
	t.Helper()
	admin := p.DC(1).DialAdmin(t)
	dn := fmt.Sprintf("CN=%s %d,%s", goldap.EscapeDN(name), os.Getpid(), smokeOU)
	_ = admin.Del(goldap.NewDelRequest(dn, nil)) // left over by a killed run
	add := goldap.NewAddRequest(dn, nil)
	add.Attribute("objectClass", []string{"top", "group"})
	add.Attribute("member", members)
	if err := admin.Add(add); err != nil {
		t.Fatalf("create %s: %v", dn, err)
	}
	t.Cleanup(func() {
		c := p.DC(1).DialAdmin(t)
		if err := c.Del(goldap.NewDelRequest(dn, nil)); err != nil && !goldap.IsErrorWithCode(err, goldap.LDAPResultNoSuchObject) {
			t.Errorf("delete %s: %v", dn, err)
		}
	})
	waitMembers(t, p, 2, dn, members...)
	return dn
}

// waitMembers waits until DC n holds exactly want as group's members.
func waitMembers(t *testing.T, p sambatest.Pair, n int, group string, want ...string) {
	t.Helper()
	var wantKeys []string
	for _, m := range want {
		wantKeys = append(wantKeys, key(m))
	}
	slices.Sort(wantKeys)
	var got []string
	var err error
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if got, err = readMemberKeys(t, p, n, group); err == nil && slices.Equal(got, wantKeys) {
			return
		}
	}
	t.Fatalf("DC%d holds %v in %s (%v), want %v", n, got, group, err, wantKeys)
}

// dcMemberKeys reads group's member values on DC n as the administrator.
func dcMemberKeys(t *testing.T, p sambatest.Pair, n int, group string) []string {
	t.Helper()
	out, err := readMemberKeys(t, p, n, group)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func readMemberKeys(t *testing.T, p sambatest.Pair, n int, group string) ([]string, error) {
	t.Helper()
	res, err := p.DC(n).DialAdmin(t).Search(goldap.NewSearchRequest(group, goldap.ScopeBaseObject,
		goldap.NeverDerefAliases, 0, 0, false, "(objectClass=group)", []string{"member"}, nil))
	if err != nil || len(res.Entries) != 1 {
		return nil, fmt.Errorf("read %s on DC%d: %v", group, n, err)
	}
	var out []string
	for _, m := range res.Entries[0].GetAttributeValues("member") {
		out = append(out, key(m))
	}
	slices.Sort(out)
	return out, nil
}

// modifyOn adds (or deletes) member in group directly on DC n, as the administrator.
func modifyOn(t *testing.T, p sambatest.Pair, n int, group string, op uint, member string) {
	t.Helper()
	m := goldap.NewModifyRequest(group, nil)
	if op == goldap.AddAttribute {
		m.Add("member", []string{member})
	} else {
		m.Delete("member", []string{member})
	}
	if err := p.DC(n).DialAdmin(t).Modify(m); err != nil {
		t.Fatalf("change %s in %s on DC%d: %v", member, group, n, err)
	}
}

func memberKeys(t *testing.T, d *Directory, g dirgate.Object) []string {
	t.Helper()
	objs, err := d.Members(context.Background(), g, nil)
	if err != nil {
		t.Fatalf("members of %s: %v", g.DN, err)
	}
	return keys(objs)
}

func key(dn string) string { return dirgate.MustParseDN(dn).Key() }

// TestReturningDCCatchesUpFirst: a DC that comes back after its link was cut takes
// calls again only once its up-to-dateness vector shows it holds what the other DC
// took meanwhile; until then listings come from the other DC and show its changes.
func TestReturningDCCatchesUpFirst(t *testing.T) {
	p := sambatest.PairFromEnv(t)
	group := pairGroup(t, p, "catch-up", smokeAlice, smokeSmith)
	cfg := pairConfig(p)
	cfg.HealthInterval = 2 * time.Second
	d := openDC(t, cfg)
	g := mustLookup(t, d, group)

	// DC1 will miss the removal made on DC2 while it is cut off, and stays behind
	// once back, its inbound replication paused.
	p.PauseInbound(t, 1)
	p.LinkDown(t, 1)
	if got := memberKeys(t, d, g); len(got) != 2 {
		t.Fatalf("listing while DC1 is cut off = %v", got)
	}
	// The silence starts a health check, which marks DC1 down once its dial times out.
	for deadline := time.Now().Add(10 * time.Second); d.Servers()[0].Up; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("DC1 is not marked down after a call met its silence: %+v", d.Servers())
		}
	}
	modifyOn(t, p, 2, group, goldap.DeleteAttribute, smokeSmith)
	p.LinkUp(t, 1)
	var why string
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		s := d.Servers()[0]
		if s.Up {
			t.Fatalf("DC1 takes calls again although it lacks the removal made on DC2: %+v", s)
		}
		if why = s.Reason; strings.HasPrefix(why, "catching up") {
			break
		}
	}
	if !strings.HasPrefix(why, "catching up") {
		t.Fatalf("DC1 never passed its health check to catch up; reason %q", why)
	}
	if got := memberKeys(t, d, g); slices.Contains(got, key(smokeSmith)) {
		t.Errorf("listing while DC1 catches up = %v: it lists the member removed on DC2", got)
	}

	p.ResumeInbound(t, 1)
	p.Replicate(t)
	for deadline := time.Now().Add(30 * time.Second); !d.Servers()[0].Up; time.Sleep(250 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("DC1 does not take calls again after it caught up: %+v", d.Servers()[0])
		}
	}
	if got := memberKeys(t, d, g); slices.Contains(got, key(smokeSmith)) {
		t.Errorf("listing from DC1 after it caught up = %v", got)
	}
}
