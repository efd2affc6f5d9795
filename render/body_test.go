package render_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/render"
	"github.com/dirgate/dirgate/test/harness/encodedtest"
)

// everyOther is a ViewSelector (and FilterView for List) that lets a caller see the
// objects whose position has the caller's parity, or all for an empty subject. It
// ignores the limit. With kept set, it answers each caller the same Selection every
// time, as the policy does with remembered decisions: the service must not modify it.
type everyOther struct {
	calls, limits []int
	kept          map[int]dirgate.Selection
}

func parity(p dirgate.Principal) int {
	switch p.DN {
	case "":
		return -1
	case "even":
		return 0
	}
	return 1
}

func (a *everyOther) SelectView(_ context.Context, p dirgate.Principal, _ dirgate.Object, _ dirgate.ListOptions, objs []dirgate.Object, limit int) (dirgate.Selection, error) {
	if s, ok := a.kept[parity(p)]; ok && s.Len() == len(objs) {
		return s, nil
	}
	s := dirgate.NewSelection(len(objs))
	if a.kept != nil {
		defer func() { a.kept[parity(p)] = s }()
	}
	for i := range objs {
		if par := parity(p); par < 0 || i%2 == par {
			s.Set(i)
		}
	}
	return s, nil
}

func (a *everyOther) FilterView(ctx context.Context, p dirgate.Principal, g dirgate.Object, o dirgate.ListOptions, objs []dirgate.Object) ([]dirgate.Object, error) {
	var out []dirgate.Object
	for i := range objs {
		if par := parity(p); par < 0 || i%2 == par {
			out = append(out, objs[i])
		}
	}
	return out, nil
}

func (a *everyOther) AllowRemove(context.Context, dirgate.Principal, dirgate.Object, dirgate.Object) error {
	return nil
}

func (a *everyOther) AllowAdd(context.Context, dirgate.Principal, dirgate.Object, dirgate.Object) error {
	return nil
}

func (a *everyOther) AllowView(context.Context, dirgate.Principal, dirgate.Object, dirgate.Object) error {
	return nil
}

// encodedLister serves a listing with its encodings, as the cache does, and reports
// status when set.
type encodedLister struct {
	l      dirgate.Listing
	status dirgate.CacheStatus
}

func (l encodedLister) Listing(ctx context.Context, _ dirgate.Object, _ dirgate.ListOptions) (dirgate.Listing, error) {
	listing := l.l
	listing.Status = l.status
	return listing, nil
}

