package domains

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/dirgate/dirgate"
)

const (
	emeaBase = "DC=emea," + corpBase
	emeaSID  = "S-1-5-21-1100-2100-3100"
)

// oneForest is CORP and its child domain EMEA, one forest, beside FABRIKAM of
// another forest. Within the forest a member of the other domain is held by its DN
// and listed as a placeholder: CORP's Universal holds EMEA's User, EMEA's Contact
// (no SID) and EMEA's Gone (deleted: EMEA no longer holds it), besides CORP's User;
// CORP's Local holds Universal and CORP's FSP for FABRIKAM's User. EMEA's Global
// holds EMEA's User; EMEA's Local holds CORP's User. FABRIKAM's Local holds its FSP
// for CORP's User.
type oneForest struct {
	corp, emea, fab                      *forestFinder
	cUser, cUniversal, cLocal, cFSP      dirgate.Object
	eUser, eContact, eGone               dirgate.Object
	eGlobal, eLocal, fUser, fLocal, fFSP dirgate.Object
}

func newOneForest() *oneForest {
	f := &oneForest{corp: &forestFinder{fakeDir: &fakeDir{name: "corp"}}, emea: &forestFinder{fakeDir: &fakeDir{name: "emea"}},
		fab: &forestFinder{fakeDir: &fakeDir{name: "fabrikam"}}}
	f.fUser = f.fab.add(object(dirgate.TypeUser, "CN=User,"+ou+fabBase, fabSID+"-1104"))

	f.eUser = f.emea.add(object(dirgate.TypeUser, "CN=User,"+ou+emeaBase, emeaSID+"-1104"))
	f.eContact = f.emea.add(object(dirgate.TypeContact, "CN=Contact,"+ou+emeaBase, ""))
	f.eGone = object(dirgate.TypeUser, "CN=Gone,"+ou+emeaBase, emeaSID+"-1199") // not held by EMEA
	f.eGlobal = f.emea.add(object(dirgate.TypeGroup, "CN=Global,"+ou+emeaBase, emeaSID+"-1106"), f.eUser)

	f.cUser = f.corp.add(object(dirgate.TypeUser, "CN=User,"+ou+corpBase, corpSID+"-1104"))
	pUser, pContact, pGone := f.corp.add(placeholder(f.eUser)), f.corp.add(placeholder(f.eContact)), f.corp.add(placeholder(f.eGone))
	f.cUniversal = f.corp.add(object(dirgate.TypeGroup, "CN=Universal,"+ou+corpBase, corpSID+"-1107"), pUser, pContact, pGone, f.cUser)
	f.cFSP = f.corp.add(fsp(corpBase, f.fUser.SID))
	f.cLocal = f.corp.add(object(dirgate.TypeGroup, "CN=Local,"+ou+corpBase, corpSID+"-1108"), f.cUniversal, f.cFSP)

	f.eLocal = f.emea.add(object(dirgate.TypeGroup, "CN=Local,"+ou+emeaBase, emeaSID+"-1108"), f.emea.add(placeholder(f.cUser)))

	f.fFSP = f.fab.add(fsp(fabBase, f.cUser.SID))
	f.fLocal = f.fab.add(object(dirgate.TypeGroup, "CN=Local,"+ou+fabBase, fabSID+"-1108"), f.fFSP)
	return f
}

// domains are the three domains, CORP (home) and EMEA each naming the other among
// its forest's domains (in other letter cases), or EMEA first when childFirst.
func (f *oneForest) domains(childFirst bool) []Domain {
	corp := Domain{BaseDN: corpBase, SID: corpSID, Dir: f.corp, ForestDomains: []dirgate.DN{dirgate.MustParseDN(emeaBase)}}
	emea := Domain{BaseDN: emeaBase, SID: emeaSID, Dir: f.emea, ForestDomains: []dirgate.DN{dirgate.MustParseDN(strings.ToLower(corpBase))}}
	fab := Domain{BaseDN: fabBase, SID: fabSID, Dir: f.fab}
	if childFirst {
		return []Domain{emea, corp, fab}
	}
	return []Domain{corp, emea, fab}
}

