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
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/fielderr"
)

func ident(t *testing.T, s string) dirgate.Identifier {
	t.Helper()
	id, err := dirgate.ParseIdentifier(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// dns lists objects as "DN (domainName)", sorted, for comparing listings.
func dns(objs []dirgate.Object) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = o.DN + " (" + o.DomainName + ")"
	}
	slices.Sort(out)
	return out
}

func want(objs ...dirgate.Object) []string { return dns(objs) }

func TestLookupRoutes(t *testing.T) {
	f := newForest()
	r := f.router(0)
	ctx := context.Background()
	tests := []struct {
		name     string
		id       string
		want     dirgate.Object
		wantCode string
		// asked are the domains asked, in order of their first question.
		corp, fab int
	}{
		// A DN goes to the domain whose base DN holds it, and only there.
		{name: "DN of the other domain", id: f.fUser.DN, want: f.fUser, fab: 1},
		{name: "DN of the home domain", id: f.cUser.DN, want: f.cUser, corp: 1},
		// A SID goes to the domain of its domain part.
		{name: "SID of the other domain", id: f.fGlobal.SID, want: f.fGlobal, fab: 1},
		{name: "SID of the home domain", id: f.cGlobal.SID, want: f.cGlobal, corp: 1},
		// A SID of a domain not configured is the home domain's, as it would be
		// alone: here the FSP CORP holds for it does not exist.
		{name: "SID of an unknown domain", id: "S-1-5-21-7-8-9-1104", wantCode: dirgate.ENOTFOUND, corp: 1},
		// A GUID is asked of every domain, once, whoever holds it.
		{name: "GUID of the home domain", id: f.cLocal.GUID, want: f.cLocal, corp: 1, fab: 1},
		{name: "GUID of the other domain", id: f.fLocal.GUID, want: f.fLocal, corp: 1, fab: 1},
		{name: "GUID of no domain", id: "00000000-0000-4000-8000-999999999999", wantCode: dirgate.ENOTFOUND, corp: 1, fab: 1},
		// A DN the plain check cannot decide (an escaped comma, other letter case)
		// is parsed, and routed alike.
		{name: "DN of the other domain, escaped", id: `CN=Doe\, Jane,` + ou + "dc=FABRIKAM,dc=example,dc=net", wantCode: dirgate.ENOTFOUND, fab: 1},
		// A DN under no configured base DN: the home domain answers not found, as
		// it does alone.
		{name: "DN of no domain", id: "CN=User,DC=other,DC=example", wantCode: dirgate.ENOTFOUND, corp: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c0, f0 := f.corp.lookupCount(), f.fab.lookupCount()
			got, err := r.Lookup(ctx, ident(t, tt.id), nil)
			if code := dirgate.ErrorCode(err); code != tt.wantCode {
				t.Fatalf("error %v (code %q), want code %q", err, code, tt.wantCode)
			}
			if tt.wantCode == "" && (got.GUID != tt.want.GUID || got.DomainName != tt.want.DomainName) {
				t.Errorf("got %s (%s), want %s (%s)", got.DN, got.DomainName, tt.want.DN, tt.want.DomainName)
			}
			if c, fb := f.corp.lookupCount()-c0, f.fab.lookupCount()-f0; c != tt.corp || fb != tt.fab {
				t.Errorf("asked CORP %d and FABRIKAM %d times, want %d and %d", c, fb, tt.corp, tt.fab)
			}
		})
	}
}

// TestLookupGUIDOtherDomainDown: with FABRIKAM down, a GUID of CORP's is served
// (home stays available whatever happens to another domain), one of FABRIKAM's or
// one nobody holds answers FABRIKAM's unavailability; every domain is asked once.
func TestLookupGUIDOtherDomainDown(t *testing.T) {
	f := newForest()
	r := f.router(0)
	f.fab.down.Store(true)
	for _, c := range []struct {
		guid  string
		found bool
	}{{f.cUser.GUID, true}, {f.fUser.GUID, false}, {"00000000-0000-4000-8000-999999999999", false}} {
		c0, f0 := f.corp.lookupCount(), f.fab.lookupCount()
		got, err := r.Lookup(context.Background(), ident(t, c.guid), nil)
		switch {
		case c.found && (err != nil || got.GUID != c.guid):
			t.Errorf("%s: %v, %v; want CORP's object", c.guid, got.DN, err)
		case !c.found && (dirgate.ErrorCode(err) != dirgate.EUNAVAILABLE || !errors.Is(err, errDown)):
			t.Errorf("%s: error %v, want FABRIKAM's unavailability", c.guid, err)
		}
		if cc, fb := f.corp.lookupCount()-c0, f.fab.lookupCount()-f0; cc != 1 || fb != 1 {
			t.Errorf("%s: asked CORP %d and FABRIKAM %d times, want once each", c.guid, cc, fb)
		}
	}
}

// A GUID two domains answer is the home domain's object.
func TestLookupGUIDHomeWins(t *testing.T) {
	f := newForest()
	twin := f.cUser
	twin.DN, twin.SID = "CN=Twin,"+ou+fabBase, fabSID+"-1400"
	f.fab.add(twin)
	got, err := f.router(0).Lookup(context.Background(), ident(t, f.cUser.GUID), nil)
	if err != nil || got.DN != f.cUser.DN {
		t.Fatalf("got %s, %v; want CORP's %s", got.DN, err, f.cUser.DN)
	}
}