// A listing read past the cache (bypass) is not found again: its body is rendered for
// the request and not kept.
func TestListBodyBypassNotKept(t *testing.T) {
	d, objs := bigDir(t, 20)
	enc, _ := encodedtest.EncodeListing(objs)
	bodies := render.NewBodyCache(1 << 20)
	id := dirgate.MustParseIdentifier("CN=top,DC=x")
	for _, st := range []dirgate.CacheStatus{dirgate.CacheBypass, dirgate.CacheHit} {
		svc := &dirgate.MemberService{Dir: d, Listings: encodedLister{enc, st}}
		b, _, err := render.NewLister(svc, bodies).ListBody(context.Background(), dirgate.Principal{}, id, dirgate.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if want, _ := json.Marshal(objs); string(b.JSON()) != string(want) {
			t.Fatalf("%s: body differs", st)
		}
		if want := map[dirgate.CacheStatus]int{dirgate.CacheBypass: 0, dirgate.CacheHit: 1}[st]; bodies.Len() != want {
			t.Errorf("after a %s: %d bodies kept, want %d", st, bodies.Len(), want)
		}
	}
}

// bigDir is a directory of one group, CN=top,DC=x, of n users, and its listing.
func bigDir(t *testing.T, n int) (*flatDir, []dirgate.Object) {
	t.Helper()
	d := newFlatDir(n)
	l, err := (&dirgate.MemberService{Dir: d}).Listing(context.Background(), d.top, dirgate.ListOptions{})
	objs := l.Objects
	if err != nil {
		t.Fatal(err)
	}
	return d, objs
}

// ListBody gives exactly List's answer, encoded, whatever serves it: a shared body
// from a listing with encodings, or a rendered one without.
func TestListBodyIsList(t *testing.T) {
	d, objs := bigDir(t, 150)
	enc, err := encodedtest.EncodeListing(objs)
	if err != nil {
		t.Fatal(err)
	}
	type service struct {
		svc    *dirgate.MemberService
		bodies *render.BodyCache
	}
	services := map[string]service{
		"selector, shared":     {&dirgate.MemberService{Dir: d, Listings: encodedLister{l: enc}, Authz: &everyOther{}}, render.NewBodyCache(1 << 20)},
		"selector, not kept":   {&dirgate.MemberService{Dir: d, Listings: encodedLister{l: enc}, Authz: &everyOther{}}, nil},
		"selection shared":     {&dirgate.MemberService{Dir: d, Listings: encodedLister{l: enc}, Authz: &everyOther{kept: map[int]dirgate.Selection{}}}, nil},
		"no authorizer":        {&dirgate.MemberService{Dir: d, Listings: encodedLister{l: enc}}, render.NewBodyCache(1 << 20)},
		"filter only":          {&dirgate.MemberService{Dir: d, Listings: encodedLister{l: enc}, Authz: &hideAuthz{hide: map[string]bool{"m0003": true}}}, render.NewBodyCache(1 << 20)},
		"no encodings":         {&dirgate.MemberService{Dir: d, Authz: &everyOther{}}, render.NewBodyCache(1 << 20)},
		"no encodings, no cap": {&dirgate.MemberService{Dir: d}, nil},
	}
	for name, s := range services {
		svc, lister := s.svc, render.NewLister(s.svc, s.bodies)
		for _, who := range []string{"", "even", "odd"} {
			for _, limit := range []int{0, 1, 2, 70, 75, 76, 149, 150, 151} {
				p := dirgate.Principal{DN: who}
				opts := dirgate.ListOptions{SizeLimit: limit}
				id := dirgate.MustParseIdentifier("CN=top,DC=x")
				want, err := svc.List(context.Background(), p, id, opts)
				if err != nil {
					t.Fatal(err)
				}
				wantJSON, _ := json.Marshal(append([]dirgate.Object{}, want...))
				body, _, err := lister.ListBody(context.Background(), p, id, opts)
				if err != nil {
					t.Fatal(err)
				}
				if string(body.JSON()) != string(wantJSON) {
					t.Fatalf("%s, caller %q, limit %d: body differs from List's answer (%d vs %d bytes)", name, who, limit, len(body.JSON()), len(wantJSON))
				}
			}
		}
	}
}

// Callers who receive the same objects of the same listing share one body; any
// difference in what they receive (decisions, size limit) or in the listing (a new
// fill) is another body.
func TestListBodySharing(t *testing.T) {
	d, objs := bigDir(t, 100)
	enc, _ := encodedtest.EncodeListing(objs)
	bodies := render.NewBodyCache(1 << 20)
	svc := render.NewLister(&dirgate.MemberService{Dir: d, Listings: encodedLister{l: enc}, Authz: &everyOther{}}, bodies)
	id := dirgate.MustParseIdentifier("CN=top,DC=x")
	get := func(who string, limit int) render.Response {
		b, _, err := svc.ListBody(context.Background(), dirgate.Principal{DN: who}, id, dirgate.ListOptions{SizeLimit: limit})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if get("even", 0) != get("even", 0) {
		t.Error("the same caller got two bodies for one listing")
	}
	// Two principals with equal decisions ("odd" and any other DN) share.
	if get("odd", 0) != get("someone else", 0) {
		t.Error("callers with equal decisions got two bodies")
	}
	if get("even", 0) == get("odd", 0) {
		t.Error("callers with different decisions share a body")
	}
	// A size limit that cuts the selection is another body; one beyond it is not.
	if get("even", 10) == get("even", 0) || get("even", 50) != get("even", 0) {
		t.Error("size limit not keyed by the objects it leaves")
	}
	if n := bodies.Len(); n != 3 {
		t.Errorf("%d bodies kept, want 3 (even, odd, even limited to 10)", n)
	}
	// A new fill of the same objects is a new listing: its own bodies.
	enc2, _ := encodedtest.EncodeListing(slices.Clone(objs))
	svc2 := render.NewLister(&dirgate.MemberService{Dir: d, Listings: encodedLister{l: enc2}, Authz: &everyOther{}}, bodies)
	b2, _, err := svc2.ListBody(context.Background(), dirgate.Principal{DN: "even"}, id, dirgate.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b2 == get("even", 0) {
		t.Error("a new listing was served another listing's body")
	}
}

// The cache holds at most its bound, variants included, and a body it dropped still
// serves the request that holds it.
func TestBodyCacheBound(t *testing.T) {
	d, objs := bigDir(t, 100)
	enc, _ := encodedtest.EncodeListing(objs)
	whole, _ := json.Marshal(objs)
	bound := int64(len(whole) * 4) // a body of everything fits, four do not
	bodies := render.NewBodyCache(bound)
	svc := render.NewLister(&dirgate.MemberService{Dir: d, Listings: encodedLister{l: enc}}, bodies)
	id := dirgate.MustParseIdentifier("CN=top,DC=x")
	var kept []render.Response
	for limit := 100; limit > 80; limit-- {
		b, _, err := svc.ListBody(context.Background(), dirgate.Principal{}, id, dirgate.ListOptions{SizeLimit: limit})
		if err != nil {
			t.Fatal(err)
		}
		b.Variant("half", func(j []byte) []byte { return j[:len(j)/2] })
		kept = append(kept, b)
		if bodies.Bytes() > bound {
			t.Fatalf("%d bytes kept, bound %d", bodies.Bytes(), bound)
		}
	}
	if bodies.Len() == 0 || bodies.Len() >= len(kept) {
		t.Errorf("%d bodies kept of %d", bodies.Len(), len(kept))
	}
	if want, _ := json.Marshal(objs); string(kept[0].JSON()) != string(want) {
		t.Error("an evicted body changed")
	}
}

// A variant is made once however many requests ask for it at once.
func TestBodyVariantOnce(t *testing.T) {
	b := render.NewBody([]byte(`[{"a":1}]`))
	var mu sync.Mutex
	made := 0
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			v := b.Variant("x", func(j []byte) []byte {
				mu.Lock()
				made++
				mu.Unlock()
				return append([]byte("x"), j...)
			})
			if string(v) != `x[{"a":1}]` {
				t.Errorf("variant %q", v)
			}
		})
	}
	wg.Wait()
	if made != 1 {
		t.Errorf("variant made %d times", made)
	}
}

