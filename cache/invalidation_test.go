package cache

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/test/harness/fixture"
)

// affected are the groups whose listings a removal from Desktop Engineers changes:
// the group itself and every group that contains it, up the chain and sideways
// (Workstation Admins holds Help Desk).
var affected = append([]string{fixture.WorkstationAdminsDN}, fixture.ChainDNs...)

// memberOf returns a direct member of group other than the DNs in except.
func memberOf(t *testing.T, dir dirgate.Directory, group string, except ...string) dirgate.Object {
	t.Helper()
next:
	for _, o := range truth(t, dir, group, dirgate.ListOptions{}) {
		for _, e := range except {
			if dirgate.MustParseDN(o.DN).Key() == dirgate.MustParseDN(e).Key() {
				continue next
			}
		}
		if o.ObjectType == dirgate.TypeUser {
			return o
		}
	}
	t.Fatalf("%s has no user member to remove", group)
	return dirgate.Object{}
}

// TestRemovalInvalidatesEveryAffectedListing: after a removal through one instance
// returns, both instances serve every affected listing (direct and nested, with any
// properties) as the directory now gives it, while unaffected listings stay cached.
func TestRemovalInvalidatesEveryAffectedListing(t *testing.T) {
	for _, b := range sharedBackends() {
		t.Run(b.name, func(t *testing.T) {
			dir := demo(t)
			cfg := b.cfg(t)
			a, other := newInstance(t, dir, cfg), newInstance(t, dir, cfg)
			warm := append([]string{fixture.ProjectAlphaDN}, affected...)
			// Twice: the second hit finds the entry current and, with a lease, trusts
			// it, so that the removal below must withdraw that trust.
			for range 2 {
				for _, in := range []instance{a, other} {
					for _, g := range warm {
						for _, opts := range listOptions {
							in.list(t, g, opts)
						}
					}
				}
			}
			// Rita Regular is also a direct member of IT Department: removing her from
			// Desktop Engineers must leave her there. The other member vanishes everywhere.
			for _, target := range []dirgate.Object{
				memberOf(t, dir, fixture.DesktopEngineersDN, fixture.RegularDN),
				object(t, dir, fixture.RegularDN),
			} {
				res, err := a.svc.Remove(t.Context(), dirgate.Principal{}, dirgate.MustParseIdentifier(fixture.DesktopEngineersDN), dirgate.MustParseIdentifier(target.GUID))
				if err != nil || res.NoChanges {
					t.Fatalf("remove %s: %+v, %v", target.DN, res, err)
				}
				for _, in := range []instance{other, a} {
					for _, g := range affected {
						for _, opts := range listOptions {
							got, st := in.list(t, g, opts)
							if want := truth(t, dir, g, opts); !sameListing(got, want) {
								t.Errorf("after removing %s, %s %+v (%s) differs from the directory", target.DN, g, opts, st)
							}
						}
					}
					// Nothing in Project Alpha came from Desktop Engineers: still a hit.
					if _, st := in.list(t, fixture.ProjectAlphaDN, dirgate.ListOptions{IncludeIndirect: true}); st != dirgate.CacheHit {
						t.Errorf("unaffected listing: status %q, want hit", st)
					}
				}
			}
		})
	}
}