func openRouter(t *testing.T, doms []Domain) *Directory {
	t.Helper()
	r, err := Config{Domains: doms, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// named is the router's domain of DNS name n.
func named(t *testing.T, r *Directory, n string) *domain {
	t.Helper()
	for _, d := range r.domains {
		if d.name == n {
			return d
		}
	}
	t.Fatalf("no domain %s", n)
	return nil
}

// orders runs fn with CORP configured first (the home domain), then EMEA first.
func orders(t *testing.T, fn func(t *testing.T, childFirst bool)) {
	for _, childFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("childFirst=%v", childFirst), func(t *testing.T) { fn(t, childFirst) })
	}
}

// A DN is the domain's with the deepest base DN that holds it, whichever is
// configured first: a DN of EMEA is EMEA's although it lies under CORP's base DN
// too, by the plain check and by the parser alike.
func TestOfDNDeepestBaseDN(t *testing.T) {
	orders(t, func(t *testing.T, childFirst bool) {
		f := newOneForest()
		r := openRouter(t, f.domains(childFirst))
		for _, c := range []struct{ dn, want string }{
			{f.eUser.DN, "emea.corp.example.com"},
			{emeaBase, "emea.corp.example.com"},
			{`CN=Doe\, Jane,` + ou + "dc=EMEA,dc=Corp,DC=example,DC=com", "emea.corp.example.com"},
			{f.cUser.DN, "corp.example.com"},
			{corpBase, "corp.example.com"},
			// A child domain not configured is its parent's, as before.
			{"CN=User,DC=apac," + corpBase, "corp.example.com"},
			{`CN=Doe\, Jane,DC=apac,` + corpBase, "corp.example.com"},
			{f.fUser.DN, "fabrikam.example.net"},
			{"DC=example,DC=com", ""},
		} {
			var got, gotParsed string
			if d := r.ofDN(c.dn); d != nil {
				got = d.name
			}
			if d := r.ofParsedDN(dirgate.MustParseDN(c.dn)); d != nil {
				gotParsed = d.name
			}
			if got != c.want || gotParsed != c.want {
				t.Errorf("%s: ofDN %q, ofParsedDN %q, want %q", c.dn, got, gotParsed, c.want)
			}
		}
		// A look-up by DN of EMEA's asks EMEA alone.
		got, err := r.Lookup(context.Background(), ident(t, f.eUser.DN), nil)
		if err != nil || got.GUID != f.eUser.GUID || f.corp.lookupCount() != 0 {
			t.Errorf("EMEA's User: %s, %v; CORP asked %d times, want EMEA's answer alone", got.DN, err, f.corp.lookupCount())
		}
	})
}

// An object a domain answers must be its own under the deepest base DN: CORP's
// answer of an object under EMEA's base DN is refused, and EMEA's of one of CORP's,
// through the router's look-ups as in checkAnswer itself.
func TestCheckAnswerNestedBaseDNs(t *testing.T) {
	orders(t, func(t *testing.T, childFirst bool) {
		f := newOneForest()
		r := openRouter(t, f.domains(childFirst))
		ctx := context.Background()
		corp, emea := named(t, r, "corp.example.com"), named(t, r, "emea.corp.example.com")
		for _, c := range []struct {
			d   *domain
			obj dirgate.Object
			own bool
		}{{corp, f.eUser, false}, {emea, f.cUser, false}, {corp, f.cUser, true}, {emea, f.eUser, true}} {
			err := r.checkAnswer(ctx, c.d, ident(t, c.obj.GUID), c.obj)
			if (err == nil) != c.own || (err != nil && !errors.Is(err, errNotItsOwn)) {
				t.Errorf("%s answering %s: %v, want its own %v", c.d.name, c.obj.DN, err, c.own)
			}
		}
		// The domain that is not home answers a DN of its own with the other's
		// object.
		other, asked, forged := f.emea, f.eUser, f.cUser
		if childFirst {
			other, asked, forged = f.corp, f.cUser, f.eUser
		}
		forged.GUID = asked.GUID
		other.forged = map[string]dirgate.Object{asked.DN: forged}
		if o, err := r.Lookup(ctx, ident(t, asked.DN), nil); dirgate.ErrorCode(err) != dirgate.EUPSTREAM {
			t.Errorf("%s answered with %s: %v, want EUPSTREAM", asked.DN, o.DN, err)
		}
	})
}