func TestMembersReplacesForeignPrincipals(t *testing.T) {
	f := newForest()
	r := f.router(0)
	// Members of one domain only: no other domain is asked.
	if _, err := r.Members(context.Background(), f.cGlobal, nil); err != nil || f.fab.lookupCount() != 0 || f.corp.lookupCount() != 0 {
		t.Fatalf("CORP's Global: %v; look-ups CORP %d, FABRIKAM %d, want none", err, f.corp.lookupCount(), f.fab.lookupCount())
	}
	props := []string{"samaccountname"}
	got, err := r.Members(context.Background(), f.cLocal, props)
	if err != nil {
		t.Fatal(err)
	}
	if g, w := dns(got), want(f.cUniversal, f.fUser); !slices.Equal(g, w) {
		t.Fatalf("members %q, want %q", g, w)
	}
	for _, o := range got {
		if o.GUID == f.fUser.GUID {
			if o.DomainName != "fabrikam.example.net" || o.ObjectType != dirgate.TypeUser {
				t.Errorf("FABRIKAM's user listed as %s %s", o.ObjectType, o.DomainName)
			}
			if v := o.Properties["samaccountname"]; !slices.Equal(v, []string{"User"}) {
				t.Errorf("sAMAccountName %q, want FABRIKAM's object read with the requested properties", v)
			}
		}
	}
	// FABRIKAM's own listing names CORP's Global group in its place.
	got, err = r.Members(context.Background(), f.fLocal, nil)
	if err != nil {
		t.Fatal(err)
	}
	if g, w := dns(got), want(f.fUniversal, f.cGlobal); !slices.Equal(g, w) {
		t.Fatalf("members %q, want %q", g, w)
	}
}

// An FSP that no configured domain resolves is listed as the directory holds it:
// one of a domain not configured, one of a configured domain that has no such
// object, and a well-known SID.
func TestMembersKeepsUnresolvedForeignPrincipals(t *testing.T) {
	f := newForest()
	unknownDomain := f.corp.add(fsp(corpBase, "S-1-5-21-7-8-9-1104"))
	noObject := f.corp.add(fsp(corpBase, fabSID+"-9999"))
	wellKnown := f.corp.add(fsp(corpBase, "S-1-5-11"))
	g := f.corp.add(object(dirgate.TypeGroup, "CN=Mixed,"+ou+corpBase, corpSID+"-1200"), unknownDomain, noObject, wellKnown, f.cFSP)
	got, err := f.router(0).Members(context.Background(), g, nil)
	if err != nil {
		t.Fatal(err)
	}
	if g, w := dns(got), want(unknownDomain, noObject, wellKnown, f.fUser); !slices.Equal(g, w) {
		t.Fatalf("members %q, want %q", g, w)
	}
	for _, o := range got {
		if o.Unresolved {
			t.Errorf("%s marked unresolved: no domain failed, the listing is as it will stay", o.DN)
		}
	}
	if n := f.fab.lookupCount(); n != 2 {
		t.Errorf("FABRIKAM asked %d times, want 2 (its two FSPs; never the others)", n)
	}
}