func object(t *testing.T, dir dirgate.Directory, id string) dirgate.Object {
	t.Helper()
	o, err := dir.Lookup(t.Context(), dirgate.MustParseIdentifier(id), nil)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// watched are the groups and options the concurrent test reads while it removes.
var watched = append([]string{fixture.ProjectAlphaDN, fixture.ProjectBetaDN, fixture.SalesEastDN, fixture.SalesWestDN}, affected...)

var watchedOptions = []dirgate.ListOptions{{}, {IncludeIndirect: true, Properties: []string{"mail"}}, {IncludeIndirect: true}}

type listingKey struct {
	group string
	opt   int
}

// TestConcurrentRemovalTwoInstances: two instances share one Redis and one directory;
// readers list on both without pause while members are removed through either. A
// request that starts after a removal has returned never lists the removed member
// in any listing it belonged to; at the end both instances agree with the directory.
func TestConcurrentRemovalTwoInstances(t *testing.T) {
	for _, b := range sharedBackends() {
		t.Run(b.name, func(t *testing.T) {
			base := demo(t)
			// Random short pauses in member reads make fills overlap removals.
			dir := &countingDir{Directory: base, beforeMembers: func(dirgate.Object) {
				if rand.IntN(3) == 0 {
					time.Sleep(time.Duration(rand.IntN(400)) * time.Microsecond)
				}
			}}
			cfg := b.cfg(t)
			instances := []instance{newInstance(t, dir, cfg), newInstance(t, dir, cfg)}

			var removals [][2]dirgate.Object
			for _, g := range []string{fixture.DesktopEngineersDN, fixture.ServiceDeskLeadsDN, fixture.HelpDeskDN, fixture.ProjectBetaDN, fixture.SalesWestDN} {
				grp := object(t, base, g)
				for _, m := range truth(t, base, g, dirgate.ListOptions{}) {
					if m.ObjectType == dirgate.TypeUser {
						removals = append(removals, [2]dirgate.Object{grp, m})
					}
				}
			}
			snapshot := func() map[listingKey]map[string]bool {
				s := map[listingKey]map[string]bool{}
				for _, g := range watched {
					for i, opts := range watchedOptions {
						s[listingKey{g, i}] = guids(truth(t, base, g, opts))
					}
				}
				return s
			}
			var current atomic.Pointer[map[listingKey]map[string]bool]
			s := snapshot()
			current.Store(&s)

			ctx, cancel := context.WithCancel(t.Context())
			var requests atomic.Int64
			var wg sync.WaitGroup
			for _, in := range instances {
				for range 2 {
					wg.Go(func() {
						for ctx.Err() == nil {
							k := listingKey{watched[rand.IntN(len(watched))], rand.IntN(len(watchedOptions))}
							allowed := (*current.Load())[k] // the directory as of this request's start
							objs, _, err := in.tryList(ctx, k.group, watchedOptions[k.opt])
							if err != nil {
								if ctx.Err() == nil {
									t.Errorf("list %s: %v", k.group, err)
								}
								return
							}
							requests.Add(1)
							for _, o := range objs {
								if !allowed[o.GUID] {
									t.Errorf("%s %+v listed %s after its removal", k.group, watchedOptions[k.opt], o.DN)
								}
							}
						}
					})
				}
			}
			for i, r := range removals {
				// Let readers fill and hit between removals.
				seen := requests.Load()
				waitFor(t, "readers to make progress", func() bool { return requests.Load() >= seen+20 || t.Failed() })
				in := instances[i%2]
				if _, err := in.svc.Remove(ctx, dirgate.Principal{}, dirgate.MustParseIdentifier(r[0].GUID), dirgate.MustParseIdentifier(r[1].GUID)); err != nil {
					t.Fatalf("remove %s from %s: %v", r[1].DN, r[0].DN, err)
				}
				s := snapshot()
				current.Store(&s)
			}
			cancel()
			wg.Wait()
			t.Logf("%d removals, %d listings", len(removals), requests.Load())
			for _, in := range instances {
				for _, g := range watched {
					for _, opts := range watchedOptions {
						if got, want := func() []dirgate.Object { o, _ := in.list(t, g, opts); return o }(), truth(t, base, g, opts); !sameListing(got, want) {
							t.Errorf("at the end, %s %+v differs from the directory", g, opts)
						}
					}
				}
			}
		})
	}
}

// TestFillStartedBeforeRemovalIsNotServed plays the race the version check exists
// for, step by step: instance B reads a group's members, the removal goes through
// instance A and returns, then B finishes its fill. The request that started the fill
// may get the old listing (it began before the removal); a request that arrived
// after the removal and joined the same read must not, and nothing stale is stored.
func TestFillStartedBeforeRemovalIsNotServed(t *testing.T) {
	tests := []struct {
		name  string
		group string
		opts  dirgate.ListOptions
	}{
		// The group's own listing: guarded atomically by its version in the store.
		{"direct", fixture.DesktopEngineersDN, dirgate.ListOptions{}},
		// A listing that reached the group four levels down: guarded by the version
		// recorded for the nested group.
		{"nested", fixture.ITDepartmentDN, dirgate.ListOptions{IncludeIndirect: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base := demo(t)
			cfg := sharedBackends()[0].cfg(t)
			target := memberOf(t, base, fixture.DesktopEngineersDN, fixture.RegularDN)
			held := object(t, base, fixture.DesktopEngineersDN)
			reached, release := make(chan struct{}), make(chan struct{})
			var armed atomic.Bool
			armed.Store(true)
			bdir := &countingDir{Directory: base, afterMembers: func(g dirgate.Object) {
				if g.GUID == held.GUID && armed.CompareAndSwap(true, false) {
					close(reached)
					<-release
				}
			}}
			a, b := newInstance(t, base, cfg), newInstance(t, bdir, cfg)
			joins := &joinCounter{}
			b.c.testHookJoined = joins.hook

			type result struct {
				objs []dirgate.Object
				err  error
			}
			listOnB := func() chan result {
				ch := make(chan result, 1)
				go func() {
					objs, _, err := b.tryList(context.Background(), tc.group, tc.opts)
					ch <- result{objs, err}
				}()
				return ch
			}
			first := listOnB()
			<-reached // B has read the members, target included
			if _, err := a.svc.Remove(t.Context(), dirgate.Principal{}, dirgate.MustParseIdentifier(held.GUID), dirgate.MustParseIdentifier(target.GUID)); err != nil {
				t.Fatal(err)
			}
			second := listOnB()
			waitFor(t, "the second request to join the first one's read", func() bool { return joins.count(":l:") >= 2 })
			close(release)
			if r := <-first; r.err != nil {
				t.Fatal(r.err)
			}
			r := <-second
			if r.err != nil {
				t.Fatal(r.err)
			}
			want := truth(t, base, tc.group, tc.opts)
			if guids(r.objs)[target.GUID] || !sameListing(r.objs, want) {
				t.Errorf("a request that arrived after the removal got the listing read before it")
			}
			for name, in := range map[string]instance{"B": b, "A": a} {
				if got, st := in.list(t, tc.group, tc.opts); !sameListing(got, want) {
					t.Errorf("instance %s afterwards (%s): listing read before the removal was stored", name, st)
				}
			}
		})
	}
}

// TestStaleEntryInStoreIsNotServed: a nested listing's groups live in different
// Cluster slots, so storing it cannot be atomic with all of their versions. Even an
// entry that lands in the store after the removal (here written back by hand) is
// refused by every reader, because the versions it recorded are no longer current.
func TestStaleEntryInStoreIsNotServed(t *testing.T) {
	base := demo(t)
	cfg := sharedBackends()[0].cfg(t)
	a, b := newInstance(t, base, cfg), newInstance(t, base, cfg)
	opts := dirgate.ListOptions{IncludeIndirect: true}
	a.list(t, fixture.ITDepartmentDN, opts)
	key, _ := a.c.keys.listing(object(t, base, fixture.ITDepartmentDN).GUID, true, nil)
	old, err := a.c.store.get(t.Context(), key)
	if err != nil || old[0] == "" {
		t.Fatalf("stored entry: %v", err)
	}
	target := memberOf(t, base, fixture.DesktopEngineersDN, fixture.RegularDN)
	if _, err := a.svc.Remove(t.Context(), dirgate.Principal{}, dirgate.MustParseIdentifier(fixture.DesktopEngineersDN), dirgate.MustParseIdentifier(target.GUID)); err != nil {
		t.Fatal(err)
	}
	if err := a.c.store.set(t.Context(), key, old[0], time.Minute); err != nil {
		t.Fatal(err)
	}
	want := truth(t, base, fixture.ITDepartmentDN, opts)
	steps := []struct {
		name string
		in   instance
		want dirgate.CacheStatus
	}{
		// A holds the old entry in its first level and finds it in the store: refuses
		// both and reads the directory.
		{"A", a, dirgate.CacheMiss},
		// B finds A's new entry in the store.
		{"B", b, dirgate.CacheHit},
	}
	for _, s := range steps {
		if got, st := s.in.list(t, fixture.ITDepartmentDN, opts); !sameListing(got, want) || st != s.want {
			t.Errorf("instance %s: status %q (want %q); listing equals the directory's: %v", s.name, st, s.want, sameListing(got, want))
		}
	}
}

// inChain plays the LDAP upstream's in-chain query: one call for a whole nested
// listing, which does not tell which nested groups it went through.
type inChain struct {
	dir   dirgate.Directory
	calls atomic.Int32
}

func (c *inChain) TransitiveMembers(ctx context.Context, group dirgate.Object, props []string) ([]dirgate.Object, error) {
	c.calls.Add(1)
	return dirgate.Expand(ctx, dirgate.Expansion{Dir: c.dir}, group, dirgate.ListOptions{IncludeIndirect: true, Properties: props})
}

// TestInChainListingsFollowAnyRemoval: with the in-chain option, a nested listing is
// filled by one query, and a removal from any group invalidates it on every instance.
func TestInChainListingsFollowAnyRemoval(t *testing.T) {
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
			if _, st := other.list(t, top, nested); st != dirgate.CacheHit || chain.calls.Load() != 1 {
				t.Fatalf("second listing: %s after %d in-chain queries, want a hit after 1", st, chain.calls.Load())
			}
			victim := memberOf(t, dir, fixture.DesktopEngineersDN, fixture.RegularDN)
			if _, err := a.svc.Remove(t.Context(), dirgate.Principal{}, dirgate.MustParseIdentifier(fixture.DesktopEngineersDN),
				dirgate.MustParseIdentifier(victim.DN)); err != nil {
				t.Fatal(err)
			}
			after, _ := other.list(t, top, nested)
			if len(after) != len(before)-1 {
				t.Fatalf("after removing %s: %d objects, want %d", victim.DN, len(after), len(before)-1)
			}
			for _, o := range after {
				if o.GUID == victim.GUID {
					t.Fatalf("removed member still listed by the other instance")
				}
			}
		})
	}
}

