package domains

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dirgate/dirgate"
)

// fakeDir is one domain's directory: objects, direct members by GUID, and knobs to
// take it down or slow it, counting what it is asked.
type fakeDir struct {
	name    string
	objs    []dirgate.Object
	members map[string][]string // group GUID -> member GUIDs

	down  atomic.Bool
	delay time.Duration
	// forged, when set, is answered for the identifier (canonical) it is keyed
	// by, as a hostile or broken DC would.
	forged map[string]dirgate.Object
	// block, when set, holds every look-up (counted in flight) until it receives
	// or is closed.
	block chan struct{}

	mu       sync.Mutex
	lookups  []string // identifiers looked up, in order
	writes   []string
	inFlight atomic.Int32
	maxIn    atomic.Int32
}

var errDown = errors.New("fake: all domain controllers are down")

func (f *fakeDir) enter() func() {
	n := f.inFlight.Add(1)
	for {
		m := f.maxIn.Load()
		if n <= m || f.maxIn.CompareAndSwap(m, n) {
			break
		}
	}
	if f.delay > 0 {
		time.Sleep(f.delay)
	}
	return func() { f.inFlight.Add(-1) }
}

func (f *fakeDir) byGUID(guid string) (dirgate.Object, bool) {
	for _, o := range f.objs {
		if o.GUID == guid {
			return o, true
		}
	}
	return dirgate.Object{}, false
}

// withProps returns a copy of o carrying one value per requested property.
func withProps(o dirgate.Object, props []string) dirgate.Object {
	o.Properties = map[string][]string{}
	for _, p := range props {
		if p == "samaccountname" {
			o.Properties[p] = []string{strings.TrimPrefix(strings.SplitN(o.DN, ",", 2)[0], "CN=")}
		}
	}
	return o
}

func (f *fakeDir) Lookup(ctx context.Context, id dirgate.Identifier, props []string) (dirgate.Object, error) {
	defer f.enter()()
	if f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
		}
	}
	f.mu.Lock()
	f.lookups = append(f.lookups, id.Canonical())
	f.mu.Unlock()
	if f.down.Load() {
		return dirgate.Object{}, dirgate.WrapError(dirgate.EUNAVAILABLE, "The directory is unavailable.", errDown)
	}
	if err := ctx.Err(); err != nil {
		return dirgate.Object{}, err
	}
	if o, ok := f.forged[id.Canonical()]; ok {
		return withProps(o, props), nil
	}
	for _, o := range f.objs {
		if o.ObjectType == "" {
			continue // a placeholder the directory lists, not an object it holds
		}
		var match bool
		switch id.Kind() {
		case dirgate.KindDN:
			match = strings.EqualFold(o.DN, id.String())
		case dirgate.KindGUID:
			match = o.GUID == id.Canonical()
		case dirgate.KindSID:
			match = o.SID == id.Canonical()
		}
		if match {
			return withProps(o, props), nil
		}
	}
	return dirgate.Object{}, dirgate.Errorf(dirgate.ENOTFOUND, "The object was not found.")
}

func (f *fakeDir) Members(ctx context.Context, group dirgate.Object, props []string) ([]dirgate.Object, error) {
	defer f.enter()()
	if f.down.Load() {
		return nil, dirgate.WrapError(dirgate.EUNAVAILABLE, "The directory is unavailable.", errDown)
	}
	var out []dirgate.Object
	for _, g := range f.members[group.GUID] {
		o, ok := f.byGUID(g)
		if !ok {
			return nil, fmt.Errorf("fake %s: member %s of %s unknown", f.name, g, group.GUID)
		}
		out = append(out, withProps(o, props))
	}
	return out, nil
}

func (f *fakeDir) MemberOf(ctx context.Context, obj dirgate.Object) ([]dirgate.Object, error) {
	if f.down.Load() {
		return nil, dirgate.WrapError(dirgate.EUNAVAILABLE, "The directory is unavailable.", errDown)
	}
	var out []dirgate.Object
	for g, ms := range f.members {
		for _, m := range ms {
			if m == obj.GUID {
				o, _ := f.byGUID(g)
				out = append(out, o)
			}
		}
	}
	return out, nil
}

func (f *fakeDir) RemoveMember(ctx context.Context, group, member dirgate.Object) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes = append(f.writes, "remove "+member.GUID+" from "+group.GUID)
	return nil
}