// A domain that is down leaves its FSPs as they are, and is asked once per
// listing, not once per member.
func TestMembersOtherDomainDown(t *testing.T) {
	f := newForest()
	var members []dirgate.Object
	for i := range 20 {
		u := f.fab.add(object(dirgate.TypeUser, fmt.Sprintf("CN=U%d,%s%s", i, ou, fabBase), fmt.Sprintf("%s-%d", fabSID, 2000+i)))
		members = append(members, f.corp.add(fsp(corpBase, u.SID)))
	}
	g := f.corp.add(object(dirgate.TypeGroup, "CN=Many,"+ou+corpBase, corpSID+"-1201"), members...)
	f.fab.down.Store(true)
	var logs bytes.Buffer
	r := f.router(1)
	r.log = slog.New(slog.NewTextHandler(&logs, nil))
	got, err := r.Members(context.Background(), g, nil)
	if err != nil {
		t.Fatal(err)
	}
	if l := logs.String(); strings.Count(l, "level=WARN") != 1 || !strings.Contains(l, "domain=fabrikam.example.net") ||
		!strings.Contains(l, "all domain controllers are down") {
		t.Errorf("log %q, want one warning naming FABRIKAM and its failure", l)
	}
	if g, w := dns(got), want(members...); !slices.Equal(g, w) {
		t.Fatalf("members %q, want the FSPs %q", g, w)
	}
	for _, o := range got {
		if !o.Unresolved {
			t.Errorf("%s not marked unresolved while FABRIKAM is down: a cache would keep the listing", o.DN)
		}
	}
	if n := f.fab.lookupCount(); n != 1 {
		t.Errorf("FABRIKAM asked %d times while down, want 1", n)
	}
	// Concurrently, at most the look-ups in flight when the first failed.
	f.fab.lookups = nil
	f.fab.delay = 5 * time.Millisecond
	if _, err := f.router(4).Members(context.Background(), g, nil); err != nil {
		t.Fatal(err)
	}
	if n := f.fab.lookupCount(); n > 4 {
		t.Errorf("FABRIKAM asked %d times while down with 4 look-ups at once, want at most 4", n)
	}
	// Back up: every FSP is replaced.
	f.fab.down.Store(false)
	got, err = f.router(4).Members(context.Background(), g, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range got {
		if o.ObjectType != dirgate.TypeUser || o.DomainName != "fabrikam.example.net" || o.Unresolved {
			t.Fatalf("%s listed as %s %s (unresolved %v) once FABRIKAM answers", o.DN, o.ObjectType, o.DomainName, o.Unresolved)
		}
	}
}

// manyForeign adds to CORP a group of n FSPs, each standing for a FABRIKAM user.
func manyForeign(f *forest, name string, rid, n int) dirgate.Object {
	var members []dirgate.Object
	for i := range n {
		u := f.fab.add(object(dirgate.TypeUser, fmt.Sprintf("CN=%s%d,%s%s", name, i, ou, fabBase), fmt.Sprintf("%s-%d", fabSID, rid*100+i)))
		members = append(members, f.corp.add(fsp(corpBase, u.SID)))
	}
	return f.corp.add(object(dirgate.TypeGroup, "CN="+name+","+ou+corpBase, fmt.Sprintf("%s-%d", corpSID, rid)), members...)
}

// The foreign members of a listing are looked up concurrently, never more at once
// than the bound. FABRIKAM holds every look-up until the bound is reached, so the
// count, not the time taken, shows both.
func TestMembersResolvesConcurrentlyBounded(t *testing.T) {
	f := newForest()
	g := manyForeign(f, "Many", 30, 40)
	f.fab.block = make(chan struct{})
	r := f.router(8)
	done := make(chan error, 1)
	var got []dirgate.Object
	go func() {
		var err error
		got, err = r.Members(context.Background(), g, nil)
		done <- err
	}()
	reached := f.fab.waitInFlight(8)
	close(f.fab.block)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !reached {
		t.Errorf("never 8 look-ups in flight at once (at most %d): not concurrent", f.fab.maxIn.Load())
	}
	if m := f.fab.maxIn.Load(); m > 8 {
		t.Errorf("%d look-ups in flight at most, want at most 8", m)
	}
	if len(got) != 40 || got[0].ObjectType != dirgate.TypeUser {
		t.Fatalf("%d members, first %s", len(got), got[0].ObjectType)
	}
}

// The bound holds over every listing the router serves at once (a nested listing
// reads several groups at once), not per listing.
func TestMembersConcurrencyBoundSharedByListings(t *testing.T) {
	f := newForest()
	g1, g2 := manyForeign(f, "ManyA", 31, 10), manyForeign(f, "ManyB", 32, 10)
	f.fab.block = make(chan struct{})
	r := f.router(3)
	done := make(chan error, 2)
	for _, g := range []dirgate.Object{g1, g2} {
		go func() {
			_, err := r.Members(context.Background(), g, nil)
			done <- err
		}()
	}
	if !f.fab.waitInFlight(3) {
		t.Fatalf("never 3 look-ups in flight at once (at most %d)", f.fab.maxIn.Load())
	}
	// Time for the second listing to start its own look-ups, had it a bound of its
	// own (the wait can only hide a failure, never cause one).
	time.Sleep(50 * time.Millisecond)
	close(f.fab.block)
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if m := f.fab.maxIn.Load(); m > 3 {
		t.Errorf("%d look-ups in flight at once over two listings, want at most 3", m)
	}
}

// A member held by its DN under the base DN of a domain of another forest is listed
// as the group's domain holds it: only within one forest does AD hold a member of
// another domain by its DN (TestMembersReplacesPlaceholdersOfTheForest), and a DC
// that lists one otherwise cannot make the router show that domain's objects.
func TestMembersKeepsDNMembersOfAnotherForest(t *testing.T) {
	f := newForest()
	phantom := f.fUser2
	phantom.ObjectType, phantom.DisplayName = dirgate.TypeContainer, "as CORP shows it"
	phantom.GUID = "00000000-0000-4000-8000-888888888888"
	f.corp.add(phantom)
	// A DN that only the parser can place (an escaped comma).
	jane := f.fab.add(object(dirgate.TypeUser, `CN=Doe\, Jane,`+ou+fabBase, fabSID+"-1300"))
	janeThere := jane
	janeThere.ObjectType, janeThere.GUID = dirgate.TypeContainer, "00000000-0000-4000-8000-888888888889"
	f.corp.add(janeThere)
	g := f.corp.add(object(dirgate.TypeGroup, "CN=ByDN,"+ou+corpBase, corpSID+"-1203"), phantom, janeThere, f.cUser)
	got, err := f.router(0).Members(context.Background(), g, nil)
	if err != nil {
		t.Fatal(err)
	}
	if g, w := dns(got), want(f.fUser2, jane, f.cUser); !slices.Equal(g, w) {
		t.Fatalf("members %q, want %q", g, w)
	}
	for _, o := range got {
		if o.DN != f.cUser.DN && (o.ObjectType != dirgate.TypeContainer || o.Unresolved) {
			t.Errorf("FABRIKAM's DN listed as %+v, want as CORP holds it", o)
		}
	}
	if n := f.fab.lookupCount(); n != 0 {
		t.Errorf("FABRIKAM asked %d times", n)
	}
}

// Two FSPs (or an FSP and a DN) that stand for one object list it once.
func TestMembersDedupesReplacements(t *testing.T) {
	f := newForest()
	twin := fsp(corpBase, f.fUser.SID)
	twin.DN = "CN=" + f.fUser.SID + "\\0ACNF:dup,CN=ForeignSecurityPrincipals," + corpBase
	f.corp.add(twin)
	g := f.corp.add(object(dirgate.TypeGroup, "CN=Twice,"+ou+corpBase, corpSID+"-1204"), f.cFSP, twin)
	got, err := f.router(0).Members(context.Background(), g, nil)
	if err != nil {
		t.Fatal(err)
	}
	if g, w := dns(got), want(f.fUser); !slices.Equal(g, w) {
		t.Fatalf("members %q, want %q", g, w)
	}
}

// addCycle makes CORP's Global hold FABRIKAM's Local through an FSP: FABRIKAM's
// Local holds CORP's Global the same way, so the two form a cycle across domains.
func addCycle(f *forest) {
	back := f.corp.add(fsp(corpBase, f.fLocal.SID))
	f.corp.members[f.cGlobal.GUID] = append(f.corp.members[f.cGlobal.GUID], back.GUID)
}

// Nested listings through the router follow nesting across domains, each object
// once, never the listed group, a cycle across domains ending: through the member
// service's breadth-first expansion and through the transitive listing alike.
func TestNestedAcrossDomainsWithCycle(t *testing.T) {
	f := newForest()
	addCycle(f)
	r := f.router(0)
	opts := dirgate.ListOptions{IncludeIndirect: true, Properties: []string{"samaccountname"}}
	tests := []struct {
		name  string
		group dirgate.Object
		want  []string
	}{
		// FABRIKAM's Local: its own nesting, then CORP's Global and its users, and
		// back to FABRIKAM's Local (the listed group: not listed).
		{"FABRIKAM's Local", f.fLocal, want(f.fUniversal, f.fGlobal, f.fUser, f.fUser2, f.cGlobal, f.cUser, f.cUser2)},
		// CORP's Local: FABRIKAM's User through its FSP, and through the cycle
		// (Global holds FABRIKAM's Local) everything FABRIKAM's Local holds.
		{"CORP's Local", f.cLocal, want(f.cUniversal, f.cGlobal, f.cUser, f.cUser2, f.fUser, f.fLocal, f.fUniversal, f.fGlobal, f.fUser2)},
	}
	for _, tt := range tests {
		t.Run(tt.name+" expanded", func(t *testing.T) {
			got, err := dirgate.Expand(context.Background(), dirgate.Expansion{Dir: r}, tt.group, opts)
			if err != nil {
				t.Fatal(err)
			}
			if g := dns(got); !slices.Equal(g, tt.want) {
				t.Fatalf("listing %q\nwant %q", g, tt.want)
			}
			for _, o := range got {
				if o.DomainName != dirgate.MustParseDN(o.DN).DomainName() || o.Properties["samaccountname"] == nil {
					t.Errorf("%s: domainName %q, properties %v", o.DN, o.DomainName, o.Properties)
				}
			}
		})
		t.Run(tt.name+" transitive", func(t *testing.T) {
			got, err := r.TransitiveMembers(context.Background(), tt.group, opts.Properties)
			if err != nil {
				t.Fatal(err)
			}
			if g := dns(got); !slices.Equal(g, tt.want) {
				t.Fatalf("listing %q\nwant %q", g, tt.want)
			}
		})
	}
}

// A nested listing while the other domain is down lists its FSP and goes no
// further there.
func TestNestedOtherDomainDown(t *testing.T) {
	f := newForest()
	f.fab.down.Store(true)
	got, err := dirgate.Expand(context.Background(), dirgate.Expansion{Dir: f.router(0)}, f.cLocal, dirgate.ListOptions{IncludeIndirect: true})
	if err != nil {
		t.Fatal(err)
	}
	if g, w := dns(got), want(f.cUniversal, f.cGlobal, f.cUser, f.cUser2, f.cFSP); !slices.Equal(g, w) {
		t.Fatalf("listing %q\nwant %q", g, w)
	}
}

func TestMembersContextEnded(t *testing.T) {
	f := newForest()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f.corp.down.Store(false)
	// CORP's fake does not look at the context for Members; FABRIKAM's look-up does.
	if _, err := f.router(0).Members(ctx, f.cLocal, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want the context's", err)
	}
}

func TestWritesRouteToTheGroupsDomain(t *testing.T) {
	f := newForest()
	r := f.router(0)
	ctx := context.Background()
	if err := r.RemoveMember(ctx, f.fGlobal, f.fUser); err != nil {
		t.Fatal(err)
	}
	if err := r.AddMember(ctx, f.cGlobal, f.cUser); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f.fab.writes, []string{"remove " + f.fUser.GUID + " from " + f.fGlobal.GUID}) ||
		!slices.Equal(f.corp.writes, []string{"add " + f.cUser.GUID + " to " + f.cGlobal.GUID}) {
		t.Fatalf("writes: CORP %q, FABRIKAM %q", f.corp.writes, f.fab.writes)
	}
	// A member of another domain that the group's domain holds an FSP for: the
	// change is the FSP's, in the group's domain (FABRIKAM's User, listed in
	// CORP's Local in place of its FSP, removed by its own GUID or DN).
	f.corp.writes, f.fab.writes = nil, nil
	if err := r.RemoveMember(ctx, f.cLocal, f.fUser); err != nil {
		t.Fatal(err)
	}
	if err := r.AddMember(ctx, f.cGlobal, f.fUser); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f.corp.writes, []string{"remove " + f.cFSP.GUID + " from " + f.cLocal.GUID, "add " + f.cFSP.GUID + " to " + f.cGlobal.GUID}) || f.fab.writes != nil {
		t.Fatalf("writes: CORP %q, FABRIKAM %q, want CORP's FSP's", f.corp.writes, f.fab.writes)
	}
	// None held: neither domain written to. The removal answers as for any
	// non-member, and, where the group's directory cannot add a member by SID
	// (these fakes), the addition as any addition the directory refuses: neither
	// says that CORP holds no FSP for the member, which would tell whether the
	// member is in any group of CORP.
	f.corp.writes = nil
	if err := r.RemoveMember(ctx, f.cLocal, f.fUser2); !errors.Is(err, dirgate.ErrNotMember) || dirgate.ErrorCode(err) != dirgate.ErrorCode(fmt.Errorf("x: %w", dirgate.ErrNotMember)) {
		t.Errorf("removal with no FSP: %v, want ErrNotMember as for any non-member", err)
	}
	err := r.AddMember(ctx, f.cLocal, f.fUser2)
	if dirgate.ErrorCode(err) != dirgate.EINVALID || dirgate.ErrorMessage(err) != "The directory refused to add this member to this group." {
		t.Errorf("addition with no FSP: %v (message %q), want the directory's refusal of an addition", err, dirgate.ErrorMessage(err))
	}
	if f.corp.writes != nil || f.fab.writes != nil {
		t.Errorf("writes across domains reached a domain: CORP %q, FABRIKAM %q", f.corp.writes, f.fab.writes)
	}
	// The FSP itself is CORP's: removing it is CORP's change.
	if err := r.RemoveMember(ctx, f.cLocal, f.cFSP); err != nil || !slices.Equal(f.corp.writes, []string{"remove " + f.cFSP.GUID + " from " + f.cLocal.GUID}) {
		t.Errorf("removing CORP's FSP: %v, writes %q", err, f.corp.writes)
	}
	// The group's domain down: its failure, nothing written.
	f.corp.writes = nil
	f.corp.down.Store(true)
	if err := r.RemoveMember(ctx, f.cLocal, f.fUser); dirgate.ErrorCode(err) != dirgate.EUNAVAILABLE || f.corp.writes != nil {
		t.Errorf("CORP down: %v, writes %q", err, f.corp.writes)
	}
}

