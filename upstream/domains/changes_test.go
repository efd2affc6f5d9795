package domains

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/dirgate/dirgate"
)

// fakeChanges is one domain's change source: the batches it answers, in turn.
type fakeChanges struct {
	batches []dirgate.ChangeBatch
	reads   int
}

func (c *fakeChanges) ReadChanges(_ context.Context, _ dirgate.ChangePosition, _ int) (dirgate.ChangeBatch, error) {
	c.reads++
	if len(c.batches) == 0 {
		return dirgate.ChangeBatch{}, nil
	}
	b := c.batches[0]
	c.batches = c.batches[1:]
	return b, nil
}

// fakeForeign answers for one fake domain which of its groups hold its FSPs;
// down makes it fail, extra is answered whatever was asked (a hostile DC).
type fakeForeign struct {
	dir   *fakeDir
	down  bool
	extra []dirgate.Change

	mu    sync.Mutex
	asked [][]string
}

func (f *fakeForeign) ForeignChanges(_ context.Context, sids []string) ([]dirgate.Change, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, slices.Sorted(slices.Values(sids)))
	if f.down {
		return nil, errDown
	}
	out := append([]dirgate.Change(nil), f.extra...)
	for _, o := range f.dir.objs {
		if o.ObjectType != dirgate.TypeForeignPrincipal || !slices.ContainsFunc(sids, func(s string) bool { return strings.EqualFold(s, o.SID) }) {
			continue
		}
		ch := dirgate.Change{Kind: dirgate.ChangeObject, GUID: o.GUID, SID: o.SID, GroupsKnown: true}
		for g, ms := range f.dir.members {
			if slices.Contains(ms, o.GUID) {
				ch.Groups = append(ch.Groups, g)
			}
		}
		out = append(out, ch)
	}
	return out, nil
}

// changeOf is the change its own domain reports for o, in groups.
func changeOf(o dirgate.Object, groups ...dirgate.Object) dirgate.Change {
	ch := dirgate.Change{Kind: dirgate.ChangeObject, GUID: o.GUID, SID: o.SID, GroupsKnown: true}
	if o.IsGroup() {
		ch.Kind = dirgate.ChangeGroup
	}
	for _, g := range groups {
		ch.Groups = append(ch.Groups, g.GUID)
	}
	return ch
}

// feedForest is the router over f's domains with a change source and a foreign
// source each; it returns the router's sources by domain name.
func feedForest(t *testing.T, f *forest, corp, fab *fakeChanges, corpF, fabF *fakeForeign) map[string]dirgate.ChangeSource {
	t.Helper()
	r, err := Config{Domains: []Domain{
		{BaseDN: corpBase, SID: corpSID, Dir: f.corp, Changes: corp, Foreign: corpF},
		{BaseDN: fabBase, SID: fabSID, Dir: f.fab, Changes: fab, Foreign: fabF},
	}}.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]dirgate.ChangeSource{}
	for _, s := range r.ChangeSources() {
		out[s.Domain] = s.Source
	}
	if len(out) != 2 || out["corp.example.com"] == nil || out["fabrikam.example.net"] == nil {
		t.Fatalf("change sources: %v", out)
	}
	return out
}