func (f *fakeDir) AddMember(ctx context.Context, group, member dirgate.Object) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes = append(f.writes, "add "+member.GUID+" to "+group.GUID)
	return nil
}

// TransitiveMembers lists everything below group in this domain only, as an
// in-chain search does: foreign security principals included, never followed.
func (f *fakeDir) TransitiveMembers(ctx context.Context, group dirgate.Object, props []string) ([]dirgate.Object, error) {
	if f.down.Load() {
		return nil, dirgate.WrapError(dirgate.EUNAVAILABLE, "The directory is unavailable.", errDown)
	}
	seen := map[string]bool{group.GUID: true}
	var out []dirgate.Object
	queue := []string{group.GUID}
	for len(queue) > 0 {
		g := queue[0]
		queue = queue[1:]
		for _, m := range f.members[g] {
			if seen[m] {
				continue
			}
			seen[m] = true
			o, _ := f.byGUID(m)
			out = append(out, withProps(o, props))
			queue = append(queue, m)
		}
	}
	return out, nil
}

// waitInFlight waits until n look-ups are in flight at once, failing after a
// deadline far beyond any scheduling delay: only a router that never has n in
// flight reaches it.
func (f *fakeDir) waitInFlight(n int32) bool {
	deadline := time.Now().Add(10 * time.Second)
	for f.inFlight.Load() < n {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

func (f *fakeDir) lookupCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.lookups)
}

func (f *fakeDir) add(o dirgate.Object, members ...dirgate.Object) dirgate.Object {
	f.objs = append(f.objs, o)
	if o.IsGroup() {
		if f.members == nil {
			f.members = map[string][]string{}
		}
		for _, m := range members {
			f.members[o.GUID] = append(f.members[o.GUID], m.GUID)
		}
	}
	return o
}

// guidSeq numbers the fakes' GUIDs.
var guidSeq atomic.Int64

func object(typ, dn, sid string) dirgate.Object {
	n := guidSeq.Add(1)
	return dirgate.Object{
		GUID: fmt.Sprintf("00000000-0000-4000-8000-%012d", n), DN: dn, DisplayName: strings.TrimPrefix(strings.SplitN(dn, ",", 2)[0], "CN="),
		ObjectType: typ, DomainName: dirgate.MustParseDN(dn).DomainName(), DirectoryType: dirgate.DirectoryTypeActiveDirectory, SID: sid,
	}
}

// fsp is a foreign security principal of the domain under base standing for sid.
func fsp(base, sid string) dirgate.Object {
	return object(dirgate.TypeForeignPrincipal, "CN="+sid+",CN=ForeignSecurityPrincipals,"+base, sid)
}

const (
	corpBase = "DC=corp,DC=example,DC=com"
	corpSID  = "S-1-5-21-1000-2000-3000"
	fabBase  = "DC=fabrikam,DC=example,DC=net"
	fabSID   = "S-1-5-21-4000-5000-6000"
	ou       = "OU=dirgate-forest,"
)

// forest is the harness's seed (test/harness/samba/forest.sh) in two fakes: in
// each domain users User and User2, Global (both users), Universal (Global), Local
// (Universal and an FSP); CORP's FSP stands for FABRIKAM's User, FABRIKAM's for
// CORP's Global.
type forest struct {
	corp, fab                                        *fakeDir
	cUser, cUser2, cGlobal, cUniversal, cLocal, cFSP dirgate.Object
	fUser, fUser2, fGlobal, fUniversal, fLocal, fFSP dirgate.Object
}

func newForest() *forest {
	f := &forest{corp: &fakeDir{name: "corp"}, fab: &fakeDir{name: "fabrikam"}}
	f.fUser = f.fab.add(object(dirgate.TypeUser, "CN=User,"+ou+fabBase, fabSID+"-1104"))
	f.fUser2 = f.fab.add(object(dirgate.TypeUser, "CN=User2,"+ou+fabBase, fabSID+"-1105"))
	f.fGlobal = f.fab.add(object(dirgate.TypeGroup, "CN=Global,"+ou+fabBase, fabSID+"-1106"), f.fUser, f.fUser2)
	f.fUniversal = f.fab.add(object(dirgate.TypeGroup, "CN=Universal,"+ou+fabBase, fabSID+"-1107"), f.fGlobal)

	f.cUser = f.corp.add(object(dirgate.TypeUser, "CN=User,"+ou+corpBase, corpSID+"-1104"))
	f.cUser2 = f.corp.add(object(dirgate.TypeUser, "CN=User2,"+ou+corpBase, corpSID+"-1105"))
	f.cGlobal = f.corp.add(object(dirgate.TypeGroup, "CN=Global,"+ou+corpBase, corpSID+"-1106"), f.cUser, f.cUser2)
	f.cUniversal = f.corp.add(object(dirgate.TypeGroup, "CN=Universal,"+ou+corpBase, corpSID+"-1107"), f.cGlobal)
	f.cFSP = f.corp.add(fsp(corpBase, f.fUser.SID))
	f.cLocal = f.corp.add(object(dirgate.TypeGroup, "CN=Local,"+ou+corpBase, corpSID+"-1108"), f.cUniversal, f.cFSP)

	f.fFSP = f.fab.add(fsp(fabBase, f.cGlobal.SID))
	f.fLocal = f.fab.add(object(dirgate.TypeGroup, "CN=Local,"+ou+fabBase, fabSID+"-1108"), f.fUniversal, f.fFSP)
	return f
}