// TestAdditionAcrossDomainsBySID: where the group's directory adds members by SID,
// a member of another configured domain is added by its SID in the group's domain,
// whether or not that domain holds an FSP for it: the same single call, no look-up
// of the FSP, nothing sent to the member's domain. The directory's answers (a
// refusal of the group's scope, already a member) come back as they are; a member
// whose SID is not of its own domain is refused without a write; removals still go
// through the FSP.
func TestAdditionAcrossDomainsBySID(t *testing.T) {
	f := newForest()
	corp := &foreignAdder{fakeDir: f.corp}
	r := f.routerWith(corp, f.fab)
	ctx := context.Background()
	// FABRIKAM's User has an FSP in CORP, User2 none: the same call for both.
	for _, m := range []dirgate.Object{f.fUser, f.fUser2} {
		if err := r.AddMember(ctx, f.cLocal, m); err != nil {
			t.Fatalf("add %s: %v", m.DN, err)
		}
	}
	want := []string{"add sid " + f.fUser.SID + " to " + f.cLocal.GUID, "add sid " + f.fUser2.SID + " to " + f.cLocal.GUID}
	if !slices.Equal(f.corp.writes, want) || f.fab.writes != nil {
		t.Fatalf("writes: CORP %q, FABRIKAM %q\nwant CORP %q", f.corp.writes, f.fab.writes, want)
	}
	if n := f.corp.lookupCount(); n != 0 {
		t.Errorf("CORP looked up %d objects (%q); an addition by SID needs no FSP's look-up", n, f.corp.lookups)
	}
	// Same-domain additions are the directory's ordinary ones.
	f.corp.writes = nil
	if err := r.AddMember(ctx, f.cLocal, f.cUser); err != nil || !slices.Equal(f.corp.writes, []string{"add " + f.cUser.GUID + " to " + f.cLocal.GUID}) {
		t.Errorf("CORP's User to CORP's Local: %v, writes %q", err, f.corp.writes)
	}
	// The directory's answers pass through: its refusal of a global group, and
	// "already a member".
	f.corp.writes = nil
	for _, answer := range []error{
		dirgate.WrapError(dirgate.EINVALID, dirgate.RefusedAddition, errors.New("fake: not a domain-local group")),
		fmt.Errorf("fake: %w", dirgate.ErrAlreadyMember),
	} {
		corp.err = answer
		err := r.AddMember(ctx, f.cGlobal, f.fUser2)
		if dirgate.ErrorCode(err) != dirgate.ErrorCode(answer) || dirgate.ErrorMessage(err) != dirgate.ErrorMessage(answer) ||
			errors.Is(answer, dirgate.ErrAlreadyMember) != errors.Is(err, dirgate.ErrAlreadyMember) {
			t.Errorf("the directory answered %v; the router %v", answer, err)
		}
	}
	corp.err = nil
	// A member of FABRIKAM that carries a SID of another domain (or none): refused
	// as any refused addition, nothing written.
	for _, sid := range []string{corpSID + "-1104", "S-1-5-11", ""} {
		forged := f.fUser2
		forged.SID = sid
		err := r.AddMember(ctx, f.cLocal, forged)
		if dirgate.ErrorCode(err) != dirgate.EINVALID || dirgate.ErrorMessage(err) != dirgate.RefusedAddition {
			t.Errorf("member of FABRIKAM with SID %q: %v, want the refusal of an addition", sid, err)
		}
	}
	if f.corp.writes != nil || f.fab.writes != nil {
		t.Errorf("writes for members without a SID of their domain: CORP %q, FABRIKAM %q", f.corp.writes, f.fab.writes)
	}
	// Removals go through the FSP, as before; with none, no member.
	if err := r.RemoveMember(ctx, f.cLocal, f.fUser); err != nil || !slices.Equal(f.corp.writes, []string{"remove " + f.cFSP.GUID + " from " + f.cLocal.GUID}) {
		t.Errorf("removing FABRIKAM's User: %v, writes %q", err, f.corp.writes)
	}
	if err := r.RemoveMember(ctx, f.cLocal, f.fUser2); !errors.Is(err, dirgate.ErrNotMember) {
		t.Errorf("removing FABRIKAM's User2, which CORP holds no FSP for: %v, want ErrNotMember", err)
	}
}

