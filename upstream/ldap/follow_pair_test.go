package ldap

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/test/harness/sambatest"
	goldap "github.com/go-ldap/ldap/v3"
)

// TestFeedFollowsOtherDCs: a change the feed read on DC1 is reported again when
// replication brings it to DC2, so that a listing filled from DC2 before it held the
// change is invalidated (follow.go), on the two replicating DCs of
// test/harness/samba/pair.sh. And DC2 not answering does not hold the feed up.
func TestFeedFollowsOtherDCs(t *testing.T) {
	p := sambatest.PairFromEnv(t)
	ctx := context.Background()
	// Members whose groups no other pair test checks: the group is deleted on DC1
	// at the end, and DC2 learns it only by replication.
	group := pairGroup(t, p, "follow", smokeSmith)
	cfg := pairConfig(p)
	cfg.AttemptTimeout = 2 * time.Second
	d := openDC(t, cfg)
	g := mustLookup(t, d, group)

	read := func(pos dirgate.ChangePosition) dirgate.ChangeBatch {
		t.Helper()
		b, err := d.ReadChanges(ctx, pos, 10000)
		if err != nil {
			t.Fatalf("read changes: %v", err)
		}
		return b
	}
	changed := func(b dirgate.ChangeBatch) bool {
		return slices.ContainsFunc(b.Changes, func(c dirgate.Change) bool { return c.GUID == g.GUID })
	}
	pos := read(dirgate.ChangePosition{}).Position // a resync: no position yet
	pos = read(pos).Position                       // every DC followed from here

	p.PauseInbound(t, 2)
	modifyOn(t, p, 1, group, goldap.AddAttribute, smokeQuoted)
	b := read(pos)
	if b.Resync != "" || !changed(b) {
		t.Fatalf("the change on DC1 was not read: resync %q, %d changes", b.Resync, len(b.Changes))
	}
	pos = b.Position
	if got := dcMemberKeys(t, p, 2, group); slices.Contains(got, key(smokeQuoted)) {
		t.Fatalf("DC2 received the change while its inbound replication was paused: %v", got)
	}
	if b = read(pos); changed(b) {
		t.Fatalf("the change was reported twice before DC2 received it")
	}
	pos = b.Position

	p.ResumeInbound(t, 2)
	p.Replicate(t)
	waitMembers(t, p, 2, group, smokeSmith, smokeQuoted)
	if b = read(pos); b.Resync != "" || !changed(b) {
		t.Errorf("DC2 received the change by replication, and the feed did not report it again: resync %q, %d changes", b.Resync, len(b.Changes))
	}
	pos = b.Position

	// DC2 cut off: the feed reads DC1 within the attempt timeout and keeps DC2's mark.
	p.LinkDown(t, 2)
	start := time.Now()
	b = read(pos)
	if took := time.Since(start); took > 3*cfg.AttemptTimeout {
		t.Errorf("with DC2 cut off a read took %v", took)
	}
	if b.Resync != "" {
		t.Errorf("with DC2 cut off the feed resynced: %s (%s)", b.Resync, b.Detail)
	}
	for _, m := range pos.Follow {
		if _, kept := followMarkOf(b.Position, m.Source); !kept {
			t.Errorf("the mark of %s was dropped while its DC did not answer", m.Source)
		}
	}
	p.LinkUp(t, 2)
}