// A body says how many of the objects it shows stand for objects that could not be
// asked (dirgate.Object.Unresolved): only those the caller is shown, on both the
// shared path (a selection of the listing's encodings) and the rendered one.
func TestListBodyCountsShownUnresolved(t *testing.T) {
	d, objs := bigDir(t, 20)
	for _, i := range []int{0, 1, 2} {
		objs[i].Unresolved = true
	}
	enc, _ := encodedtest.EncodeListing(objs)
	enc.Objects = objs // EncodeListing's objects are the decoded ones
	plain := dirgate.Listing{Objects: objs}
	id := dirgate.MustParseIdentifier("CN=top,DC=x")
	for _, l := range []dirgate.Listing{enc, plain} {
		lister := render.NewLister(&dirgate.MemberService{Dir: d, Listings: encodedLister{l: l, status: dirgate.CacheBypass}, Authz: &everyOther{}}, nil)
		for who, want := range map[string]int{"even": 2, "odd": 1} {
			b, _, err := lister.ListBody(context.Background(), dirgate.Principal{DN: who}, id, dirgate.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got := 0
			if u, ok := b.(interface{ Unresolved() int }); ok {
				got = u.Unresolved()
			}
			if got != want {
				t.Errorf("encodings %v, caller %s: %d unresolved, want %d", l.Encoded != nil, who, got, want)
			}
		}
	}
}