// TestRemovalBehindDirgatesBack: a member removed directly in the directory is still
// in the cached listing; removing it through dirgate answers "no changes", resolves
// both sides afresh, and invalidates the listing all the same.
func TestRemovalBehindDirgatesBack(t *testing.T) {
	dir := demo(t)
	in := newInstance(t, dir, Config{})
	victim := memberOf(t, dir, fixture.DesktopEngineersDN, fixture.RegularDN)
	group := object(t, dir, fixture.DesktopEngineersDN)
	in.list(t, fixture.DesktopEngineersDN, dirgate.ListOptions{})
	if err := dir.RemoveMember(t.Context(), group, victim); err != nil {
		t.Fatal(err)
	}
	if _, st := in.list(t, fixture.DesktopEngineersDN, dirgate.ListOptions{}); st != dirgate.CacheHit {
		t.Fatalf("listing after an outside change: %s, want a (stale) hit", st)
	}
	res, err := in.svc.Remove(t.Context(), dirgate.Principal{}, dirgate.MustParseIdentifier(fixture.DesktopEngineersDN),
		dirgate.MustParseIdentifier(victim.DN))
	if err != nil || !res.NoChanges {
		t.Fatalf("Remove = %+v, %v; want no changes", res, err)
	}
	objs, _ := in.list(t, fixture.DesktopEngineersDN, dirgate.ListOptions{})
	for _, o := range objs {
		if o.GUID == victim.GUID {
			t.Fatal("the listing still shows a member that dirgate was told is not one")
		}
	}
}

// TestRemovalResolvesFresh: lookups for a removal bypass the cached resolutions.
func TestRemovalResolvesFresh(t *testing.T) {
	counting := &countingDir{Directory: demo(t)}
	in := newInstance(t, counting, Config{})
	id := dirgate.MustParseIdentifier(fixture.DesktopEngineersDN)
	in.c.Lookup(t.Context(), id, nil)
	before := counting.lookups.Load()
	in.c.Lookup(t.Context(), id, nil)
	if counting.lookups.Load() != before {
		t.Fatal("a plain lookup was not served from the cache")
	}
	in.c.LookupFresh(t.Context(), id, nil)
	if counting.lookups.Load() != before+1 {
		t.Fatal("a fresh lookup was served from the cache")
	}
	// A removal through the member service resolves the group and the member fresh.
	before = counting.lookups.Load()
	if _, err := in.svc.Remove(t.Context(), dirgate.Principal{}, id, dirgate.MustParseIdentifier(fixture.DesktopEngineersDN)); err == nil {
		t.Log("removed the group from itself?")
	}
	if got := counting.lookups.Load() - before; got < 2 {
		t.Errorf("a removal made %d directory look-ups, want 2 (group and member, both fresh)", got)
	}
}