// Placeholders of members of the other domain of the forest are replaced by the
// objects that domain holds under the GUID the group's DC holds for them; one that
// domain does not hold stays as listed, unmarked (the listing may be kept), and
// every one while the domain is down stays as listed, marked.
func TestMembersReplacesPlaceholdersOfTheForest(t *testing.T) {
	orders(t, func(t *testing.T, childFirst bool) {
		f := newOneForest()
		r := openRouter(t, f.domains(childFirst))
		ctx := context.Background()
		got, err := r.Members(ctx, f.cUniversal, []string{"samaccountname"})
		if err != nil {
			t.Fatal(err)
		}
		if g, w := dns(got), want(f.eUser, f.eContact, f.eGone, f.cUser); !slices.Equal(g, w) {
			t.Fatalf("members %q, want %q", g, w)
		}
		for _, o := range got {
			replaced := o.GUID == f.eUser.GUID || o.GUID == f.eContact.GUID
			switch {
			case replaced && (o.Unresolved || o.ObjectType == "" || o.Properties["samaccountname"] == nil):
				t.Errorf("%s listed as %+v, want EMEA's object with its properties, unmarked", o.DN, o)
			case o.GUID == f.eGone.GUID && (o.Unresolved || o.ObjectType != ""):
				t.Errorf("%s, which EMEA does not hold, listed as %+v, want the placeholder, unmarked", o.DN, o)
			case o.GUID == f.cUser.GUID && o.Unresolved:
				t.Errorf("CORP's own User marked unresolved")
			}
		}
		got, err = r.Members(ctx, f.eLocal, nil)
		if err != nil || len(got) != 1 || got[0].ObjectType != dirgate.TypeUser || got[0].Unresolved || got[0].DN != f.cUser.DN {
			t.Errorf("EMEA's Local: %+v, %v, want CORP's User as CORP holds it", got, err)
		}
		f.emea.down.Store(true)
		got, err = r.Members(ctx, f.cUniversal, nil)
		if err != nil {
			t.Fatal(err)
		}
		if n := dirgate.CountUnresolved(got); n != 3 {
			t.Errorf("EMEA down: %d marked of %q, want its 3 placeholders", n, dns(got))
		}
	})
}

