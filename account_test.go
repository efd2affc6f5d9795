package dirgate_test

import (
	"context"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
)

func TestAccountStatusRefusal(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *dirgate.Timestamp { return dirgate.NewTimestamp(now.Add(d)) }
	for _, c := range []struct {
		status *dirgate.AccountStatus
		want   string
	}{
		{nil, ""},
		{&dirgate.AccountStatus{}, ""},
		{&dirgate.AccountStatus{ExpirationDate: at(time.Nanosecond * 100)}, ""},
		{&dirgate.AccountStatus{ExpirationDate: at(0)}, dirgate.AccountRefusedExpired},
		{&dirgate.AccountStatus{ExpirationDate: at(-time.Hour)}, dirgate.AccountRefusedExpired},
		{&dirgate.AccountStatus{IsLocked: true}, dirgate.AccountRefusedLocked},
		{&dirgate.AccountStatus{IsDisabled: true, IsLocked: true, ExpirationDate: at(-time.Hour)}, dirgate.AccountRefusedDisabled},
	} {
		if got := c.status.Refusal(now); got != c.want {
			t.Errorf("%+v: %q, want %q", c.status, got, c.want)
		}
	}
	s := &dirgate.AccountStatus{ExpirationDate: at(0)}
	c := s.Clone()
	c.ExpirationDate.Time = now.Add(time.Hour)
	if !s.ExpirationDate.Equal(now) {
		t.Error("a clone shares its expiration date")
	}
}

// cachedStatusDir answers lookups as a cache in front of the directory would: from
// an older resolution unless asked for a fresh one.
type cachedStatusDir struct {
	*fakeDir
	cached, current *dirgate.AccountStatus
}

func (d cachedStatusDir) Lookup(ctx context.Context, id dirgate.Identifier, props []string) (dirgate.Object, error) {
	o, err := d.fakeDir.Lookup(ctx, id, props)
	if err != nil {
		return o, err
	}
	o.AccountStatus = d.cached
	return o, nil
}

func (d cachedStatusDir) LookupServed(ctx context.Context, id dirgate.Identifier) (dirgate.Object, dirgate.CacheStatus, error) {
	o, err := d.Lookup(ctx, id, nil)
	return o, dirgate.CacheHit, err
}

func (d cachedStatusDir) LookupFresh(ctx context.Context, id dirgate.Identifier, props []string) (dirgate.Object, error) {
	o, err := d.fakeDir.Lookup(ctx, id, props)
	o.AccountStatus = d.current
	return o, err
}

// TestPrincipalAccountStatus: a principal carries its account's status as the
// directory has it now, never a cached resolution's, and not shared with it.
func TestPrincipalAccountStatus(t *testing.T) {
	dir := cachedStatusDir{fakeDir: nested(), cached: &dirgate.AccountStatus{}, current: &dirgate.AccountStatus{IsDisabled: true}}
	s := &dirgate.MemberService{Dir: dir}
	p, err := s.Principal(context.Background(), dirgate.MustParseIdentifier("CN=B2,DC=x"))
	if err != nil {
		t.Fatal(err)
	}
	if p.AccountStatus == nil || !p.AccountStatus.IsDisabled {
		t.Fatalf("principal's account status %+v, want the directory's current one (disabled)", p.AccountStatus)
	}
	if p.AccountStatus == dir.current {
		t.Error("the principal shares the object's status")
	}
}
