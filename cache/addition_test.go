package cache

import (
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/test/harness/fixture"
)

// TestAdditionInvalidatesEveryAffectedListing: once an addition through one instance
// has returned, both instances serve every affected listing (direct and nested, with
// and without properties) with the new member, including the members of a group
// added as a member, while unaffected listings stay cached.
func TestAdditionInvalidatesEveryAffectedListing(t *testing.T) {
	for _, b := range sharedBackends() {
		t.Run(b.name, func(t *testing.T) {
			dir := demo(t)
			cfg := b.cfg(t)
			a, other := newInstance(t, dir, cfg), newInstance(t, dir, cfg)
			warm := append([]string{fixture.ProjectAlphaDN}, affected...)
			for _, in := range []instance{a, other} {
				for _, g := range warm {
					for _, opts := range listOptions {
						in.list(t, g, opts)
					}
				}
			}
			// A user, then a group with members of its own (and a cycle below it).
			for _, id := range []string{fixture.RemoveTargetDN, fixture.SalesEastDN} {
				newMember := object(t, dir, id)
				res, err := a.svc.Add(t.Context(), dirgate.Principal{}, dirgate.MustParseIdentifier(fixture.DesktopEngineersDN), dirgate.MustParseIdentifier(newMember.GUID))
				if err != nil || res.NoChanges {
					t.Fatalf("add %s: %+v, %v", newMember.DN, res, err)
				}
				for _, in := range []instance{other, a} {
					for _, g := range affected {
						for _, opts := range listOptions {
							got, st := in.list(t, g, opts)
							if want := truth(t, dir, g, opts); !sameListing(got, want) {
								t.Errorf("after adding %s, %s %+v (%s) differs from the directory", newMember.DN, g, opts, st)
							}
							if !guids(got)[newMember.GUID] && (g == fixture.DesktopEngineersDN || opts.IncludeIndirect) {
								t.Errorf("after adding %s, %s %+v (%s) lacks it", newMember.DN, g, opts, st)
							}
						}
					}
					if _, st := in.list(t, fixture.ProjectAlphaDN, dirgate.ListOptions{IncludeIndirect: true}); st != dirgate.CacheHit {
						t.Errorf("unaffected listing: status %q, want hit", st)
					}
				}
			}
		})
	}
}

// TestInChainListingsFollowAnyAddition: with the in-chain option, an addition to any
// group invalidates every nested listing on every instance.
func TestInChainListingsFollowAnyAddition(t *testing.T) {
	for _, b := range sharedBackends() {
		t.Run(b.name, func(t *testing.T) {
			dir := demo(t)
			chain := &inChain{dir: dir}
			cfg := b.cfg(t)
			cfg.Transitive = chain
			a, other := newInstance(t, dir, cfg), newInstance(t, dir, cfg)
			nested := dirgate.ListOptions{IncludeIndirect: true}
			top := fixture.ChainDNs[0]
			before, _ := other.list(t, top, nested)
			if _, st := other.list(t, top, nested); st != dirgate.CacheHit {
				t.Fatalf("second listing: %s, want a hit", st)
			}
			newMember := object(t, dir, fixture.RemoveTargetDN)
			if _, err := a.svc.Add(t.Context(), dirgate.Principal{}, dirgate.MustParseIdentifier(fixture.DesktopEngineersDN),
				dirgate.MustParseIdentifier(newMember.DN)); err != nil {
				t.Fatal(err)
			}
			after, _ := other.list(t, top, nested)
			if len(after) != len(before)+1 || !guids(after)[newMember.GUID] {
				t.Fatalf("after adding %s: %d objects, want %d with it", newMember.DN, len(after), len(before)+1)
			}
		})
	}
}

// TestAdditionBehindDirgatesBack: a member added directly in the directory is missing
// from the cached listing; adding it through dirgate answers "no changes" and
// invalidates the listing all the same.
func TestAdditionBehindDirgatesBack(t *testing.T) {
	dir := demo(t)
	in := newInstance(t, dir, Config{})
	newMember := object(t, dir, fixture.RemoveTargetDN)
	group := object(t, dir, fixture.DesktopEngineersDN)
	in.list(t, fixture.DesktopEngineersDN, dirgate.ListOptions{})
	if err := dir.AddMember(t.Context(), group, newMember); err != nil {
		t.Fatal(err)
	}
	if _, st := in.list(t, fixture.DesktopEngineersDN, dirgate.ListOptions{}); st != dirgate.CacheHit {
		t.Fatalf("listing after an outside change: %s, want a (stale) hit", st)
	}
	res, err := in.svc.Add(t.Context(), dirgate.Principal{}, dirgate.MustParseIdentifier(fixture.DesktopEngineersDN),
		dirgate.MustParseIdentifier(newMember.DN))
	if err != nil || !res.NoChanges {
		t.Fatalf("Add = %+v, %v; want no changes", res, err)
	}
	if objs, _ := in.list(t, fixture.DesktopEngineersDN, dirgate.ListOptions{}); !guids(objs)[newMember.GUID] {
		t.Fatal("the listing lacks a member that dirgate was told is one")
	}
}