// router is the router over f's domains, CORP the home domain.
func (f *forest) router(concurrency int) *Directory {
	r, err := Config{Domains: []Domain{
		{BaseDN: corpBase, SID: corpSID, Dir: f.corp},
		{BaseDN: fabBase, SID: fabSID, Dir: f.fab},
	}, Concurrency: concurrency}.Open(context.Background())
	if err != nil {
		panic(err)
	}
	return r
}

// foreignAdder is a domain's directory that adds members of other domains by SID
// (dirgate.ForeignMemberAdder), recording each addition among the fake's writes;
// err, when set, is its answer instead.
type foreignAdder struct {
	*fakeDir
	err error
}

func (a *foreignAdder) AddForeignMember(ctx context.Context, group dirgate.Object, sid dirgate.Identifier) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err != nil {
		return a.err
	}
	a.writes = append(a.writes, "add sid "+sid.Canonical()+" to "+group.GUID)
	return nil
}

// routerWith is the router over f's domains with dirs in place of the fakes
// themselves (CORP's first).
func (f *forest) routerWith(corp, fab dirgate.Directory) *Directory {
	r, err := Config{Domains: []Domain{
		{BaseDN: corpBase, SID: corpSID, Dir: corp},
		{BaseDN: fabBase, SID: fabSID, Dir: fab},
	}}.Open(context.Background())
	if err != nil {
		panic(err)
	}
	return r
}

// forestFinder is a domain's directory that says which of its groups hold an
// object of another domain of its forest by DN (dirgate.ForestGroupFinder), as the
// fake holds them; forgedGroups, when set, is answered for the DN (lower-cased) it is
// keyed by, as a hostile or broken DC would.
type forestFinder struct {
	*fakeDir
	forgedGroups map[string][]dirgate.Object

	askedMu sync.Mutex
	asked   []string // DNs asked for, in order
}

func (f *forestFinder) GroupsHolding(ctx context.Context, dns []dirgate.DN) ([]dirgate.Object, error) {
	f.askedMu.Lock()
	for _, dn := range dns {
		f.asked = append(f.asked, dn.String())
	}
	f.askedMu.Unlock()
	if f.down.Load() {
		return nil, dirgate.WrapError(dirgate.EUNAVAILABLE, "The directory is unavailable.", errDown)
	}
	var out []dirgate.Object
	seen := map[string]bool{}
	for _, dn := range dns {
		if gs, ok := f.forgedGroups[strings.ToLower(dn.String())]; ok {
			out = append(out, gs...)
			continue
		}
		for g, ms := range f.members {
			for _, m := range ms {
				if o, ok := f.byGUID(m); ok && strings.EqualFold(o.DN, dn.String()) && !seen[g] {
					seen[g] = true
					grp, _ := f.byGUID(g)
					out = append(out, grp)
				}
			}
		}
	}
	return out, nil
}

func (f *forestFinder) askedFor() []string {
	f.askedMu.Lock()
	defer f.askedMu.Unlock()
	return slices.Clone(f.asked)
}

// placeholder is o as a directory of another domain of o's forest lists it in a
// group's members: by its DN, with the GUID and SID the directory holds for it,
// no type, marked unresolved.
func placeholder(o dirgate.Object) dirgate.Object {
	return dirgate.Object{GUID: o.GUID, DN: o.DN, SID: o.SID, DisplayName: o.DisplayName, DomainName: o.DomainName,
		DirectoryType: o.DirectoryType}
}
