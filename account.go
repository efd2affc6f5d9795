package dirgate

import (
	"fmt"
	"time"
)

// Why an account may not act (AccountStatus.Refusal, docs/auth.md).
const (
	AccountRefusedDisabled = "disabled"
	AccountRefusedLocked   = "locked out"
	AccountRefusedExpired  = "expired"
)

// Refusal returns why the account in state s may not act at now: disabled, locked
// out (the DC's computed bit: locked now, not merely once), or expired
// (accountExpires at or before now: no computed bit says so, the clock does). ""
// means it may; so does a nil status, which objects that are not accounts have.
func (s *AccountStatus) Refusal(now time.Time) string {
	switch {
	case s == nil:
		return ""
	case s.IsDisabled:
		return AccountRefusedDisabled
	case s.IsLocked:
		return AccountRefusedLocked
	case s.ExpirationDate != nil && !now.Before(s.ExpirationDate.Time):
		return AccountRefusedExpired
	}
	return ""
}

// Clone returns a copy of s that shares nothing with it (nil for nil).
func (s *AccountStatus) Clone() *AccountStatus {
	if s == nil {
		return nil
	}
	c := *s
	if s.ExpirationDate != nil {
		c.ExpirationDate = NewTimestamp(s.ExpirationDate.Time)
	}
	return &c
}

// AccountRefusedError says that a token was refused because of its account's
// state; an authenticator wraps it in its EUNAUTHENTICATED error, so that the
// client sees an unknown token and the sign-in flow can name the state.
type AccountRefusedError struct {
	GUID   string // the account's
	Reason string // one of the AccountRefused* values
}

func (e *AccountRefusedError) Error() string {
	return fmt.Sprintf("account %s is %s", e.GUID, e.Reason)
}