// Within one forest a member of the other domain is written to the group's domain
// by its DN, nothing looked up and no FSP made, in either direction; across forests
// through the SID (an FSP) as before. With the forest unknown the domains are taken
// to be of two forests.
func TestWritesWithinOneForestByDN(t *testing.T) {
	f := newOneForest()
	ctx := context.Background()
	doms := f.domains(false)
	doms[0].Dir = &foreignAdder{fakeDir: f.corp.fakeDir}
	doms[1].Dir = &foreignAdder{fakeDir: f.emea.fakeDir}
	r := openRouter(t, doms)
	if err := r.AddMember(ctx, f.cUniversal, f.eUser); err != nil {
		t.Fatal(err)
	}
	if err := r.RemoveMember(ctx, f.cUniversal, f.eUser); err != nil {
		t.Fatal(err)
	}
	if err := r.AddMember(ctx, f.eLocal, f.cUser); err != nil {
		t.Fatal(err)
	}
	if w := []string{"add " + f.eUser.GUID + " to " + f.cUniversal.GUID, "remove " + f.eUser.GUID + " from " + f.cUniversal.GUID}; !slices.Equal(f.corp.writes, w) {
		t.Errorf("CORP's writes %q, want %q", f.corp.writes, w)
	}
	if w := []string{"add " + f.cUser.GUID + " to " + f.eLocal.GUID}; !slices.Equal(f.emea.writes, w) {
		t.Errorf("EMEA's writes %q, want %q", f.emea.writes, w)
	}
	if n, m := f.corp.lookupCount(), f.emea.lookupCount(); n != 0 || m != 0 {
		t.Errorf("looked up %d in CORP, %d in EMEA; a write by DN needs none", n, m)
	}
	// FABRIKAM is of another forest: by SID.
	f.corp.writes = nil
	if err := r.AddMember(ctx, f.cLocal, f.fUser); err != nil || !slices.Equal(f.corp.writes, []string{"add sid " + f.fUser.SID + " to " + f.cLocal.GUID}) {
		t.Errorf("FABRIKAM's User: %v, writes %q, want by SID", err, f.corp.writes)
	}
	// FABRIKAM claims CORP's forest, which CORP's does not name: as two forests.
	f.corp.writes = nil
	doms[2].ForestDomains = []dirgate.DN{dirgate.MustParseDN(corpBase)}
	r = openRouter(t, doms)
	if err := r.AddMember(ctx, f.cLocal, f.fUser); err != nil || !slices.Equal(f.corp.writes, []string{"add sid " + f.fUser.SID + " to " + f.cLocal.GUID}) {
		t.Errorf("FABRIKAM's User, one-sided claim: %v, writes %q, want by SID", err, f.corp.writes)
	}
	// The forest unknown on one side: as two forests.
	f.corp.writes = nil
	doms[1].ForestDomains = nil
	r = openRouter(t, doms)
	if err := r.AddMember(ctx, f.cUniversal, f.eUser); err != nil || !slices.Equal(f.corp.writes, []string{"add sid " + f.eUser.SID + " to " + f.cUniversal.GUID}) {
		t.Errorf("EMEA's User, forest unknown: %v, writes %q, want by SID", err, f.corp.writes)
	}
	f.corp.writes = nil
	if err := r.RemoveMember(ctx, f.cUniversal, f.eUser); !errors.Is(err, dirgate.ErrNotMember) || f.corp.writes != nil {
		t.Errorf("EMEA's User, forest unknown, no FSP: %v, writes %q, want ErrNotMember and none", err, f.corp.writes)
	}
}

// An object's groups include those of the other domain of its forest that hold its
// DN, whatever the object (a contact has no SID), found by asking that domain; a
// domain of another forest is asked through its FSPs, never by DN. A caller's groups
// follow their nesting there.
func TestMemberOfAcrossOneForest(t *testing.T) {
	orders(t, func(t *testing.T, childFirst bool) {
		f := newOneForest()
		r := openRouter(t, f.domains(childFirst))
		ctx := context.Background()
		for _, c := range []struct {
			obj  dirgate.Object
			want []string
		}{
			{f.eUser, want(f.eGlobal, f.cUniversal)},
			{f.eContact, want(f.cUniversal)},
			{f.cUser, want(f.cUniversal, f.eLocal, f.fLocal)},
		} {
			got, err := r.MemberOf(ctx, c.obj)
			if err != nil {
				t.Fatal(err)
			}
			if g := dns(got); !slices.Equal(g, c.want) {
				t.Errorf("%s's groups %q, want %q", c.obj.DN, g, c.want)
			}
		}
		if g, w := f.corp.askedFor(), []string{f.eUser.DN, f.eContact.DN}; !slices.Equal(g, w) {
			t.Errorf("CORP asked for %q, want %q", g, w)
		}
		if g := f.fab.askedFor(); g != nil {
			t.Errorf("FABRIKAM, of another forest, asked by DN for %q", g)
		}
		p, err := (&dirgate.MemberService{Dir: r}).Principal(ctx, ident(t, f.eUser.GUID))
		if err != nil {
			t.Fatal(err)
		}
		var groups []string
		for _, g := range p.Groups {
			groups = append(groups, g.DN)
		}
		if g, w := keysOf(groups), keysOf([]string{f.eGlobal.DN, f.cUniversal.DN, f.cLocal.DN}); !slices.Equal(g, w) {
			t.Errorf("EMEA's User's principal groups %q, want %q", g, w)
		}
	})
}

