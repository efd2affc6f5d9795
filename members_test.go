package dirgate_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dirgate/dirgate"
)

// fakeDir is a directory of objects named by their CN: GUIDs are derived from the
// name, members are direct member lists, RemoveMember answers from removeErr and
// AddMember from addErr.
type fakeDir struct {
	mu         sync.Mutex
	objs       map[string]dirgate.Object // by GUID
	members    map[string][]string       // group GUID -> member GUIDs, duplicates allowed
	removeErr  error
	removed    []string
	addErr     error
	added      []string
	membersErr error
	inFlight   atomic.Int32
	maxFlight  atomic.Int32
}

func guidOf(name string) string {
	var h uint32 = 2166136261
	for _, c := range []byte(strings.ToLower(name)) {
		h = (h ^ uint32(c)) * 16777619
	}
	return fmt.Sprintf("%08x-0000-4000-8000-%012x", h, len(name))
}

// newFakeDir takes "name:type" pairs; DNs are CN=<name>,DC=x.
func newFakeDir(objs ...string) *fakeDir {
	d := &fakeDir{objs: map[string]dirgate.Object{}, members: map[string][]string{}}
	for i, spec := range objs {
		name, typ, _ := strings.Cut(spec, ":")
		d.objs[guidOf(name)] = dirgate.Object{GUID: guidOf(name), DN: "CN=" + name + ",DC=x", DisplayName: name,
			ObjectType: typ, SID: fmt.Sprintf("S-1-5-21-1-2-3-%d", 1000+i)}
	}
	return d
}

func (d *fakeDir) add(group string, members ...string) {
	for _, m := range members {
		d.members[guidOf(group)] = append(d.members[guidOf(group)], guidOf(m))
	}
}

func (d *fakeDir) Lookup(_ context.Context, id dirgate.Identifier, _ []string) (dirgate.Object, error) {
	for _, o := range d.objs {
		if (id.Kind() == dirgate.KindDN && dirgate.MustParseDN(o.DN).EqualFold(id.DN())) ||
			(id.Kind() == dirgate.KindGUID && o.GUID == id.Canonical()) || (id.Kind() == dirgate.KindSID && o.SID == id.Canonical()) {
			return o, nil
		}
	}
	return dirgate.Object{}, dirgate.Errorf(dirgate.ENOTFOUND, "not found")
}

func (d *fakeDir) Members(_ context.Context, g dirgate.Object, _ []string) ([]dirgate.Object, error) {
	n := d.inFlight.Add(1)
	defer d.inFlight.Add(-1)
	for {
		m := d.maxFlight.Load()
		if n <= m || d.maxFlight.CompareAndSwap(m, n) {
			break
		}
	}
	if d.membersErr != nil {
		return nil, d.membersErr
	}
	var out []dirgate.Object
	for _, guid := range d.members[g.GUID] {
		out = append(out, d.objs[guid])
	}
	return out, nil
}

func (d *fakeDir) MemberOf(_ context.Context, o dirgate.Object) ([]dirgate.Object, error) {
	var out []dirgate.Object
	for g, ms := range d.members {
		if slices.Contains(ms, o.GUID) {
			out = append(out, d.objs[g])
		}
	}
	return out, nil
}

func (d *fakeDir) RemoveMember(_ context.Context, g, m dirgate.Object) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.removed = append(d.removed, g.DisplayName+"/"+m.DisplayName)
	return d.removeErr
}

func (d *fakeDir) AddMember(_ context.Context, g, m dirgate.Object) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.added = append(d.added, g.DisplayName+"/"+m.DisplayName)
	return d.addErr
}

func displayNames(objs []dirgate.Object) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = o.DisplayName
	}
	return out
}

func list(t *testing.T, s *dirgate.MemberService, group string, opts dirgate.ListOptions) []string {
	t.Helper()
	objs, err := s.List(context.Background(), dirgate.Principal{}, dirgate.MustParseIdentifier("CN="+group+",DC=x"), opts)
	if err != nil {
		t.Fatal(err)
	}
	return displayNames(objs)
}

