package session

import (
	"context"
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/redis/go-redis/v9"
)

// TestServiceAccountStateRefusals: an account whose password the checker accepted
// but whose principal is refused for its state (tokenfile.File: disabled, locked
// out, expired) gets the refusal AD gives for that state, before the sign-in rule is
// asked or anything is stored; a signed-in token of such an account is refused as
// unknown.
func TestServiceAccountStateRefusals(t *testing.T) {
	backends(t, func(t *testing.T, b Backend, raw *redis.Client) {
		ctx := context.Background()
		for state, reason := range map[string]string{
			dirgate.AccountRefusedDisabled: dirgate.ReasonAccountDisabled,
			dirgate.AccountRefusedLocked:   dirgate.ReasonAccountLockedOut,
			dirgate.AccountRefusedExpired:  dirgate.ReasonAccountExpired,
			"some state not known yet":     dirgate.ReasonAccessDenied,
		} {
			f := newFixture(t, b, raw)
			_, tok := f.signIn(t, "dana.admin@corp.example.com", "Right-1")
			refused := &dirgate.Error{Code: dirgate.EUNAUTHENTICATED, Message: errUnauthenticated.Message,
				Err: &dirgate.AccountRefusedError{GUID: danaGUID, Reason: state}}
			f.resolver.setErr(refused)
			before := f.records(t)
			_, err := f.svc.CreateSession(ctx, signInName(t, "dana.admin@corp.example.com"), "Right-1")
			wantRefusal(t, state, err, reason)
			if len(f.policy.seen) != 1 || f.records(t) != before {
				t.Errorf("%s: policy asked %d times (1 for the first sign-in), %d records stored, want %d", state, len(f.policy.seen), f.records(t), before)
			}
			_, err = f.svc.Authenticate(ctx, tok.Token)
			wantCode(t, state+": signed-in token", err, dirgate.EUNAUTHENTICATED)
		}
	})
}
