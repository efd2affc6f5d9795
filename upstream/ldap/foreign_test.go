package ldap

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/dirgate/dirgate"
)

// Group types as the DCs hold them (signed 32-bit): security groups of each scope.
const (
	globalGroup      = "-2147483646"
	domainLocalGroup = "-2147483644"
	universalGroup   = "-2147483640"
	builtinLocal     = "-2147483643"
)

// foreignSIDs are SIDs of another domain: one the org holds an FSP for, one it
// holds none for.
const (
	otherDomain = "S-1-5-21-7-8-9"
	heldSID     = otherDomain + "-1104"
	newSID      = otherDomain + "-1105"
)

// foreignOrg is the org with scopes on its groups: G1 and G2 global, a universal
// group U, a domain-local group L holding nothing, Administrators builtin local,
// and an FSP for heldSID in no group.
type foreignOrg struct {
	*org
	local, universal, heldFSP *fakeObj
}

func newForeignOrg() *foreignOrg {
	o := &foreignOrg{org: newOrg()}
	s := o.srv
	o.g1.attrs = map[string][]string{"groupType": {globalGroup}}
	o.g2.attrs = map[string][]string{"groupType": {globalGroup}}
	o.builtin.attrs = map[string][]string{"groupType": {builtinLocal}}
	o.universal = s.add(&fakeObj{dn: "CN=U," + users, guid: guid(20), sid: domSID + "-1300", classes: []string{"group"},
		attrs: map[string][]string{"groupType": {universalGroup}}})
	o.local = s.add(&fakeObj{dn: "CN=L," + users, guid: guid(21), sid: domSID + "-1301", classes: []string{"group"},
		attrs: map[string][]string{"groupType": {domainLocalGroup}}})
	o.heldFSP = s.add(&fakeObj{dn: "CN=" + heldSID + ",CN=ForeignSecurityPrincipals," + s.domain, guid: guid(22), sid: heldSID,
		classes: []string{"foreignSecurityPrincipal"}})
	return o
}

// fsps returns the foreign security principals the fake holds for sid.
func (s *fakeServer) fsps(sid string) []*fakeObj {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.where(func(o *fakeObj) bool { return o.sid == sid && contains(o.classes, "foreignSecurityPrincipal") })
}

// TestAddForeignMember: a principal of another domain is added by SID to a
// domain-local group (builtin ones included): through the FSP the domain holds
// for it, or one the DC creates. Any other group is refused as AD refuses it, with
// the answer of any refused addition, nothing written and no FSP created; so is a
// SID that names an object of the domain that is no FSP.
func TestAddForeignMember(t *testing.T) {
	tests := []struct {
		name     string
		setup    func(o *foreignOrg)
		group    func(o *foreignOrg) *fakeObj
		sid      string
		want     error  // a sentinel
		wantMsg  string // the client message of an error, "" for success
		inAfter  bool   // an FSP for sid is in the group afterwards
		fspAfter int    // FSPs for sid afterwards
	}{
		{"created in a domain-local group", nil, func(o *foreignOrg) *fakeObj { return o.local }, newSID, nil, "", true, 1},
		{"through the FSP held", nil, func(o *foreignOrg) *fakeObj { return o.local }, heldSID, nil, "", true, 1},
		{"builtin local group", nil, func(o *foreignOrg) *fakeObj { return o.builtin }, newSID, nil, "", true, 1},
		{"already a member", func(o *foreignOrg) { o.local.member = []string{o.heldFSP.dn} },
			func(o *foreignOrg) *fakeObj { return o.local }, heldSID, dirgate.ErrAlreadyMember, "", true, 1},
		{"global group, no FSP", nil, func(o *foreignOrg) *fakeObj { return o.g2 }, newSID, nil, dirgate.RefusedAddition, false, 0},
		{"global group, FSP held", nil, func(o *foreignOrg) *fakeObj { return o.g2 }, heldSID, nil, dirgate.RefusedAddition, false, 1},
		{"universal group", nil, func(o *foreignOrg) *fakeObj { return o.universal }, newSID, nil, dirgate.RefusedAddition, false, 0},
		{"the SID names a user of the domain", func(o *foreignOrg) {
			o.srv.add(&fakeObj{dn: "CN=migrated," + users, guid: guid(30), sid: newSID, classes: []string{"person", "user"}})
		}, func(o *foreignOrg) *fakeObj { return o.local }, newSID, nil, dirgate.RefusedAddition, false, 0},
		// The connection breaks after the write: the retry's 68 is the first
		// attempt's work, and only one FSP was made.
		{"retry after write", func(o *foreignOrg) { o.srv.applyThenFail.Store(1) },
			func(o *foreignOrg) *fakeObj { return o.local }, newSID, nil, "", true, 1},
		{"retry before write", func(o *foreignOrg) { o.srv.failNext.Store(1) },
			func(o *foreignOrg) *fakeObj { return o.local }, newSID, nil, "", true, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := newForeignOrg()
			d := o.dir(t, Config{})
			g := obj(t, d, tt.group(o).guid)
			if tt.setup != nil {
				tt.setup(o)
			}
			err := d.AddForeignMember(context.Background(), g, dirgate.MustParseIdentifier(tt.sid))
			switch {
			case tt.want != nil:
				if !errors.Is(err, tt.want) {
					t.Fatalf("err = %v, want %v", err, tt.want)
				}
			case tt.wantMsg == "":
				if err != nil {
					t.Fatalf("err = %v", err)
				}
			default:
				if dirgate.ErrorCode(err) != dirgate.EINVALID || dirgate.ErrorMessage(err) != tt.wantMsg {
					t.Fatalf("err = %v (%s %q), want %s %q", err, dirgate.ErrorCode(err), dirgate.ErrorMessage(err), dirgate.EINVALID, tt.wantMsg)
				}
			}
			fsps := o.srv.fsps(tt.sid)
			if len(fsps) != tt.fspAfter {
				t.Fatalf("%d FSPs for %s afterwards, want %d", len(fsps), tt.sid, tt.fspAfter)
			}
			in := len(fsps) == 1 && contains(tt.group(o).member, fsps[0].dn)
			if in != tt.inAfter {
				t.Errorf("FSP in the group = %v, want %v (members %q)", in, tt.inAfter, tt.group(o).member)
			}
		})
	}
}