func read(t *testing.T, s dirgate.ChangeSource) dirgate.ChangeBatch {
	t.Helper()
	b, err := s.ReadChanges(context.Background(), dirgate.ChangePosition{}, 100)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// invalidated is every GUID a batch's changes invalidate, as the change feed
// reads them (the objects and the groups that hold them).
func invalidated(b dirgate.ChangeBatch) []string {
	var out []string
	for _, ch := range b.Changes {
		out = append(out, ch.GUID)
		out = append(out, ch.Groups...)
	}
	return out
}

// A change of FABRIKAM's User (listed in CORP's Local through CORP's FSP) reaches
// CORP's Local; a change of CORP's Global (in FABRIKAM's Local through its FSP)
// reaches FABRIKAM's Local. Deleted objects and FSPs are not asked about.
func TestChangeSourcesReachOtherDomainsGroups(t *testing.T) {
	f := newForest()
	fabDeleted := dirgate.Change{Kind: dirgate.ChangeDeleted, GUID: "00000000-0000-4000-8000-999999999999", SID: fabSID + "-1200"}
	corp := &fakeChanges{batches: []dirgate.ChangeBatch{{Changes: []dirgate.Change{changeOf(f.cGlobal, f.cUniversal), changeOf(f.cFSP, f.cLocal)}}}}
	fab := &fakeChanges{batches: []dirgate.ChangeBatch{{Changes: []dirgate.Change{changeOf(f.fUser, f.fGlobal), fabDeleted}}}}
	corpF, fabF := &fakeForeign{dir: f.corp}, &fakeForeign{dir: f.fab}
	src := feedForest(t, f, corp, fab, corpF, fabF)

	b := read(t, src["fabrikam.example.net"])
	if got := invalidated(b); !slices.Contains(got, f.cLocal.GUID) || !slices.Contains(got, f.fGlobal.GUID) {
		t.Errorf("FABRIKAM's User changed: invalidated %v, want CORP's Local %s and FABRIKAM's Global %s", got, f.cLocal.GUID, f.fGlobal.GUID)
	}
	if want := [][]string{{strings.ToUpper(f.fUser.SID)}}; !slices.EqualFunc(corpF.asked, want, slices.Equal) {
		t.Errorf("CORP asked %v, want %v (the deleted object is not asked about)", corpF.asked, want)
	}
	b = read(t, src["corp.example.com"])
	if got := invalidated(b); !slices.Contains(got, f.fLocal.GUID) {
		t.Errorf("CORP's Global changed: invalidated %v, want FABRIKAM's Local %s", got, f.fLocal.GUID)
	}
	if want := [][]string{{strings.ToUpper(f.cGlobal.SID)}}; !slices.EqualFunc(fabF.asked, want, slices.Equal) {
		t.Errorf("FABRIKAM asked %v, want %v (CORP's FSP carries FABRIKAM's SID: not asked)", fabF.asked, want)
	}
}

// A domain that cannot be asked does not hold back the other's changes; it is asked
// again with the next read, and its answer then reaches its groups.
func TestChangeSourcesOtherDomainDown(t *testing.T) {
	f := newForest()
	fab := &fakeChanges{batches: []dirgate.ChangeBatch{
		{Changes: []dirgate.Change{changeOf(f.fUser, f.fGlobal)}},
		{},
	}}
	corpF := &fakeForeign{dir: f.corp, down: true}
	src := feedForest(t, f, &fakeChanges{}, fab, corpF, &fakeForeign{dir: f.fab})

	b := read(t, src["fabrikam.example.net"])
	if got := invalidated(b); !slices.Contains(got, f.fUser.GUID) || slices.Contains(got, f.cLocal.GUID) {
		t.Errorf("CORP down: invalidated %v, want FABRIKAM's change alone", got)
	}
	corpF.down = false
	b = read(t, src["fabrikam.example.net"])
	if got := invalidated(b); !slices.Contains(got, f.cLocal.GUID) {
		t.Errorf("CORP back: invalidated %v, want CORP's Local %s from the SID kept", got, f.cLocal.GUID)
	}
	if n := len(corpF.asked); n != 2 {
		t.Errorf("CORP asked %d times, want 2", n)
	}
	read(t, src["fabrikam.example.net"])
	if n := len(corpF.asked); n != 2 {
		t.Errorf("CORP asked %d times after it answered with nothing new, want 2", n)
	}
}

// More changed principals than are kept while a domain is down: its next answer
// brings a resync. A resync of the domain's own clears what was kept.
func TestChangeSourcesPendingOverflow(t *testing.T) {
	f := newForest()
	many := make([]dirgate.Change, maxPending+1)
	for i := range many {
		many[i] = dirgate.Change{Kind: dirgate.ChangeObject, GUID: f.fUser.GUID, SID: fabSID + "-" + strconv.Itoa(2000+i), GroupsKnown: true}
	}
	fab := &fakeChanges{batches: []dirgate.ChangeBatch{{Changes: many}, {}, {Changes: many}, {Resync: dirgate.ResyncBurst}, {}}}
	corpF := &fakeForeign{dir: f.corp, down: true}
	src := feedForest(t, f, &fakeChanges{}, fab, corpF, &fakeForeign{dir: f.fab})

	if b := read(t, src["fabrikam.example.net"]); b.Resync != "" {
		t.Fatalf("CORP down: resync %q", b.Resync)
	}
	corpF.down = false
	if b := read(t, src["fabrikam.example.net"]); b.Resync != dirgate.ResyncForeignMissed || len(b.Changes) != 0 {
		t.Errorf("CORP back after too many: resync %q with %d changes, want %q and none", b.Resync, len(b.Changes), dirgate.ResyncForeignMissed)
	}
	corpF.down = true
	read(t, src["fabrikam.example.net"])
	if b := read(t, src["fabrikam.example.net"]); b.Resync != dirgate.ResyncBurst {
		t.Fatalf("own resync: %q", b.Resync)
	}
	corpF.down = false
	asked := len(corpF.asked)
	if b := read(t, src["fabrikam.example.net"]); b.Resync != "" || len(corpF.asked) != asked {
		t.Errorf("after its own resync: resync %q, CORP asked %d more times, want none", b.Resync, len(corpF.asked)-asked)
	}
}

// Another domain's answer counts only for the SIDs it was asked about.
func TestChangeSourcesRefuseUnaskedAnswers(t *testing.T) {
	f := newForest()
	fab := &fakeChanges{batches: []dirgate.ChangeBatch{{Changes: []dirgate.Change{changeOf(f.fUser2, f.fGlobal)}}}}
	forged := dirgate.Change{Kind: dirgate.ChangeObject, GUID: f.cFSP.GUID, SID: f.fUser.SID, Groups: []string{f.cUser.GUID}, GroupsKnown: true}
	src := feedForest(t, f, &fakeChanges{}, fab, &fakeForeign{dir: f.corp, extra: []dirgate.Change{forged}}, &fakeForeign{dir: f.fab})
	if got := invalidated(read(t, src["fabrikam.example.net"])); slices.Contains(got, f.cUser.GUID) {
		t.Errorf("invalidated %v: took an answer for a SID not asked about", got)
	}
}

// The domains' own sources' failures are the batch's.
func TestChangeSourcesOwnFailure(t *testing.T) {
	f := newForest()
	r, err := Config{Domains: []Domain{
		{BaseDN: corpBase, SID: corpSID, Dir: f.corp, Changes: failing{}},
		{BaseDN: fabBase, SID: fabSID, Dir: f.fab},
	}}.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	srcs := r.ChangeSources()
	if len(srcs) != 1 || srcs[0].Domain != "corp.example.com" {
		t.Fatalf("sources %v: want CORP's alone (FABRIKAM has none)", srcs)
	}
	if _, err := srcs[0].Source.ReadChanges(context.Background(), dirgate.ChangePosition{}, 10); !errors.Is(err, errDown) {
		t.Errorf("err %v, want the source's", err)
	}
}

type failing struct{}

func (failing) ReadChanges(context.Context, dirgate.ChangePosition, int) (dirgate.ChangeBatch, error) {
	return dirgate.ChangeBatch{}, errDown
}

// Another domain's answer is taken as FSPs' changes, one per SID asked: one that
// says group or deleted does not make the feed expire every principal or
// invalidate everything.
func TestChangeSourcesForeignAnswersAreFSPChanges(t *testing.T) {
	f := newForest()
	fab := &fakeChanges{batches: []dirgate.ChangeBatch{{Changes: []dirgate.Change{changeOf(f.fUser2, f.fGlobal)}}}}
	hostile := []dirgate.Change{
		{Kind: dirgate.ChangeGroup, GUID: f.cFSP.GUID, SID: f.fUser2.SID, Groups: []string{f.cLocal.GUID}, GroupsKnown: true},
		{Kind: dirgate.ChangeDeleted, GUID: f.cUser.GUID, SID: f.fUser2.SID},
	}
	src := feedForest(t, f, &fakeChanges{}, fab, &fakeForeign{dir: f.corp, extra: hostile}, &fakeForeign{dir: f.fab})
	b := read(t, src["fabrikam.example.net"])
	var foreign []dirgate.Change
	for _, ch := range b.Changes {
		if ch.GUID != f.fUser2.GUID {
			foreign = append(foreign, ch)
		}
	}
	if len(foreign) != 1 || foreign[0].Kind != dirgate.ChangeObject || !foreign[0].GroupsKnown {
		t.Errorf("CORP's answers taken as %+v, want one object change with its groups known", foreign)
	}
}
