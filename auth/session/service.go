package session

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/dirgate/dirgate"
)

// Resolver turns a subject into a principal through the shared principal cache
// (*tokenfile.File).
type Resolver interface {
	Principal(ctx context.Context, subject dirgate.Identifier) (dirgate.Principal, error)
}

// Service is the sign-in flow: it checks credentials, keeps sessions and tokens in
// the Store, and authenticates requests, its own tokens first and then the tokens
// file's (Fallback).
type Service struct {
	Store      *Store
	Checker    dirgate.CredentialChecker
	Principals Resolver
	Fallback   dirgate.Authenticator
	// Policy, when set, may refuse an account with valid credentials
	// (*policy.Authorizer: the optional sign-in rule). A refusal is accessDenied.
	Policy SignInPolicy
}

// SignInPolicy decides whether a signed-in principal may have a session; an
// EFORBIDDEN error refuses it.
type SignInPolicy interface {
	AllowSignIn(ctx context.Context, p dirgate.Principal) error
}

var _ dirgate.Authenticator = (*Service)(nil)

// errUnauthenticated is the answer to an unknown, expired or revoked token or
// session id; the proxy shows the product's message whatever this one says.
var errUnauthenticated = &dirgate.Error{Code: dirgate.EUNAUTHENTICATED, Message: "The provided authentication token is either expired or invalid."}

// storeDown codes a backend failure: the caller may retry (503), never 401, which
// would make a client throw away a valid token.
func storeDown(err error) error {
	return dirgate.WrapError(dirgate.EUNAVAILABLE, "", err)
}

// CreateSession checks the password and opens a session. A right password that
// must be changed opens a session that cannot be exchanged (its
// ChangePasswordReason says why); any other refusal is the *dirgate.SignInError.
// The account must also resolve to a principal: the check that the directory
// serves it now, rather than at the first request.
func (s *Service) CreateSession(ctx context.Context, name dirgate.SignInName, password string) (dirgate.SignInSession, error) {
	subject, err := s.Checker.CheckPassword(ctx, name, password)
	reason := 0
	var se *dirgate.SignInError
	switch {
	case errors.As(err, &se) && se.PasswordChangeReason() != 0:
		// A session that can never be exchanged; still, an account the sign-in rule
		// refuses must not learn that its password is right. A checker that does
		// not name the account leaves nothing to ask about.
		reason = se.PasswordChangeReason()
		if !subject.IsZero() {
			if err := s.admit(ctx, subject); err != nil {
				return dirgate.SignInSession{}, err
			}
		}
	case err != nil:
		return dirgate.SignInSession{}, fmt.Errorf("check password: %w", err)
	default:
		if err := s.admit(ctx, subject); err != nil {
			return dirgate.SignInSession{}, err
		}
	}
	ses, err := s.Store.CreateSession(ctx, subject.Canonical(), reason)
	switch {
	case errors.Is(err, ErrAccountFull):
		return dirgate.SignInSession{}, dirgate.WrapError(dirgate.ETOOMANY,
			"Too many live sessions and tokens for this account; sign out elsewhere or wait for them to expire.", err)
	case err != nil:
		return dirgate.SignInSession{}, storeDown(err)
	}
	return dirgate.SignInSession{ID: ses.ID, ChangePasswordReason: reason, Expires: ses.Expires}, nil
}

// admit resolves the account to a principal and asks the sign-in rule about it: an
// account the directory does not serve, or that the rule refuses, is accessDenied.
func (s *Service) admit(ctx context.Context, subject dirgate.Identifier) error {
	p, err := s.Principals.Principal(ctx, subject)
	if err != nil {
		var refused *dirgate.AccountRefusedError
		if errors.As(err, &refused) {
			// The password was right, so the account's state may be told, as AD
			// tells it (docs/auth.md); the directory's bind usually refuses first.
			reason, ok := accountRefusalReasons[refused.Reason]
			if !ok {
				reason = dirgate.ReasonAccessDenied
			}
			return &dirgate.SignInError{Reason: reason, Err: err}
		}
		if dirgate.ErrorCode(err) == dirgate.EUNAUTHENTICATED {
			return &dirgate.SignInError{Reason: dirgate.ReasonAccessDenied, Err: err}
		}
		return fmt.Errorf("resolve the signed-in account: %w", err)
	}
	if s.Policy != nil {
		if err := s.Policy.AllowSignIn(ctx, p); err != nil {
			if dirgate.ErrorCode(err) == dirgate.EFORBIDDEN {
				return &dirgate.SignInError{Reason: dirgate.ReasonAccessDenied, Err: err}
			}
			return fmt.Errorf("sign-in rule: %w", err)
		}
	}
	return nil
}

// accountRefusalReasons are the sign-in answers for an account the principal
// refuses.
var accountRefusalReasons = map[string]string{
	dirgate.AccountRefusedDisabled: dirgate.ReasonAccountDisabled,
	dirgate.AccountRefusedLocked:   dirgate.ReasonAccountLockedOut,
	dirgate.AccountRefusedExpired:  dirgate.ReasonAccountExpired,
}

// Exchange turns a session into a token, once.
func (s *Service) Exchange(ctx context.Context, sessionID string) (dirgate.SignInToken, error) {
	ses, tok, err := s.Store.Exchange(ctx, sessionID)
	switch {
	case errors.Is(err, ErrUnknown):
		return dirgate.SignInToken{}, errUnauthenticated
	case err != nil:
		return dirgate.SignInToken{}, storeDown(err)
	case ses.ChangePasswordReason != 0:
		return dirgate.SignInToken{}, &dirgate.SignInError{Reason: dirgate.ReasonPasswordChange}
	}
	return dirgate.SignInToken{Token: tok.Token, Expires: tok.Expires}, nil
}

// RevokeToken ends a token on every replica sharing the store.
func (s *Service) RevokeToken(ctx context.Context, token string) error {
	if err := s.Store.RevokeToken(ctx, token); err != nil {
		return storeDown(err)
	}
	return nil
}

// EndSession ends a session and the token it gave.
func (s *Service) EndSession(ctx context.Context, id string) error {
	if err := s.Store.EndSession(ctx, id); err != nil {
		return storeDown(err)
	}
	return nil
}

// Authenticate returns the principal of a signed-in token (TokenPrefix) or, for any
// other token, asks Fallback (the tokens file). A signed-in principal comes from
// the same cache as a tokens-file one.
func (s *Service) Authenticate(ctx context.Context, token string) (dirgate.Principal, error) {
	if !strings.HasPrefix(token, TokenPrefix) {
		if s.Fallback == nil {
			return dirgate.Principal{}, errUnauthenticated
		}
		return s.Fallback.Authenticate(ctx, token)
	}
	tok, err := s.Store.Lookup(ctx, token)
	switch {
	case errors.Is(err, ErrUnknown):
		return dirgate.Principal{}, errUnauthenticated
	case err != nil:
		return dirgate.Principal{}, storeDown(err)
	}
	id, err := dirgate.ParseIdentifier(tok.Subject)
	if err != nil {
		return dirgate.Principal{}, errUnauthenticated
	}
	return s.Principals.Principal(ctx, id)
}
