package breaker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
)

// fakeDir answers every call with the error its test sets and counts the calls, so a
// test can tell whether the breaker reached it.
type fakeDir struct {
	mu    sync.Mutex
	err   error
	calls int
}

func (f *fakeDir) set(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

func (f *fakeDir) result() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return f.err
}

func (f *fakeDir) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func (f *fakeDir) Lookup(ctx context.Context, id dirgate.Identifier, props []string) (dirgate.Object, error) {
	if err := f.result(); err != nil {
		return dirgate.Object{}, err
	}
	return dirgate.Object{GUID: "g", DN: id.String()}, nil
}

func (f *fakeDir) Members(ctx context.Context, group dirgate.Object, props []string) ([]dirgate.Object, error) {
	if err := f.result(); err != nil {
		return nil, err
	}
	return []dirgate.Object{{GUID: "m1"}, {GUID: "m2"}}, nil
}

func (f *fakeDir) MemberOf(ctx context.Context, obj dirgate.Object) ([]dirgate.Object, error) {
	if err := f.result(); err != nil {
		return nil, err
	}
	return []dirgate.Object{{GUID: "g1"}}, nil
}

func (f *fakeDir) RemoveMember(ctx context.Context, group, member dirgate.Object) error {
	return f.result()
}

func (f *fakeDir) AddMember(ctx context.Context, group, member dirgate.Object) error {
	return f.result()
}

var (
	errUpstream = dirgate.WrapError(dirgate.EUPSTREAM, "The directory could not complete the request.", errors.New("ldap: connection refused"))
	errTimeout  = dirgate.WrapError(dirgate.ETIMEOUT, "The directory did not answer in time.", context.DeadlineExceeded)
)

var testID = dirgate.MustParseIdentifier("CN=x,DC=corp,DC=example,DC=com")