// nested: top holds a, sub and b; sub holds b (reached twice), c and cyc; cyc holds
// sub and top (two cycles back).
func nested() *fakeDir {
	d := newFakeDir("top:group", "sub:group", "cyc:group", "a:user", "b:user", "c:computer", "B2:user")
	d.add("top", "sub", "a", "b", "b")
	d.add("sub", "b", "c", "cyc")
	d.add("cyc", "sub", "top", "B2")
	return d
}

func TestListExpansion(t *testing.T) {
	tests := []struct {
		name string
		opts dirgate.ListOptions
		want []string
	}{
		// Direct members only, each once although the fake returns b twice.
		{"direct", dirgate.ListOptions{}, []string{"a", "b", "sub"}},
		// Nested groups and their members, each once, top never, despite both cycles.
		// Order is by DN without regard to case: CN=b before CN=B2 before CN=c.
		{"indirect", dirgate.ListOptions{IncludeIndirect: true}, []string{"a", "b", "B2", "c", "cyc", "sub"}},
		// sizeLimit cuts the ordered listing.
		{"size limit", dirgate.ListOptions{IncludeIndirect: true, SizeLimit: 2}, []string{"a", "b"}},
		{"size limit above count", dirgate.ListOptions{SizeLimit: 10}, []string{"a", "b", "sub"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &dirgate.MemberService{Dir: nested()}
			if got := list(t, s, "top", tt.opts); !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSortObjects(t *testing.T) {
	objs := []dirgate.Object{
		{DN: "CN=b,DC=x", GUID: "2"}, {DN: "cn=A,DC=x", GUID: "9"}, {DN: "CN=a,DC=x", GUID: "1"}, {DN: "CN=B,DC=x", GUID: "0"},
	}
	dirgate.SortObjects(objs)
	var got []string
	for _, o := range objs {
		got = append(got, o.DN+"/"+o.GUID)
	}
	// DN case-insensitively; equal DNs by GUID.
	want := []string{"CN=a,DC=x/1", "cn=A,DC=x/9", "CN=B,DC=x/0", "CN=b,DC=x/2"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestSortObjectsAsBefore holds SortObjects to the implementation it replaced (a
// stable sort of the objects by lower-cased DN, then GUID) on listings with
// upper-case, non-ASCII and equal DNs, in shuffled orders.
func TestSortObjectsAsBefore(t *testing.T) {
	reference := func(objs []dirgate.Object) {
		keys := make(map[string]string, len(objs))
		for i := range objs {
			keys[objs[i].GUID] = strings.ToLower(objs[i].DN)
		}
		slices.SortStableFunc(objs, func(a, b dirgate.Object) int {
			if c := strings.Compare(keys[a.GUID], keys[b.GUID]); c != 0 {
				return c
			}
			return strings.Compare(a.GUID, b.GUID)
		})
	}
	names := []string{"a", "A", "b", "Ä", "ä", "ǅ", "İ", "z", "Z", "é", "E", `\2C`, ""}
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		n := rng.IntN(40)
		objs := make([]dirgate.Object, n)
		for i := range objs {
			objs[i] = dirgate.Object{
				DN:   "CN=" + names[rng.IntN(len(names))] + names[rng.IntN(len(names))] + ",DC=x",
				GUID: strconv.Itoa(rng.IntN(1000)*1000 + i), // unique, as in a listing
			}
		}
		want := slices.Clone(objs)
		reference(want)
		dirgate.SortObjects(objs)
		if !slices.EqualFunc(objs, want, func(a, b dirgate.Object) bool { return a.DN == b.DN && a.GUID == b.GUID }) {
			t.Fatalf("round %d: got %v, want %v", round, objs, want)
		}
	}
}

// hideAuthz hides the named objects and records what it was asked to filter.
type hideAuthz struct {
	hide     map[string]bool
	allowRm  error
	allowAdd error
	filtered int
}

func (a *hideAuthz) FilterView(_ context.Context, _ dirgate.Principal, _ dirgate.Object, _ dirgate.ListOptions, objs []dirgate.Object) ([]dirgate.Object, error) {
	a.filtered = len(objs)
	var out []dirgate.Object
	for _, o := range objs {
		if !a.hide[o.DisplayName] {
			out = append(out, o)
		}
	}
	return out, nil
}

func (a *hideAuthz) AllowRemove(context.Context, dirgate.Principal, dirgate.Object, dirgate.Object) error {
	return a.allowRm
}

func (a *hideAuthz) AllowAdd(context.Context, dirgate.Principal, dirgate.Object, dirgate.Object) error {
	return a.allowAdd
}

// AllowView denies the hidden objects: what a listing hides, a caller may not name.
func (a *hideAuthz) AllowView(_ context.Context, _ dirgate.Principal, _, obj dirgate.Object) error {
	if a.hide[obj.DisplayName] {
		return dirgate.Errorf(dirgate.EFORBIDDEN, "hidden")
	}
	return nil
}

// The size limit applies to what the caller may see: hidden objects do not use up
// the limit.
func TestListSizeLimitAfterFilter(t *testing.T) {
	authz := &hideAuthz{hide: map[string]bool{"a": true, "b": true}}
	s := &dirgate.MemberService{Dir: nested(), Authz: authz}
	got := list(t, s, "top", dirgate.ListOptions{IncludeIndirect: true, SizeLimit: 2})
	if want := []string{"B2", "c"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if authz.filtered != 6 {
		t.Errorf("the filter saw %d objects, want the whole listing of 6", authz.filtered)
	}
}

// fixedLister stands in for a cache.
type fixedLister struct{ objs []dirgate.Object }

func (l fixedLister) Listing(context.Context, dirgate.Object, dirgate.ListOptions) (dirgate.Listing, error) {
	return dirgate.Listing{Objects: slices.Clone(l.objs), Status: dirgate.CacheHit}, nil
}

// With a Lister set, listings come from it, still filtered and limited.
func TestListUsesLister(t *testing.T) {
	d := nested()
	cached := []dirgate.Object{d.objs[guidOf("a")], d.objs[guidOf("b")], d.objs[guidOf("c")]}
	s := &dirgate.MemberService{Dir: d, Listings: fixedLister{cached}, Authz: &hideAuthz{hide: map[string]bool{"a": true}}}
	if got := list(t, s, "top", dirgate.ListOptions{SizeLimit: 1}); !slices.Equal(got, []string{"b"}) {
		t.Errorf("got %q", got)
	}
}

func TestListErrors(t *testing.T) {
	upstream := dirgate.WrapError(dirgate.EUPSTREAM, "", errors.New("connection reset"))
	tests := []struct {
		name      string
		group     string
		dirErr    error
		wantCode  string
		wantParam string
	}{
		// An unknown group names the parameter, so the client knows which one.
		{"unknown group", "CN=none,DC=x", nil, dirgate.ENOTFOUND, "group"},
		// Members are listed only under groups.
		{"not a group", "CN=a,DC=x", nil, dirgate.EINVALID, "group"},
		// A failing directory keeps its code through the service's wrapping.
		{"directory fails", "CN=top,DC=x", upstream, dirgate.EUPSTREAM, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := nested()
			d.membersErr = tt.dirErr
			s := &dirgate.MemberService{Dir: d}
			_, err := s.List(context.Background(), dirgate.Principal{}, dirgate.MustParseIdentifier(tt.group), dirgate.ListOptions{IncludeIndirect: true})
			if dirgate.ErrorCode(err) != tt.wantCode || dirgate.ErrorParam(err) != tt.wantParam {
				t.Errorf("got %v (code %q param %q), want %q %q", err, dirgate.ErrorCode(err), dirgate.ErrorParam(err), tt.wantCode, tt.wantParam)
			}
		})
	}
}

// Expansion reads a level's groups concurrently, but never more than asked.
func TestListExpandConcurrencyBound(t *testing.T) {
	var specs []string
	d := newFakeDir("root:group")
	for i := range 12 {
		specs = append(specs, fmt.Sprintf("g%d", i))
		d.objs[guidOf(specs[i])] = dirgate.Object{GUID: guidOf(specs[i]), DN: "CN=" + specs[i] + ",DC=x", DisplayName: specs[i], ObjectType: dirgate.TypeGroup}
	}
	d.add("root", specs...)
	s := &dirgate.MemberService{Dir: d, ExpandConcurrency: 2}
	if got := list(t, s, "root", dirgate.ListOptions{IncludeIndirect: true}); len(got) != 12 {
		t.Fatalf("got %d objects, want 12", len(got))
	}
	if m := d.maxFlight.Load(); m > 2 {
		t.Errorf("%d member reads ran at once, want at most 2", m)
	}
}

func TestRemove(t *testing.T) {
	wrapped := fmt.Errorf("ldap: %w", dirgate.ErrNotMember)
	tests := []struct {
		name       string
		member     string
		dirErr     error
		authz      error
		wantResult dirgate.OperationResult
		wantCode   string
		wantParam  string
		wantCalled bool
	}{
		{"removed", "CN=a,DC=x", nil, nil,
			dirgate.OperationResult{ResultType: 0, ActualObjectDN: "CN=top,DC=x"}, "", "", true},
		// docs/compatibility.md, "Removal": a member that is not there is "no
		// changes", not an error.
		{"not a member", "CN=a,DC=x", wrapped, nil,
			dirgate.OperationResult{ResultType: 0, NoChanges: true, ActualObjectDN: "CN=top,DC=x"}, "", "", true},
		// The primary group cannot be removed: a failed result with the reason.
		{"primary group", "CN=a,DC=x", fmt.Errorf("x: %w", dirgate.ErrPrimaryGroup), nil,
			dirgate.OperationResult{ResultType: 1, NoChanges: true, ActualObjectDN: "CN=top,DC=x"}, "", "", true},
		{"directory fails", "CN=a,DC=x", dirgate.WrapError(dirgate.EUPSTREAM, "", errors.New("down")), nil,
			dirgate.OperationResult{}, dirgate.EUPSTREAM, "", true},
		// Denied removals never reach the directory.
		{"forbidden", "CN=a,DC=x", nil, dirgate.Errorf(dirgate.EFORBIDDEN, "no"),
			dirgate.OperationResult{}, dirgate.EFORBIDDEN, "", false},
		{"unknown member", "CN=none,DC=x", nil, nil, dirgate.OperationResult{}, dirgate.ENOTFOUND, "member", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := nested()
			d.removeErr = tt.dirErr
			s := &dirgate.MemberService{Dir: d, Authz: &hideAuthz{allowRm: tt.authz}}
			res, err := s.Remove(context.Background(), dirgate.Principal{}, dirgate.MustParseIdentifier("CN=top,DC=x"), dirgate.MustParseIdentifier(tt.member))
			if dirgate.ErrorCode(err) != tt.wantCode || dirgate.ErrorParam(err) != tt.wantParam {
				t.Fatalf("error %v (code %q param %q), want %q %q", err, dirgate.ErrorCode(err), dirgate.ErrorParam(err), tt.wantCode, tt.wantParam)
			}
			if called := len(d.removed) > 0; called != tt.wantCalled {
				t.Errorf("directory called: %v, want %v", called, tt.wantCalled)
			}
			if err != nil {
				return
			}
			if res.ResultType != tt.wantResult.ResultType || res.NoChanges != tt.wantResult.NoChanges || res.ActualObjectDN != tt.wantResult.ActualObjectDN ||
				(res.Exception != nil) != (tt.wantResult.ResultType == dirgate.ResultFailed) || res.InnerMessages == nil || res.ExtraInfo == nil {
				t.Errorf("result %+v, want %+v", res, tt.wantResult)
			}
		})
	}
}

// TestAdd: an addition resolves both objects, asks the policy before the directory,
// and reports "already a member" as no changes; errors name the body's field.
func TestAdd(t *testing.T) {
	tests := []struct {
		name       string
		group      string
		member     string
		dirErr     error
		authz      error
		wantResult dirgate.OperationResult
		wantCode   string
		wantParam  string
		wantCalled bool
	}{
		{"added", "CN=top,DC=x", "CN=c,DC=x", nil, nil,
			dirgate.OperationResult{ResultType: 0, ActualObjectDN: "CN=top,DC=x"}, "", "", true},
		// A member that is there already is "no changes", as a removal of a non-member is.
		{"already a member", "CN=top,DC=x", "CN=a,DC=x", fmt.Errorf("ldap: %w", dirgate.ErrAlreadyMember), nil,
			dirgate.OperationResult{ResultType: 0, NoChanges: true, ActualObjectDN: "CN=top,DC=x"}, "", "", true},
		{"directory fails", "CN=top,DC=x", "CN=c,DC=x", dirgate.WrapError(dirgate.EUPSTREAM, "", errors.New("down")), nil,
			dirgate.OperationResult{}, dirgate.EUPSTREAM, "", true},
		{"directory refuses", "CN=top,DC=x", "CN=c,DC=x", dirgate.WrapError(dirgate.EINVALID, "The directory refused to add this member to this group.", errors.New("53")), nil,
			dirgate.OperationResult{}, dirgate.EINVALID, "", true},
		// Denied additions never reach the directory.
		{"forbidden", "CN=top,DC=x", "CN=c,DC=x", nil, dirgate.Errorf(dirgate.EFORBIDDEN, "no"),
			dirgate.OperationResult{}, dirgate.EFORBIDDEN, "", false},
		// Errors name the body's field.
		{"unknown member", "CN=top,DC=x", "CN=none,DC=x", nil, nil, dirgate.OperationResult{}, dirgate.ENOTFOUND, "newMember", false},
		{"unknown group", "CN=none,DC=x", "CN=c,DC=x", nil, nil, dirgate.OperationResult{}, dirgate.ENOTFOUND, "group", false},
		{"group is not a group", "CN=a,DC=x", "CN=c,DC=x", nil, nil, dirgate.OperationResult{}, dirgate.EINVALID, "group", false},
		// A group never becomes its own member, whatever the directory would say.
		{"itself", "CN=top,DC=x", "CN=top,DC=x", nil, nil, dirgate.OperationResult{}, dirgate.EINVALID, "newMember", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := nested()
			d.addErr = tt.dirErr
			s := &dirgate.MemberService{Dir: d, Authz: &hideAuthz{allowAdd: tt.authz}}
			res, err := s.Add(context.Background(), dirgate.Principal{}, dirgate.MustParseIdentifier(tt.group), dirgate.MustParseIdentifier(tt.member))
			if dirgate.ErrorCode(err) != tt.wantCode || dirgate.ErrorParam(err) != tt.wantParam {
				t.Fatalf("error %v (code %q param %q), want %q %q", err, dirgate.ErrorCode(err), dirgate.ErrorParam(err), tt.wantCode, tt.wantParam)
			}
			if called := len(d.added) > 0; called != tt.wantCalled {
				t.Errorf("directory called: %v, want %v", called, tt.wantCalled)
			}
			if err != nil {
				return
			}
			if res.ResultType != tt.wantResult.ResultType || res.NoChanges != tt.wantResult.NoChanges || res.ActualObjectDN != tt.wantResult.ActualObjectDN ||
				res.Exception != nil || res.InnerMessages == nil || res.ExtraInfo == nil {
				t.Errorf("result %+v, want %+v", res, tt.wantResult)
			}
		})
	}
}

// A principal carries its transitive groups once each, in DN order, through cycles,
// and its object's domain name (an upstream's, from the DN: DN.DomainName).
func TestPrincipal(t *testing.T) {
	dir := nested()
	b2 := dir.objs[guidOf("B2")]
	b2.DomainName = dirgate.MustParseDN(b2.DN).DomainName()
	dir.objs[guidOf("B2")] = b2
	s := &dirgate.MemberService{Dir: dir}
	p, err := s.Principal(context.Background(), dirgate.MustParseIdentifier("CN=B2,DC=x"))
	if err != nil {
		t.Fatal(err)
	}
	if p.DomainName != "x" {
		t.Errorf("principal's domain name %q, want its object's, x", p.DomainName)
	}
	var got []string
	for _, g := range p.Groups {
		got = append(got, g.DN)
	}
	if want := []string{"CN=cyc,DC=x", "CN=sub,DC=x", "CN=top,DC=x"}; !slices.Equal(got, want) || p.DisplayName != "B2" {
		t.Errorf("principal %s groups %q, want %q", p.DisplayName, got, want)
	}
	if _, err := s.Principal(context.Background(), dirgate.MustParseIdentifier("CN=none,DC=x")); dirgate.ErrorCode(err) != dirgate.ENOTFOUND {
		t.Errorf("unknown subject: %v", err)
	}
}

// transitiveFake answers an in-chain listing as AD does: with duplicates and, when a
// cycle leads back, the group itself.
type transitiveFake struct {
	objs  []dirgate.Object
	calls int
}

func (f *transitiveFake) TransitiveMembers(_ context.Context, _ dirgate.Object, _ []string) ([]dirgate.Object, error) {
	f.calls++
	return f.objs, nil
}

func TestListTransitive(t *testing.T) {
	d := newFakeDir("g:group", "a:user", "b:user")
	tr := &transitiveFake{objs: []dirgate.Object{d.objs[guidOf("b")], d.objs[guidOf("g")], d.objs[guidOf("a")], d.objs[guidOf("b")]}}
	s := &dirgate.MemberService{Dir: d, Transitive: tr}
	ctx := context.Background()
	g := dirgate.MustParseIdentifier("CN=g,DC=x")
	got, err := s.List(ctx, dirgate.Principal{}, g, dirgate.ListOptions{IncludeIndirect: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].DisplayName != "a" || got[1].DisplayName != "b" {
		t.Fatalf("transitive listing = %v, want a, b once each, sorted, without g", got)
	}
	// A direct listing never uses the in-chain path.
	if _, err := s.List(ctx, dirgate.Principal{}, g, dirgate.ListOptions{}); err != nil || tr.calls != 1 {
		t.Fatalf("direct listing called the transitive lister (%d calls, err %v)", tr.calls, err)
	}
}

// statusDir is a caching directory whose resolutions were served as st, and which
// counts fresh ones.
type statusDir struct {
	*fakeDir
	st    dirgate.CacheStatus
	fresh int
}

func (d *statusDir) LookupServed(ctx context.Context, id dirgate.Identifier) (dirgate.Object, dirgate.CacheStatus, error) {
	o, err := d.Lookup(ctx, id, nil)
	return o, d.st, err
}

func (d *statusDir) LookupFresh(ctx context.Context, id dirgate.Identifier, props []string) (dirgate.Object, error) {
	d.fresh++
	return d.Lookup(ctx, id, props)
}

// TestListingStatusAndFreshWrites: a listing says the more degraded of how its group's
// resolution and the listing itself were served; writes resolve both sides from the
// directory itself, listings never.
func TestListingStatusAndFreshWrites(t *testing.T) {
	d := &statusDir{fakeDir: nested(), st: dirgate.CacheStale}
	s := &dirgate.MemberService{Dir: d, Listings: fixedLister{[]dirgate.Object{d.objs[guidOf("a")]}}}
	_, l, err := s.ListingFor(context.Background(), dirgate.Principal{}, dirgate.MustParseIdentifier(guidOf("top")), dirgate.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Status != dirgate.CacheStale || d.fresh != 0 {
		t.Errorf("listing status %q after a stale resolution (want stale), %d fresh look-ups (want 0)", l.Status, d.fresh)
	}
	d.st = ""
	if _, l, _ = s.ListingFor(context.Background(), dirgate.Principal{}, dirgate.MustParseIdentifier(guidOf("top")), dirgate.ListOptions{}); l.Status != dirgate.CacheHit {
		t.Errorf("listing status %q, want the lister's hit", l.Status)
	}
	if _, err := s.Remove(context.Background(), dirgate.Principal{}, dirgate.MustParseIdentifier(guidOf("top")), dirgate.MustParseIdentifier(guidOf("a"))); err != nil {
		t.Fatal(err)
	}
	if d.fresh != 2 {
		t.Errorf("a removal made %d fresh look-ups, want 2", d.fresh)
	}
}