// TestAddForeignMemberChecksTheSID: only a SID of another domain, with its RID,
// reaches the DC as <SID=…>; anything else is refused before any request.
func TestAddForeignMemberChecksTheSID(t *testing.T) {
	o := newForeignOrg()
	d := o.dir(t, Config{})
	g := obj(t, d, o.local.guid)
	before := len(o.srv.log())
	for _, id := range []string{"S-1-5-11", "S-1-5-32-544", domSID + "-1104", otherDomain, "S-1-5-21-7-8-9-10-1105", o.alice.guid, o.alice.dn} {
		err := d.AddForeignMember(context.Background(), g, dirgate.MustParseIdentifier(id))
		if dirgate.ErrorCode(err) != dirgate.EINVALID {
			t.Errorf("%s: %v, want %s", id, err, dirgate.EINVALID)
		}
	}
	if got := o.srv.log()[before:]; len(got) != 0 || len(o.local.member) != 0 {
		t.Errorf("requests sent for refused SIDs: %q, members %q", got, o.local.member)
	}
}

// TestAddForeignMemberSameRequests: adding a principal the domain holds an FSP for
// and one it holds none for sends the same requests (the SID aside), so that
// neither the DC's log nor the time tells the caller whether the principal was in
// any group of the domain.
func TestAddForeignMemberSameRequests(t *testing.T) {
	shape := func(sid string) []string {
		o := newForeignOrg()
		d := o.dir(t, Config{})
		g := obj(t, d, o.local.guid)
		before := len(o.srv.log())
		if err := d.AddForeignMember(context.Background(), g, dirgate.MustParseIdentifier(sid)); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range o.srv.log()[before:] {
			out = append(out, strings.ReplaceAll(s, sid, "<sid>"))
		}
		return out
	}
	held, created := shape(heldSID), shape(newSID)
	if !slices.Equal(held, created) {
		t.Errorf("requests with an FSP held:\n%q\nwith none:\n%q", held, created)
	}
}

// TestAddForeignMemberRemembersTheFSP: with several DCs the write is remembered
// under the GUID of the FSP the DC created, read back from that DC, so a listing
// read from a DC that lacks the write (it has the FSP, not yet the membership)
// shows it.
func TestAddForeignMemberRemembersTheFSP(t *testing.T) {
	j := &memJournal{}
	d, o1, o2 := twoDCs(t, Config{Journal: j}, nil)
	for _, o := range []*org{o1, o2} {
		o.g1.attrs = map[string][]string{"groupType": {domainLocalGroup}}
	}
	g1 := byGUID(t, d, o1.g1.guid)
	if err := d.AddForeignMember(context.Background(), g1, dirgate.MustParseIdentifier(newSID)); err != nil {
		t.Fatal(err)
	}
	created := o1.srv.fsps(newSID)
	if len(created) != 1 || len(o2.srv.fsps(newSID)) != 0 {
		t.Fatalf("FSPs on DC1 %d, on DC2 %d: want the write on DC1 only", len(created), len(o2.srv.fsps(newSID)))
	}
	if len(j.w) != 1 || j.w[0].Member != created[0].guid || j.w[0].Group != g1.GUID || !j.w[0].Added {
		t.Fatalf("journal %+v, want the addition of %s to %s", j.w, created[0].guid, g1.GUID)
	}
	// DC2 received the FSP but not yet the membership; DC1 stops.
	fsp := *created[0]
	o2.srv.add(&fsp)
	o1.srv.refuse.Store(true)
	d.servers()[0].pool.flushIdle()
	members, err := d.Members(context.Background(), g1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !guids(members)[fsp.guid] {
		t.Errorf("a listing from DC2 lacks the FSP added on DC1: %q", dns(members))
	}
}