// TestAdditionAcrossDomainsUnsupported: a group's directory that turns out not to
// add members by SID (a wrapper whose inner directory cannot: errors.ErrUnsupported)
// is served through the FSP it holds, as one that has no such method.
func TestAdditionAcrossDomainsUnsupported(t *testing.T) {
	f := newForest()
	r := f.routerWith(&foreignAdder{fakeDir: f.corp, err: fmt.Errorf("wrapper: %w", errors.ErrUnsupported)}, f.fab)
	ctx := context.Background()
	if err := r.AddMember(ctx, f.cLocal, f.fUser); err != nil || !slices.Equal(f.corp.writes, []string{"add " + f.cFSP.GUID + " to " + f.cLocal.GUID}) {
		t.Errorf("FABRIKAM's User: %v, writes %q, want through CORP's FSP", err, f.corp.writes)
	}
	if err := r.AddMember(ctx, f.cLocal, f.fUser2); dirgate.ErrorMessage(err) != dirgate.RefusedAddition {
		t.Errorf("FABRIKAM's User2, no FSP in CORP: %v, want the refusal of an addition", err)
	}
}

// A principal's groups are its own domain's and, through the FSPs other domains hold
// for it, theirs: FABRIKAM's User is in CORP's Local through CORP's FSP; CORP's
// Global in FABRIKAM's Local, so CORP's User is there through its group. Found with
// and without the domains' foreign sources.
func TestMemberOfAcrossDomains(t *testing.T) {
	for _, sources := range []bool{false, true} {
		f := newForest()
		r := f.router(0)
		if sources {
			r = f.routerWith(f.corp, f.fab)
			r.domains[0].Foreign, r.domains[1].Foreign = &fakeForeign{dir: f.corp}, &fakeForeign{dir: f.fab}
		}
		got, err := r.MemberOf(context.Background(), f.fUser)
		if err != nil {
			t.Fatal(err)
		}
		if g, w := dns(got), want(f.fGlobal, f.cLocal); !slices.Equal(g, w) {
			t.Errorf("sources %v: FABRIKAM's User's groups %q, want %q", sources, g, w)
		}
		svc := &dirgate.MemberService{Dir: r}
		p, err := svc.Principal(context.Background(), ident(t, f.cUser.GUID))
		if err != nil {
			t.Fatal(err)
		}
		var dns []string
		for _, g := range p.Groups {
			dns = append(dns, g.DN)
		}
		if w := []string{f.cGlobal.DN, f.cUniversal.DN, f.cLocal.DN, f.fLocal.DN}; !slices.Equal(keysOf(dns), keysOf(w)) {
			t.Errorf("sources %v: CORP's User's principal groups %q, want %q", sources, dns, w)
		}
	}
}

