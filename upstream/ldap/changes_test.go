package ldap

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/test/harness/sambatest"
	goldap "github.com/go-ldap/ldap/v3"
)

func entryWith(attrs map[string][]string, raw map[string][][]byte) *goldap.Entry {
	e := &goldap.Entry{DN: "<GUID=x>;CN=x"}
	for k, v := range attrs {
		bv := make([][]byte, len(v))
		for i, s := range v {
			bv[i] = []byte(s)
		}
		e.Attributes = append(e.Attributes, &goldap.EntryAttribute{Name: k, Values: v, ByteValues: bv})
	}
	for k, v := range raw {
		e.Attributes = append(e.Attributes, &goldap.EntryAttribute{Name: k, ByteValues: v})
	}
	return e
}

var guid16 = []byte{0x08, 0xa0, 0x72, 0x1e, 0x77, 0xe2, 0xfd, 0x4b, 0x81, 0x2f, 0x2f, 0x72, 0xc3, 0xc8, 0x85, 0xdf}

func TestParseChange(t *testing.T) {
	d := &Directory{}
	const g1 = "<GUID=4dea8123-ae9b-4928-9b12-c90456c7b8a4>;<SID=S-1-5-21-1-2-3-1105>;CN=g1,DC=x"
	for _, c := range []struct {
		name    string
		attrs   map[string][]string
		raw     map[string][][]byte
		kind    dirgate.ChangeKind
		groups  []string
		known   bool
		rid     int
		wantErr bool
	}{
		{name: "user in a group", attrs: map[string][]string{"objectClass": {"top", "user"}, "memberOf": {g1}, "primaryGroupID": {"513"}},
			kind: dirgate.ChangeObject, groups: []string{"4dea8123-ae9b-4928-9b12-c90456c7b8a4"}, known: true, rid: 513},
		{name: "group", attrs: map[string][]string{"objectClass": {"top", "Group"}}, kind: dirgate.ChangeGroup, known: true},
		{name: "tombstone", attrs: map[string][]string{"objectClass": {"user"}, "isDeleted": {"TRUE"}}, kind: dirgate.ChangeDeleted},
		{name: "more groups than one read returns", attrs: map[string][]string{"objectClass": {"user"}, "memberOf;range=0-1499": {g1}},
			kind: dirgate.ChangeObject, groups: []string{"4dea8123-ae9b-4928-9b12-c90456c7b8a4"}},
		{name: "memberOf without extended form", attrs: map[string][]string{"memberOf": {"CN=g1,DC=x"}}, wantErr: true},
		{name: "memberOf with a bad GUID", attrs: map[string][]string{"memberOf": {"<GUID=zz>;CN=g1"}}, wantErr: true},
		{name: "bad primaryGroupID", attrs: map[string][]string{"primaryGroupID": {"x"}}, wantErr: true},
		{name: "bad range", attrs: map[string][]string{"memberOf;range=9-1": {g1}}, wantErr: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			raw := map[string][][]byte{"objectGUID": {guid16}}
			e := entryWith(c.attrs, raw)
			e.DN = "<GUID=1e72a008-e277-4bfd-812f-2f72c3c885df>;<SID=S-1-5-21-1-2-3-1106>;CN=u,DC=x"
			ch, err := d.parseChange(e)
			if c.wantErr {
				if err == nil {
					t.Fatalf("parsed: %+v", ch)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ch.GUID != "1e72a008-e277-4bfd-812f-2f72c3c885df" || ch.Kind != c.kind || ch.GroupsKnown != c.known ||
				fmt.Sprint(ch.Groups) != fmt.Sprint(c.groups) || ch.primaryRID != c.rid || ch.DN != "CN=u,DC=x" {
				t.Fatalf("got %+v", ch)
			}
		})
	}
	if _, err := d.parseChange(entryWith(nil, map[string][][]byte{"objectGUID": {guid16[:3]}})); err == nil {
		t.Fatal("a short objectGUID parsed")
	}
}

func FuzzParseChange(f *testing.F) {
	f.Add(guid16, "user", "<GUID=4dea8123-ae9b-4928-9b12-c90456c7b8a4>;CN=g", "513", "FALSE", "memberOf")
	f.Add([]byte{1}, "group", "<GUID=", "0", "TRUE", "memberOf;range=0-*")
	f.Fuzz(func(t *testing.T, guid []byte, class, memberOf, pg, deleted, attr string) {
		d := &Directory{}
		e := entryWith(map[string][]string{"objectClass": {class}, attr: {memberOf}, "primaryGroupID": {pg}, "isDeleted": {deleted}},
			map[string][][]byte{"objectGUID": {guid}})
		ch, err := d.parseChange(e)
		if err != nil {
			return
		}
		if len(guid) != 16 {
			t.Fatal("accepted a GUID that is not 16 bytes")
		}
		for _, g := range ch.Groups {
			if _, err := dirgate.ParseIdentifier(g); err != nil {
				t.Fatalf("group %q", g)
			}
		}
	})
}

// TestIntegrationReadChanges: against the DC, a member added shows as a change of
// the group; the position's checks refuse another server, a restored database, a
// USN that went backwards and a gap longer than the tombstone lifetime; a position
// from another DC with a mark for this one continues from the mark; a burst beyond
// the bound is a resync, not a partial batch.
func TestIntegrationReadChanges(t *testing.T) {
	dc := sambatest.Env(t)
	d := openDC(t, dcConfig(dc))
	adm := dc.DialAdmin(t)
	ctx := context.Background()
	ou := fmt.Sprintf("OU=dirgate-changes-%d-%d,%s", os.Getpid(), time.Now().UnixNano()%1e9, dc.BaseDN)
	add := func(dn string, attrs map[string][]string) {
		t.Helper()
		a := goldap.NewAddRequest(dn, nil)
		for k, v := range attrs {
			a.Attribute(k, v)
		}
		if err := adm.Add(a); err != nil {
			t.Fatalf("add %s: %v", dn, err)
		}
	}
	add(ou, map[string][]string{"objectClass": {"organizationalUnit"}})
	var made []string
	t.Cleanup(func() {
		c := dc.DialAdmin(t)
		for i := len(made) - 1; i >= 0; i-- {
			c.Del(goldap.NewDelRequest(made[i], nil))
		}
		c.Del(goldap.NewDelRequest(ou, nil))
	})
	tag := fmt.Sprintf("%d", time.Now().UnixNano()%1e9)
	user, group := "CN=u,"+ou, "CN=g,"+ou
	add(user, map[string][]string{"objectClass": {"user"}, "sAMAccountName": {"rc" + tag}, "userAccountControl": {"544"}})
	add(group, map[string][]string{"objectClass": {"group"}})
	made = append(made, user, group)
	ug := mustLookup(t, d, user)
	gg := mustLookup(t, d, group)

	b, err := d.ReadChanges(ctx, dirgate.ChangePosition{}, 100)
	if err != nil || b.Resync != dirgate.ResyncNoPosition || b.Position.USN == 0 || !strings.Contains(b.Position.Source, "|") {
		t.Fatalf("first read: %+v %v", b, err)
	}
	pos := b.Position
	m := goldap.NewModifyRequest(group, nil)
	m.Add("member", []string{user})
	if err := adm.Modify(m); err != nil {
		t.Fatal(err)
	}
	// Other tests change the shared DC too: look for this group among the changes.
	b, err = d.ReadChanges(ctx, pos, 100000)
	if err != nil || b.Resync != "" {
		t.Fatalf("after a member was added: %+v %v", b.Resync, err)
	}
	var sawGroup, sawUser bool
	for _, ch := range b.Changes {
		sawGroup = sawGroup || ch.GUID == gg.GUID && ch.Kind == dirgate.ChangeGroup
		sawUser = sawUser || ch.GUID == ug.GUID
	}
	if !sawGroup || sawUser {
		t.Fatalf("a member added must change the group (%v) and not the member (%v)", sawGroup, sawUser)
	}
	// The member's own change lists its groups, primary group included.
	pos = b.Position
	m = goldap.NewModifyRequest(user, nil)
	m.Replace("displayName", []string{"changed " + tag})
	if err := adm.Modify(m); err != nil {
		t.Fatal(err)
	}
	b, err = d.ReadChanges(ctx, pos, 100000)
	if err != nil {
		t.Fatal(err)
	}
	du := mustLookup(t, d, "CN=Domain Users,CN=Users,"+dc.BaseDN)
	found := false
	for _, ch := range b.Changes {
		if ch.GUID == ug.GUID {
			found = true
			if ch.Kind != dirgate.ChangeObject || !ch.GroupsKnown || fmt.Sprint(ch.Groups) != fmt.Sprint([]string{gg.GUID, du.GUID}) {
				t.Fatalf("the member's change: %+v (want groups %s, %s)", ch, gg.GUID, du.GUID)
			}
		}
	}
	if !found {
		t.Fatal("the member's own change was not read")
	}
	pos = b.Position

	server, inv, _ := strings.Cut(pos.Source, "|")
	for _, c := range []struct {
		pos  dirgate.ChangePosition
		want string
	}{
		{dirgate.ChangePosition{Source: "CN=NTDS Settings,CN=OTHER|" + inv, USN: pos.USN, Time: pos.Time}, dirgate.ResyncServerChanged},
		{dirgate.ChangePosition{Source: server + "|00000000-0000-0000-0000-000000000009", USN: pos.USN, Time: pos.Time}, dirgate.ResyncRestored},
		{dirgate.ChangePosition{Source: pos.Source, USN: pos.USN + 1<<40, Time: pos.Time}, dirgate.ResyncUSNBackwards},
		{dirgate.ChangePosition{Source: pos.Source, USN: pos.USN - 1, Time: time.Now().Add(-400 * 24 * time.Hour)}, dirgate.ResyncGap},
	} {
		b, err := d.ReadChanges(ctx, c.pos, 100000)
		if err != nil || b.Resync != c.want || len(b.Changes) != 0 {
			t.Errorf("position %+v: resync %q (%s), %d changes, %v; want %q", c.pos, b.Resync, b.Detail, len(b.Changes), err, c.want)
		}
	}

	// A position from another DC that keeps a mark for this one continues from the
	// mark, and keeps the other DC's position as a mark in turn.
	other := dirgate.ChangePosition{Source: "CN=NTDS Settings,CN=OTHER|" + inv, USN: 1 << 40, Time: pos.Time,
		Marks: []dirgate.ChangeMark{{Source: pos.Source, USN: pos.USN, Time: pos.Time}}}
	b, err = d.ReadChanges(ctx, other, 100000)
	if err != nil || b.Resync != "" || b.Position.Source != pos.Source || b.Position.USN < pos.USN ||
		len(b.Position.Marks) != 1 || b.Position.Marks[0].Source != other.Source || b.Position.Marks[0].USN != other.USN {
		t.Fatalf("from another DC's position with a mark for this one: %q (%s) %+v %v", b.Resync, b.Detail, b.Position, err)
	}

	// A burst: more objects changed than the bound.
	for i := range 4 {
		dn := fmt.Sprintf("CN=burst-%d,%s", i, ou)
		add(dn, map[string][]string{"objectClass": {"group"}})
		made = append(made, dn)
	}
	b, err = d.ReadChanges(ctx, pos, 2)
	if err != nil || b.Resync != dirgate.ResyncBurst || len(b.Changes) != 0 || b.Position.USN <= pos.USN {
		t.Fatalf("burst: %q %d changes %v", b.Resync, len(b.Changes), err)
	}
}

// TestIntegrationChangeCoverage: the service account cannot read deleted objects
// (the DC's default), the administrator can.
func TestIntegrationChangeCoverage(t *testing.T) {
	dc := sambatest.Env(t)
	if err := openDC(t, dcConfig(dc)).ChangeCoverage(context.Background()); err == nil || !strings.Contains(err.Error(), "deletions are not visible") {
		t.Fatalf("service account: %v", err)
	}
	pw := t.TempDir() + "/admin.pw"
	os.WriteFile(pw, []byte(dc.AdminPassword), 0o600)
	cfg := dcConfig(dc)
	cfg.BindDN, cfg.PasswordFile = dc.AdminDN, pw
	if err := openDC(t, cfg).ChangeCoverage(context.Background()); err != nil {
		t.Fatalf("administrator: %v", err)
	}
}
