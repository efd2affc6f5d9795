package tokenfile

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
)

const accountGUID = "0f8fad5b-d9cb-469f-a165-70867728950e"

// statusResolver resolves any subject to one account whose state the test sets.
type statusResolver struct {
	mu     sync.Mutex
	status *dirgate.AccountStatus
	err    error
	calls  int
}

func (r *statusResolver) set(s *dirgate.AccountStatus, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status, r.err = s, err
}

func (r *statusResolver) Principal(context.Context, dirgate.Identifier) (dirgate.Principal, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.err != nil {
		return dirgate.Principal{}, r.err
	}
	return dirgate.Principal{DN: adminDN, GUID: accountGUID, Groups: []dirgate.GroupRef{}, AccountStatus: r.status.Clone()}, nil
}

func openWithStatus(t *testing.T, r *statusResolver, ttl time.Duration, log *bytes.Buffer) (*File, *time.Time) {
	t.Helper()
	f, err := Open(Config{Data: []byte("- token: secret-token-value\n  subject: " + adminDN + "\n"), Resolver: r,
		Logger: slog.New(slog.NewTextHandler(log, nil)), PrincipalTTL: ttl, PrincipalMaxStale: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	f.now = func() time.Time { return now }
	return f, &now
}

// refused checks that the token is answered as unknown because of reason.
func refused(t *testing.T, f *File, reason string) {
	t.Helper()
	_, err := f.Authenticate(context.Background(), "secret-token-value")
	var ae *dirgate.AccountRefusedError
	if dirgate.ErrorCode(err) != dirgate.EUNAUTHENTICATED || !errors.As(err, &ae) || ae.Reason != reason || ae.GUID != accountGUID {
		t.Fatalf("got %v, want EUNAUTHENTICATED for an account %s", err, reason)
	}
	if msg := dirgate.ErrorMessage(err); msg != errUnknown.Message {
		t.Errorf("message %q, want the unknown token's", msg)
	}
}

func accepted(t *testing.T, f *File) {
	t.Helper()
	if p, err := f.Authenticate(context.Background(), "secret-token-value"); err != nil || p.GUID != accountGUID {
		t.Fatalf("got %+v, %v; want the account's principal", p, err)
	}
}

// TestAccountStateRefusesToken: a token whose account is disabled, locked out or
// expired is refused as an unknown token, with a warning naming the account and the
// reason, never the token; an account in order, one expiring later, and a subject
// that is not an account are accepted.
func TestAccountStateRefusesToken(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name   string
		status *dirgate.AccountStatus
		reason string
	}{
		{"in order", &dirgate.AccountStatus{}, ""},
		{"expires later", &dirgate.AccountStatus{ExpirationDate: dirgate.NewTimestamp(now.Add(time.Second))}, ""},
		{"not an account", nil, ""},
		{"disabled", &dirgate.AccountStatus{IsDisabled: true}, dirgate.AccountRefusedDisabled},
		{"locked out", &dirgate.AccountStatus{IsLocked: true}, dirgate.AccountRefusedLocked},
		{"expired", &dirgate.AccountStatus{ExpirationDate: dirgate.NewTimestamp(now.Add(-time.Second))}, dirgate.AccountRefusedExpired},
		{"expires now", &dirgate.AccountStatus{ExpirationDate: dirgate.NewTimestamp(now)}, dirgate.AccountRefusedExpired},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &statusResolver{status: c.status}
			var log bytes.Buffer
			f, _ := openWithStatus(t, r, time.Minute, &log)
			if c.reason == "" {
				accepted(t, f)
				if strings.Contains(log.String(), "token refused") {
					t.Errorf("log: %s", log.String())
				}
				return
			}
			refused(t, f, c.reason)
			refused(t, f, c.reason) // from the cache as well
			if r.calls != 1 {
				t.Errorf("%d directory reads for a refused account, want 1 (the principal is kept for its TTL)", r.calls)
			}
			l := log.String()
			if !strings.Contains(l, "level=WARN msg=\"token refused") || !strings.Contains(l, "account="+accountGUID) ||
				!strings.Contains(l, `reason="`+c.reason+`"`) && !strings.Contains(l, "reason="+c.reason) {
				t.Errorf("log does not name the account and the reason: %s", l)
			}
			if strings.Contains(l, "secret-token-value") {
				t.Errorf("the log holds the token: %s", l)
			}
		})
	}
}

// TestAccountStateRefreshBound: a change of the account's state reaches its token
// when the principal is resolved again: after PrincipalTTL, or at once when the
// change feed expires it; an expiry date passes at its time, without any read.
func TestAccountStateRefreshBound(t *testing.T) {
	r := &statusResolver{status: &dirgate.AccountStatus{}}
	var log bytes.Buffer
	f, now := openWithStatus(t, r, 10*time.Second, &log)
	accepted(t, f)
	r.set(&dirgate.AccountStatus{IsDisabled: true}, nil)
	*now = now.Add(9 * time.Second)
	accepted(t, f) // within the bound the principal resolved before stands
	*now = now.Add(time.Second)
	refused(t, f, dirgate.AccountRefusedDisabled)

	// The change feed: re-enabled, then locked, each seen at the next request.
	r.set(&dirgate.AccountStatus{}, nil)
	f.Expire(func(p dirgate.Principal) bool { return p.GUID == accountGUID })
	accepted(t, f)
	r.set(&dirgate.AccountStatus{IsLocked: true}, nil)
	f.Expire(func(p dirgate.Principal) bool { return p.GUID == accountGUID })
	refused(t, f, dirgate.AccountRefusedLocked)

	// An expiry date inside the cached principal's lifetime.
	r.set(&dirgate.AccountStatus{ExpirationDate: dirgate.NewTimestamp(now.Add(3 * time.Second))}, nil)
	f.Expire(func(dirgate.Principal) bool { return true })
	accepted(t, f)
	calls := r.calls
	*now = now.Add(3 * time.Second)
	refused(t, f, dirgate.AccountRefusedExpired)
	if r.calls != calls {
		t.Errorf("the expiry was found by a directory read, not from the principal's state")
	}
}

// TestAccountStateDuringOutage: while the directory fails, the last state known
// decides: an account last seen disabled stays refused (not served stale, not a
// 5xx), one last seen in order is served, and one whose expiry date passes during
// the outage is refused.
func TestAccountStateDuringOutage(t *testing.T) {
	down := dirgate.WrapError(dirgate.EUNAVAILABLE, "", errors.New("breaker open"))
	r := &statusResolver{status: &dirgate.AccountStatus{IsDisabled: true}}
	var log bytes.Buffer
	f, now := openWithStatus(t, r, time.Minute, &log)
	refused(t, f, dirgate.AccountRefusedDisabled)
	r.set(nil, down)
	*now = now.Add(2 * time.Minute)
	refused(t, f, dirgate.AccountRefusedDisabled)

	r = &statusResolver{}
	f, now = openWithStatus(t, r, time.Minute, &log)
	r.set(&dirgate.AccountStatus{ExpirationDate: dirgate.NewTimestamp(now.Add(5 * time.Minute))}, nil)
	accepted(t, f)
	r.set(nil, down)
	*now = now.Add(2 * time.Minute)
	accepted(t, f) // the last principal stands in
	*now = now.Add(3 * time.Minute)
	refused(t, f, dirgate.AccountRefusedExpired)
}