func keysOf(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// Another domain that fails leaves its groups out, logged; the principal's own
// domain's failure is the answer. A group of a domain other than home whose GUID
// cannot be checked against home (down) is left out, unless it was checked
// before. Objects that are no principal of their domain (an FSP, no SID) are not
// looked for elsewhere.
func TestMemberOfOtherDomainDown(t *testing.T) {
	f := newForest()
	f.corp.down.Store(true)
	var logs bytes.Buffer
	r := f.router(0)
	r.log = slog.New(slog.NewTextHandler(&logs, nil))
	got, err := r.MemberOf(context.Background(), f.fUser)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Errorf("CORP down, never checked: groups %q, want none (FABRIKAM's Global's GUID unchecked)", dns(got))
	}
	if l := logs.String(); !strings.Contains(l, "domain=corp.example.com") || !strings.Contains(l, "left out of its groups") {
		t.Errorf("log %q, want the failure of CORP", l)
	}
	f.corp.down.Store(false)
	if got, err := r.MemberOf(context.Background(), f.fUser); err != nil || !slices.Equal(dns(got), want(f.fGlobal, f.cLocal)) {
		t.Fatalf("CORP up: groups %q, %v", dns(got), err)
	}
	f.corp.down.Store(true)
	got, err = r.MemberOf(context.Background(), f.fUser)
	if err != nil {
		t.Fatal(err)
	}
	if g, w := dns(got), want(f.fGlobal); !slices.Equal(g, w) {
		t.Errorf("CORP down, checked before: groups %q, want FABRIKAM's alone %q", g, w)
	}
	if _, err := r.MemberOf(context.Background(), f.cUser); dirgate.ErrorCode(err) != dirgate.EUNAVAILABLE {
		t.Errorf("CORP's User with CORP down: %v, want its failure", err)
	}
	f.corp.down.Store(false)
	f.corp.lookups, f.fab.lookups = nil, nil
	if _, err := r.MemberOf(context.Background(), f.cFSP); err != nil || f.fab.lookupCount() != 0 {
		t.Errorf("CORP's FSP: %v, FABRIKAM asked %d times, want none", err, f.fab.lookupCount())
	}
}