// Another domain of the forest answers only its own groups: one under the child's
// base DN, one carrying another domain's SID, and one that is no group are left out
// and logged. One that fails is left out and logged; one that cannot say
// (errors.ErrUnsupported) holds none, unlogged. The object's own domain answers.
func TestMemberOfForestPeerChecked(t *testing.T) {
	orders(t, func(t *testing.T, childFirst bool) {
		f := newOneForest()
		var logs bytes.Buffer
		doms := f.domains(childFirst)
		r, err := Config{Domains: doms, Logger: slog.New(slog.NewTextHandler(&logs, nil))}.Open(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		outside := object(dirgate.TypeGroup, "CN=Outside,"+ou+emeaBase, corpSID+"-1300")
		emeaSIDGroup := object(dirgate.TypeGroup, "CN=Impostor1,"+ou+corpBase, emeaSID+"-1301")
		fabSIDGroup := object(dirgate.TypeGroup, "CN=Impostor2,"+ou+corpBase, fabSID+"-1302")
		notGroup := object(dirgate.TypeUser, "CN=Impostor3,"+ou+corpBase, corpSID+"-1303")
		f.corp.forgedGroups = map[string][]dirgate.Object{strings.ToLower(f.eUser.DN): {f.cUniversal, outside, emeaSIDGroup, fabSIDGroup, notGroup}}
		got, err := r.MemberOf(ctx, f.eUser)
		if err != nil {
			t.Fatal(err)
		}
		if g, w := dns(got), want(f.eGlobal, f.cUniversal); !slices.Equal(g, w) {
			t.Errorf("EMEA's User's groups %q, want %q", g, w)
		}
		if !strings.Contains(logs.String(), "domain=corp.example.com") || !strings.Contains(logs.String(), "it answered a group") {
			t.Errorf("log %q, want CORP's refused answers", logs.String())
		}
		// EMEA down: CORP's User keeps its own groups and FABRIKAM's (whose GUID
		// was checked against EMEA before: guidClash).
		if _, err := r.MemberOf(ctx, f.cUser); err != nil {
			t.Fatal(err)
		}
		logs.Reset()
		f.emea.down.Store(true)
		got, err = r.MemberOf(ctx, f.cUser)
		if err != nil {
			t.Fatal(err)
		}
		if g, w := dns(got), want(f.cUniversal, f.fLocal); !slices.Equal(g, w) {
			t.Errorf("EMEA down: CORP's User's groups %q, want %q", g, w)
		}
		if l := logs.String(); !strings.Contains(l, "domain=emea.corp.example.com") || !strings.Contains(l, "left out of its groups") {
			t.Errorf("log %q, want EMEA's failure", l)
		}
		f.emea.down.Store(false)
		// EMEA's directory turns out not to say: no groups of it, nothing logged.
		logs.Reset()
		for i := range doms {
			if doms[i].BaseDN == emeaBase {
				doms[i].Dir = &noFinder{forestFinder: f.emea}
			}
		}
		r, err = Config{Domains: doms, Logger: slog.New(slog.NewTextHandler(&logs, nil))}.Open(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got, err = r.MemberOf(ctx, f.cUser)
		if g, w := dns(got), want(f.cUniversal, f.fLocal); err != nil || !slices.Equal(g, w) {
			t.Errorf("EMEA unable to say: CORP's User's groups %q, %v, want %q", g, err, w)
		}
		if strings.Contains(logs.String(), "left out") {
			t.Errorf("log %q, want nothing for a directory that cannot say", logs.String())
		}
	})
}

// noFinder is a wrapper whose inner directory finds no groups by DN.
type noFinder struct{ *forestFinder }

func (*noFinder) GroupsHolding(context.Context, []dirgate.DN) ([]dirgate.Object, error) {
	return nil, fmt.Errorf("wrapper: %w", errors.ErrUnsupported)
}

// A change of EMEA's User reaches CORP's Universal, which holds her by DN: EMEA's
// feed asks CORP, a domain of its forest, for the groups holding the DNs of the
// objects that changed, and FABRIKAM, of another forest, for FSPs of its
// principals only. A CORP that cannot answer is asked again with the next read;
// what CORP answers that is not its own group is refused; a deleted object is not
// asked about.
func TestChangeSourcesWithinOneForest(t *testing.T) {
	orders(t, func(t *testing.T, childFirst bool) {
		f := newOneForest()
		withDN := func(ch dirgate.Change, dn string) dirgate.Change { ch.DN = dn; return ch }
		deleted := dirgate.Change{Kind: dirgate.ChangeDeleted, GUID: f.eGone.GUID, DN: f.eGone.DN}
		emea := &fakeChanges{batches: []dirgate.ChangeBatch{
			{Changes: []dirgate.Change{withDN(changeOf(f.eUser, f.eGlobal), f.eUser.DN), deleted}},
			{Changes: []dirgate.Change{withDN(changeOf(f.eUser, f.eGlobal), f.eUser.DN)}},
			{},
			{Changes: []dirgate.Change{withDN(changeOf(f.eUser, f.eGlobal), f.eUser.DN)}},
		}}
		fabF := &fakeForeign{dir: f.fab.fakeDir}
		doms := f.domains(childFirst)
		for i := range doms {
			switch doms[i].Dir {
			case f.emea:
				doms[i].Changes = emea
			case f.fab:
				doms[i].Foreign = fabF
			}
		}
		var src dirgate.ChangeSource
		for _, s := range openRouter(t, doms).ChangeSources() {
			src = s.Source
		}

		b := read(t, src)
		if got := invalidated(b); !slices.Contains(got, f.cUniversal.GUID) || !slices.Contains(got, f.eGlobal.GUID) {
			t.Errorf("EMEA's User changed: invalidated %v, want CORP's Universal %s and EMEA's Global", got, f.cUniversal.GUID)
		}
		for _, ch := range b.Changes {
			if ch.Kind == dirgate.ChangeGroup {
				// It would expire every caller's principal: no group's members changed.
				t.Errorf("change %+v of a group that holds a changed object", ch)
			}
		}
		if got := f.corp.askedFor(); !slices.Equal(got, []string{f.eUser.DN}) {
			t.Errorf("CORP asked for %v, want EMEA's User alone (the deleted object is not asked about)", got)
		}
		if want := [][]string{{strings.ToUpper(f.eUser.SID)}}; !slices.EqualFunc(fabF.asked, want, slices.Equal) {
			t.Errorf("FABRIKAM asked %v, want EMEA's User's SID", fabF.asked)
		}

		f.corp.down.Store(true)
		if got := invalidated(read(t, src)); slices.Contains(got, f.cUniversal.GUID) {
			t.Errorf("CORP down: invalidated %v", got)
		}
		f.corp.down.Store(false)
		if got := invalidated(read(t, src)); !slices.Contains(got, f.cUniversal.GUID) {
			t.Errorf("CORP back: invalidated %v, want CORP's Universal from the DN kept", got)
		}

		// A hostile CORP names EMEA's Global and a group of FABRIKAM as its own.
		f.corp.forgedGroups = map[string][]dirgate.Object{strings.ToLower(f.eUser.DN): {f.eGlobal, f.fLocal, f.cLocal}}
		got := invalidated(read(t, src))
		if slices.Contains(got, f.fLocal.GUID) || !slices.Contains(got, f.cLocal.GUID) {
			t.Errorf("forged answer: invalidated %v, want CORP's Local and not FABRIKAM's", got)
		}
	})
}

// A placeholder is resolved by the GUID the group's DC holds for it, not by its DN:
// one whose DN names EMEA's User but whose GUID is another's (the DC's copy of an
// object since deleted, the same DN given to a new one) stays as listed.
func TestMembersPlaceholderByGUID(t *testing.T) {
	f := newOneForest()
	stale := placeholder(f.eUser)
	stale.GUID = "00000000-0000-4000-8000-777777777777"
	g := f.corp.add(object(dirgate.TypeGroup, "CN=Stale,"+ou+corpBase, corpSID+"-1209"), f.corp.add(stale))
	got, err := openRouter(t, f.domains(false)).Members(context.Background(), g, nil)
	if err != nil || len(got) != 1 || got[0].GUID != stale.GUID || got[0].ObjectType != "" || got[0].Unresolved {
		t.Errorf("stale placeholder listed as %+v, %v; want it as CORP holds it", got, err)
	}
}

// Two domains are of one forest only when each names the other's own domain: a
// domain whose base DN lies below a domain CORP names (EVIL under CORP), claiming
// EMEA and CORP, is of another forest for both.
func TestSameForestNamesEachOwnDomain(t *testing.T) {
	f := newOneForest()
	doms := f.domains(false)
	const evilBase = "DC=evil," + corpBase
	evil := &forestFinder{fakeDir: &fakeDir{name: "evil"}}
	doms = append(doms, Domain{BaseDN: evilBase, SID: "S-1-5-21-9-9-9", Dir: evil,
		ForestDomains: []dirgate.DN{dirgate.MustParseDN(corpBase), dirgate.MustParseDN(emeaBase)}})
	r := openRouter(t, doms)
	corp, emea, ev := named(t, r, "corp.example.com"), named(t, r, "emea.corp.example.com"), named(t, r, "evil.corp.example.com")
	if !sameForest(corp, emea) || !sameForest(emea, corp) {
		t.Errorf("CORP and EMEA, each naming the other: not one forest")
	}
	if sameForest(corp, ev) || sameForest(ev, corp) || sameForest(emea, ev) {
		t.Errorf("EVIL, named by neither: taken for a domain of their forest")
	}
}

// More groups in one answer than are kept bring a resync: a DC of the forest
// cannot make a batch carry an unbounded number of changes.
func TestChangeSourcesWithinOneForestTooManyGroups(t *testing.T) {
	f := newOneForest()
	var many []dirgate.Object
	for i := range maxPending + 1 {
		many = append(many, object(dirgate.TypeGroup, fmt.Sprintf("CN=G%d,%s%s", i, ou, corpBase), fmt.Sprintf("%s-%d", corpSID, 5000+i)))
	}
	f.corp.forgedGroups = map[string][]dirgate.Object{strings.ToLower(f.eUser.DN): many}
	ch := changeOf(f.eUser, f.eGlobal)
	ch.DN = f.eUser.DN
	doms := f.domains(false)
	doms[1].Changes = &fakeChanges{batches: []dirgate.ChangeBatch{{Changes: []dirgate.Change{ch}}}}
	var src dirgate.ChangeSource
	for _, s := range openRouter(t, doms).ChangeSources() {
		src = s.Source
	}
	if b := read(t, src); b.Resync != dirgate.ResyncForeignMissed || len(b.Changes) != 0 {
		t.Errorf("%d groups answered: resync %q with %d changes, want %s", len(many), b.Resync, len(b.Changes), dirgate.ResyncForeignMissed)
	}
}