func TestIsInfrastructureFailure(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		// The two codes that describe a failing directory.
		{"upstream", errUpstream, true},
		{"timeout", errTimeout, true},
		{"wrapped upstream", fmt.Errorf("members of x: %w", errUpstream), true},
		// An uncoded deadline is classified as ETIMEOUT by dirgate.ErrorCode.
		{"bare deadline", context.DeadlineExceeded, true},
		// Answers from a working directory.
		{"nil", nil, false},
		{"not found", dirgate.Errorf(dirgate.ENOTFOUND, "not found"), false},
		{"invalid", dirgate.Errorf(dirgate.EINVALID, "bad"), false},
		{"forbidden", dirgate.Errorf(dirgate.EFORBIDDEN, "no"), false},
		{"not member", fmt.Errorf("remove: %w", dirgate.ErrNotMember), false},
		{"primary group", fmt.Errorf("remove: %w", dirgate.ErrPrimaryGroup), false},
		// A sentinel inside an error an adapter coded EUPSTREAM is still an answer.
		{"coded not member", dirgate.WrapError(dirgate.EUPSTREAM, "x", dirgate.ErrNotMember), false},
		// The client went away: no verdict on the directory.
		{"canceled", context.Canceled, false},
		// An open inner breaker is not the directory failing again.
		{"unavailable", dirgate.Errorf(dirgate.EUNAVAILABLE, "open"), false},
		// A bug is not the directory's fault.
		{"internal", errors.New("boom"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsInfrastructureFailure(tt.err); got != tt.want {
				t.Errorf("IsInfrastructureFailure(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// TestTrips checks that each infrastructure code opens the breaker after the threshold
// and that an open breaker answers EUNAVAILABLE without calling the directory.
func TestTrips(t *testing.T) {
	for _, failure := range []error{errUpstream, errTimeout} {
		t.Run(dirgate.ErrorCode(failure), func(t *testing.T) {
			f := &fakeDir{err: failure}
			d := New(f, Settings{FailureThreshold: 3, OpenTimeout: time.Hour})
			for i := 0; i < 3; i++ {
				if _, err := d.Lookup(context.Background(), testID, nil); dirgate.ErrorCode(err) != dirgate.ErrorCode(failure) {
					t.Fatalf("call %d: err = %v, want the inner error", i, err)
				}
			}
			if got := d.State(); got != StateOpen {
				t.Fatalf("State() = %v after 3 failures, want open", got)
			}
			calls := f.count()
			_, err := d.Members(context.Background(), dirgate.Object{}, nil)
			if got := dirgate.ErrorCode(err); got != dirgate.EUNAVAILABLE {
				t.Fatalf("open breaker: code = %q (%v), want %q", got, err, dirgate.EUNAVAILABLE)
			}
			if dirgate.ErrorMessage(err) == "" || errors.Is(err, failure) {
				t.Errorf("open breaker error %v: want a generic message and no inner detail", err)
			}
			if f.count() != calls {
				t.Errorf("open breaker called the directory")
			}
		})
	}
}

// TestAnswersDoNotTrip: a run of "not found", "invalid", "forbidden", removal
// sentinels and cancellations, far longer than the threshold, leaves it closed, and a
// success between failures resets the consecutive count.
func TestAnswersDoNotTrip(t *testing.T) {
	answers := []error{
		dirgate.Errorf(dirgate.ENOTFOUND, "not found"),
		dirgate.Errorf(dirgate.EINVALID, "bad"),
		dirgate.Errorf(dirgate.EFORBIDDEN, "no"),
		fmt.Errorf("x: %w", dirgate.ErrNotMember),
		fmt.Errorf("x: %w", dirgate.ErrPrimaryGroup),
		dirgate.WrapError(dirgate.ECANCELED, "gone", context.Canceled),
	}
	f := &fakeDir{}
	d := New(f, Settings{FailureThreshold: 2, OpenTimeout: time.Hour})
	for i := 0; i < 5; i++ {
		for _, a := range answers {
			f.set(a)
			if err := d.RemoveMember(context.Background(), dirgate.Object{}, dirgate.Object{}); !errors.Is(err, a) {
				t.Fatalf("err = %v, want the inner answer %v unchanged", err, a)
			}
		}
	}
	// failure, answer, failure: never two consecutive failures.
	for _, e := range []error{errUpstream, dirgate.Errorf(dirgate.ENOTFOUND, "x"), errUpstream} {
		f.set(e)
		_, _ = d.MemberOf(context.Background(), dirgate.Object{})
	}
	if got := d.State(); got != StateClosed {
		t.Fatalf("State() = %v, want closed", got)
	}
}

// TestHalfOpenRecovery walks the whole cycle: open, half-open after the timeout, a
// failed probe reopens, a successful probe closes. The open timeout is tiny and the
// test polls State, so it asserts no durations.
func TestHalfOpenRecovery(t *testing.T) {
	var mu sync.Mutex
	var transitions []string
	f := &fakeDir{err: errUpstream}
	d := New(f, Settings{
		Name:             "test",
		FailureThreshold: 1,
		OpenTimeout:      time.Millisecond,
		OnStateChange: func(name string, from, to State) {
			mu.Lock()
			defer mu.Unlock()
			transitions = append(transitions, fmt.Sprintf("%s:%v->%v", name, from, to))
		},
	})
	_, _ = d.Lookup(context.Background(), testID, nil)
	waitHalfOpen(t, d)
	// A failed probe opens it again.
	if _, err := d.Lookup(context.Background(), testID, nil); !errors.Is(err, errUpstream) {
		t.Fatalf("probe err = %v, want the inner error", err)
	}
	waitHalfOpen(t, d)
	f.set(nil)
	ms, err := d.Members(context.Background(), dirgate.Object{}, nil)
	if err != nil || len(ms) != 2 {
		t.Fatalf("probe = %v, %v; want the inner result", ms, err)
	}
	if got := d.State(); got != StateClosed {
		t.Fatalf("State() = %v after a good probe, want closed", got)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{
		"test:closed->open", "test:open->half-open", "test:half-open->open",
		"test:open->half-open", "test:half-open->closed",
	}
	if fmt.Sprint(transitions) != fmt.Sprint(want) {
		t.Errorf("transitions = %v, want %v", transitions, want)
	}
}

// TestHalfOpenLimit: while the single probe is in flight, other requests get
// EUNAVAILABLE without reaching the directory.
func TestHalfOpenLimit(t *testing.T) {
	f := &fakeDir{err: errUpstream}
	block := make(chan struct{})
	entered := make(chan struct{})
	slow := &blockingDir{fakeDir: f, entered: entered, block: block}
	d := New(slow, Settings{FailureThreshold: 1, OpenTimeout: time.Millisecond, HalfOpenMaxRequests: 1})
	_, _ = d.Lookup(context.Background(), testID, nil) // trips; blockingDir only blocks MemberOf
	waitHalfOpen(t, d)
	f.set(nil)
	done := make(chan error)
	go func() {
		_, err := d.MemberOf(context.Background(), dirgate.Object{})
		done <- err
	}()
	<-entered
	calls := f.count()
	if _, err := d.Lookup(context.Background(), testID, nil); dirgate.ErrorCode(err) != dirgate.EUNAVAILABLE {
		t.Fatalf("second request while probing: err = %v, want EUNAVAILABLE", err)
	}
	if f.count() != calls {
		t.Errorf("second request reached the directory")
	}
	close(block)
	if err := <-done; err != nil {
		t.Fatalf("probe: %v", err)
	}
	if got := d.State(); got != StateClosed {
		t.Fatalf("State() = %v, want closed", got)
	}
}

// TestCanceledProbeFreesSlot: a probe whose client went away is excluded, so the
// breaker does not stay half-open with its only slot taken.
func TestCanceledProbeFreesSlot(t *testing.T) {
	f := &fakeDir{err: errUpstream}
	d := New(f, Settings{FailureThreshold: 1, OpenTimeout: time.Millisecond})
	_, _ = d.Lookup(context.Background(), testID, nil)
	waitHalfOpen(t, d)
	f.set(dirgate.WrapError(dirgate.ECANCELED, "gone", context.Canceled))
	_, _ = d.Lookup(context.Background(), testID, nil)
	if got := d.State(); got != StateHalfOpen {
		t.Fatalf("State() = %v after a canceled probe, want half-open", got)
	}
	f.set(nil)
	if _, err := d.Lookup(context.Background(), testID, nil); err != nil {
		t.Fatalf("next probe: err = %v, want it to reach the directory", err)
	}
	if got := d.State(); got != StateClosed {
		t.Fatalf("State() = %v, want closed", got)
	}
}

// TestPanicFreesSlot: a probe that panics re-panics to its caller and still ends its
// half-open slot (gobreaker reports it as a non-infrastructure error), so the next
// probe reaches the directory instead of the breaker staying stuck half-open.
func TestPanicFreesSlot(t *testing.T) {
	p := &panicDir{fakeDir: fakeDir{err: errUpstream}, panics: true}
	d := New(p, Settings{FailureThreshold: 1, OpenTimeout: time.Millisecond})
	p.panics = false
	_, _ = d.Lookup(context.Background(), testID, nil) // trips
	waitHalfOpen(t, d)
	p.panics = true
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("panic was swallowed")
			}
		}()
		_, _ = d.Lookup(context.Background(), testID, nil)
	}()
	p.panics = false
	p.set(nil)
	if _, err := d.Lookup(context.Background(), testID, nil); err != nil {
		t.Fatalf("probe after panic: %v", err)
	}
	if got := d.State(); got != StateClosed {
		t.Fatalf("State() = %v, want closed", got)
	}
}

func TestDefaults(t *testing.T) {
	d := New(&fakeDir{err: errUpstream}, Settings{})
	for i := 0; i < DefaultFailureThreshold-1; i++ {
		_, _ = d.Lookup(context.Background(), testID, nil)
	}
	if got := d.State(); got != StateClosed {
		t.Fatalf("State() = %v after %d failures, want closed", got, DefaultFailureThreshold-1)
	}
	_, _ = d.Lookup(context.Background(), testID, nil)
	if got := d.State(); got != StateOpen {
		t.Fatalf("State() = %v after %d failures, want open", got, DefaultFailureThreshold)
	}
}

func TestStateString(t *testing.T) {
	for s, want := range map[State]string{StateClosed: "closed", StateHalfOpen: "half-open", StateOpen: "open", State(9): "state(9)"} {
		if got := s.String(); got != want {
			t.Errorf("State(%d).String() = %q, want %q", int(s), got, want)
		}
	}
}

// waitHalfOpen polls until the open timeout has passed; State performs the
// open -> half-open transition itself.
func waitHalfOpen(t *testing.T, d *Directory) {
	t.Helper()
	for d.State() != StateHalfOpen {
		if d.State() == StateClosed {
			t.Fatal("breaker closed while waiting for half-open")
		}
		time.Sleep(time.Millisecond)
	}
}

type blockingDir struct {
	*fakeDir
	entered chan struct{}
	block   chan struct{}
}

func (b *blockingDir) MemberOf(ctx context.Context, obj dirgate.Object) ([]dirgate.Object, error) {
	close(b.entered)
	<-b.block
	return b.fakeDir.MemberOf(ctx, obj)
}

// panicDir panics in Lookup while panics is set (only the test goroutine touches it).
type panicDir struct {
	fakeDir
	panics bool
}

func (p *panicDir) Lookup(ctx context.Context, id dirgate.Identifier, props []string) (dirgate.Object, error) {
	if p.panics {
		panic("boom")
	}
	return p.fakeDir.Lookup(ctx, id, props)
}

type transitiveDir struct {
	fakeDir
}

func (f *transitiveDir) TransitiveMembers(ctx context.Context, group dirgate.Object, props []string) ([]dirgate.Object, error) {
	if err := f.result(); err != nil {
		return nil, err
	}
	return []dirgate.Object{{GUID: "t1"}}, nil
}

func TestTransitiveMembersThroughBreaker(t *testing.T) {
	inner := &transitiveDir{}
	b := New(inner, Settings{FailureThreshold: 1, OpenTimeout: time.Hour})
	objs, err := b.TransitiveMembers(context.Background(), dirgate.Object{}, nil)
	if err != nil || len(objs) != 1 {
		t.Fatalf("pass-through: %v %v", objs, err)
	}
	// It counts like any other call: a failure opens the breaker for all of them.
	inner.set(errUpstream)
	b.TransitiveMembers(context.Background(), dirgate.Object{}, nil)
	if _, err := b.Members(context.Background(), dirgate.Object{}, nil); dirgate.ErrorCode(err) != dirgate.EUNAVAILABLE {
		t.Fatalf("after a failed transitive listing, Members gave %v, want the open breaker", err)
	}
	// An upstream without the capability is a wiring bug, not an outage.
	_, err = New(&fakeDir{}, Settings{}).TransitiveMembers(context.Background(), dirgate.Object{}, nil)
	if dirgate.ErrorCode(err) != dirgate.EINTERNAL {
		t.Fatalf("without the capability: %v", err)
	}
}

type foreignDir struct {
	fakeDir
	sids []string
}

func (f *foreignDir) AddForeignMember(ctx context.Context, group dirgate.Object, sid dirgate.Identifier) error {
	f.sids = append(f.sids, sid.Canonical())
	return f.result()
}

// TestAddForeignMemberThroughBreaker: an addition by SID reaches an inner directory
// that makes it and counts as any call; one that cannot says so with
// errors.ErrUnsupported, for the router to add the member otherwise.
func TestAddForeignMemberThroughBreaker(t *testing.T) {
	inner := &foreignDir{}
	b := New(inner, Settings{FailureThreshold: 1, OpenTimeout: time.Hour})
	sid := dirgate.MustParseIdentifier("S-1-5-21-7-8-9-1105")
	if err := b.AddForeignMember(context.Background(), dirgate.Object{}, sid); err != nil || len(inner.sids) != 1 || inner.sids[0] != sid.Canonical() {
		t.Fatalf("pass-through: %v, inner got %q", err, inner.sids)
	}
	inner.set(errUpstream)
	b.AddForeignMember(context.Background(), dirgate.Object{}, sid)
	if _, err := b.Members(context.Background(), dirgate.Object{}, nil); dirgate.ErrorCode(err) != dirgate.EUNAVAILABLE {
		t.Fatalf("after a failed addition by SID, Members gave %v, want the open breaker", err)
	}
	err := New(&fakeDir{}, Settings{}).AddForeignMember(context.Background(), dirgate.Object{}, sid)
	if !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("without the capability: %v, want errors.ErrUnsupported", err)
	}
}

type forestDir struct {
	fakeDir
	dns []string
}

func (f *forestDir) GroupsHolding(ctx context.Context, dns []dirgate.DN) ([]dirgate.Object, error) {
	for _, dn := range dns {
		f.dns = append(f.dns, dn.String())
	}
	if err := f.result(); err != nil {
		return nil, err
	}
	return []dirgate.Object{{GUID: "g1"}}, nil
}

// TestGroupsHoldingThroughBreaker: a search for the groups holding an object of the
// forest reaches an inner directory that makes it and counts as any call; one that
// cannot says so with errors.ErrUnsupported, for the router to take it as holding
// none.
func TestGroupsHoldingThroughBreaker(t *testing.T) {
	inner := &forestDir{}
	b := New(inner, Settings{FailureThreshold: 1, OpenTimeout: time.Hour})
	dn := dirgate.MustParseDN("CN=User,DC=emea,DC=corp,DC=example,DC=com")
	gs, err := b.GroupsHolding(context.Background(), []dirgate.DN{dn})
	if err != nil || len(gs) != 1 || gs[0].GUID != "g1" || len(inner.dns) != 1 || inner.dns[0] != dn.String() {
		t.Fatalf("pass-through: %v, %v, inner got %q", gs, err, inner.dns)
	}
	inner.set(errUpstream)
	b.GroupsHolding(context.Background(), []dirgate.DN{dn})
	if _, err := b.Members(context.Background(), dirgate.Object{}, nil); dirgate.ErrorCode(err) != dirgate.EUNAVAILABLE {
		t.Fatalf("after a failed search for the groups holding an object, Members gave %v, want the open breaker", err)
	}
	if _, err := b.GroupsHolding(context.Background(), []dirgate.DN{dn}); dirgate.ErrorCode(err) != dirgate.EUNAVAILABLE || len(inner.dns) != 2 {
		t.Fatalf("open breaker: %v, inner asked %d times, want EUNAVAILABLE and no call", err, len(inner.dns))
	}
	if _, err := New(&fakeDir{}, Settings{}).GroupsHolding(context.Background(), []dirgate.DN{dn}); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("without the capability: %v, want errors.ErrUnsupported", err)
	}
}