// A hostile DC of another domain cannot add groups to a principal: an answer that
// is not its FSP for the SID, or a group outside its base DN, is refused.
func TestMemberOfRefusesForeignAnswers(t *testing.T) {
	f := newForest()
	user := f.cUser
	user.SID = f.fUser.SID // CORP's User, passed off as the FSP of FABRIKAM's
	f.corp.forged = map[string]dirgate.Object{f.fUser.SID: user}
	r := f.router(0)
	r.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	got, err := r.MemberOf(context.Background(), f.fUser)
	if err != nil {
		t.Fatal(err)
	}
	if g, w := dns(got), want(f.fGlobal); !slices.Equal(g, w) {
		t.Errorf("groups %q, want FABRIKAM's alone %q: CORP answered the SID with a user", g, w)
	}
}

type schemaMap struct{ m map[string]bool }

func (s *schemaMap) NamedOnlyProperties() map[string]bool { return s.m }

// A trusted forest's schema may withhold attributes the home schema does not
// know (a LAPS extension installed there only): the router withholds both.
func TestSchemaUnion(t *testing.T) {
	home := &schemaMap{m: map[string]bool{"unixuserpassword": true}}
	other := &schemaMap{m: map[string]bool{"ms-mcs-admpwd": true}}
	f := newForest()
	r, err := Config{Domains: []Domain{
		{BaseDN: corpBase, SID: corpSID, Dir: f.corp, Schema: home},
		{BaseDN: fabBase, SID: fabSID, Dir: f.fab, Schema: other},
	}}.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := r.NamedOnlyProperties()
	if !got["unixuserpassword"] || !got["ms-mcs-admpwd"] || len(got) != 2 {
		t.Fatalf("union %v", got)
	}
	if again := r.NamedOnlyProperties(); mapPointer(again) != mapPointer(got) {
		t.Error("the union was made again although no schema changed")
	}
	other.m = map[string]bool{"ms-mcs-admpwd": true, "ms-laps-password": true}
	if got := r.NamedOnlyProperties(); !got["ms-laps-password"] || !got["unixuserpassword"] {
		t.Fatalf("after FABRIKAM's schema was read again: %v", got)
	}
}

func TestConfigValidate(t *testing.T) {
	d := &fakeDir{}
	tests := []struct {
		name    string
		domains []Domain
		want    []string // substrings, one per error
	}{
		{"fine", []Domain{{BaseDN: corpBase, SID: corpSID, Dir: d}, {BaseDN: fabBase, SID: fabSID, Dir: d}}, nil},
		{"none", nil, []string{"Domains: must name at least the home domain"}},
		{"same base DN", []Domain{{BaseDN: corpBase, SID: corpSID, Dir: d}, {BaseDN: "dc=CORP,dc=example,dc=com", SID: fabSID, Dir: d}},
			[]string{"Domains[1]: base DN dc=CORP,dc=example,dc=com is the base DN of Domains[0]"}},
		// A child domain beside its parent, in either order.
		{"base DN below another", []Domain{{BaseDN: corpBase, SID: corpSID, Dir: d}, {BaseDN: "DC=child," + corpBase, SID: fabSID, Dir: d}}, nil},
		{"base DN above another", []Domain{{BaseDN: "DC=child," + corpBase, SID: corpSID, Dir: d}, {BaseDN: corpBase, SID: fabSID, Dir: d}}, nil},
		{"same base DN below another", []Domain{{BaseDN: corpBase, SID: corpSID, Dir: d}, {BaseDN: "DC=child," + corpBase, SID: fabSID, Dir: d},
			{BaseDN: "dc=Child," + corpBase, SID: "S-1-5-21-7-8-9", Dir: d}},
			[]string{"Domains[2]: base DN dc=Child,DC=corp,DC=example,DC=com is the base DN of Domains[1]"}},
		{"same domain twice", []Domain{{BaseDN: "OU=a," + corpBase, SID: corpSID, Dir: d}, {BaseDN: "OU=b," + corpBase, SID: strings.ToLower(corpSID), Dir: d}},
			[]string{"Domains[1]: is the same domain as Domains[0]"}},
		{"no SID, no directory, no DN", []Domain{{BaseDN: corpBase, SID: corpSID, Dir: d}, {BaseDN: "", SID: "S-1-5-32-544"}},
			[]string{"Domains[1]: has no directory", "Domains[1]: base DN \"\" is not a DN", "Domains[1]: SID \"S-1-5-32-544\" is not a domain SID"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := fielderr.List(Config{Domains: tt.domains}.Validate())
			if len(errs) != len(tt.want) {
				t.Fatalf("errors %q, want %d", errs, len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.Contains(errs[i].Error(), w) {
					t.Errorf("error %d: %q, want it to contain %q", i, errs[i], w)
				}
			}
		})
	}
}

// Another domain's answers are accepted only as its own objects: a DN under its
// base DN, the SID or GUID asked. A forged answer (a home DN, a home GUID) would
// otherwise take a real member's place in a listing, or route a change to home.
func TestOtherDomainsForgedAnswersRefused(t *testing.T) {
	f := newForest()
	var logs bytes.Buffer
	r, err := Config{Domains: []Domain{
		{BaseDN: corpBase, SID: corpSID, Dir: f.corp},
		{BaseDN: fabBase, SID: fabSID, Dir: f.fab},
	}, Logger: slog.New(slog.NewTextHandler(&logs, nil))}.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// FABRIKAM answers its User's SID with CORP's User (a home DN and GUID), and
	// its User2's SID with an object under its base DN carrying CORP's User2's
	// GUID.
	clash := f.cUser2
	clash.DN, clash.SID = "CN=Clash,"+ou+fabBase, f.fUser2.SID
	f.fab.forged = map[string]dirgate.Object{f.fUser.SID: f.cUser, f.fUser2.SID: clash}
	fsp2 := f.corp.add(fsp(corpBase, f.fUser2.SID))
	g := f.corp.add(object(dirgate.TypeGroup, "CN=Forged,"+ou+corpBase, corpSID+"-1205"), f.cUser, f.cUser2, f.cFSP, fsp2)
	got, err := r.Members(ctx, g, nil)
	if err != nil {
		t.Fatal(err)
	}
	// CORP's own members stay; the FSP whose answer was refused stays as CORP
	// holds it; the clash is dropped in favour of CORP's User2.
	if g, w := dns(got), want(f.cUser, f.cUser2, f.cFSP); !slices.Equal(g, w) {
		t.Errorf("members %q\nwant %q", g, w)
	}
	got, err = r.TransitiveMembers(ctx, g, nil)
	if err != nil {
		t.Fatal(err)
	}
	if g, w := dns(got), want(f.cUser, f.cUser2, f.cFSP); !slices.Equal(g, w) {
		t.Errorf("transitive members %q\nwant %q", g, w)
	}
	if !strings.Contains(logs.String(), "an answer of another domain refused") {
		t.Errorf("nothing logged: %q", logs.String())
	}
	// Looked up by SID, DN or GUID, a forged answer is not FABRIKAM's object.
	f.fab.forged[f.fUser.DN] = f.cUser
	f.fab.forged[f.fGlobal.GUID] = f.cGlobal
	for _, id := range []string{f.fUser.SID, f.fUser.DN} {
		if o, err := r.Lookup(ctx, ident(t, id), nil); dirgate.ErrorCode(err) != dirgate.EUPSTREAM {
			t.Errorf("%s: %s, %v; want EUPSTREAM", id, o.DN, err)
		}
	}
	if o, err := r.Lookup(ctx, ident(t, f.fGlobal.GUID), nil); dirgate.ErrorCode(err) != dirgate.ENOTFOUND {
		t.Errorf("forged GUID answer: %s, %v; want not found", o.DN, err)
	}
}

// Concurrency 0 means the default, and the message about a bad value says so.
func TestConfigValidateConcurrency(t *testing.T) {
	d := &fakeDir{}
	doms := []Domain{{BaseDN: corpBase, SID: corpSID, Dir: d}}
	for _, n := range []int{0, 1, maxConcurrency} {
		if err := (Config{Domains: doms, Concurrency: n}).Validate(); err != nil {
			t.Errorf("Concurrency %d: %v", n, err)
		}
	}
	for _, n := range []int{-1, maxConcurrency + 1} {
		err := Config{Domains: doms, Concurrency: n}.Validate()
		if err == nil || !strings.Contains(err.Error(), "must be between 0 (meaning 8) and 256") {
			t.Errorf("Concurrency %d: %v, want the range from 0", n, err)
		}
	}
}

// Groups of another domain that hold a principal through an FSP are taken only when
// they are that domain's own: a builtin group (its SID the same in every domain)
// and a group carrying the GUID of another domain's object are left out, so that
// another domain cannot put a caller in a group a role names by SID or GUID.
func TestMemberOfLeavesOutBuiltinAndClashingGroups(t *testing.T) {
	f := newForest()
	builtin := object(dirgate.TypeGroup, "CN=Administrators,CN=Builtin,"+fabBase, "S-1-5-32-544")
	f.fab.add(builtin, f.fFSP)
	clash := object(dirgate.TypeGroup, "CN=Impostor,"+ou+fabBase, fabSID+"-1300")
	clash.GUID = f.cUniversal.GUID
	f.fab.add(clash, f.fFSP)
	r := f.router(0)
	r.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	got, err := r.MemberOf(context.Background(), f.cGlobal)
	if err != nil {
		t.Fatal(err)
	}
	var dns []string
	for _, g := range got {
		dns = append(dns, g.DN)
	}
	if w := []string{f.cUniversal.DN, f.fLocal.DN}; !slices.Equal(keysOf(dns), keysOf(w)) {
		t.Errorf("CORP's Global's groups %q, want %q: FABRIKAM's builtin group and impostor left out", dns, w)
	}
}
