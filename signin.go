package dirgate

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// CredentialChecker checks a user's password against the directory (docs/auth.md,
// "Signing in"). The LDAP upstream binds once as the user; the memory upstream
// compares demo passwords. On success it returns the account's object as a subject
// for a principal. A refusal is a *SignInError; anything else (the directory down)
// is a coded error as for any other directory call. A refusal for a right password
// that must be changed (PasswordChangeReason != 0) also returns the account, when
// the checker knows it, so that the sign-in rule can be asked about it.
type CredentialChecker interface {
	CheckPassword(ctx context.Context, name SignInName, password string) (Identifier, error)
}

// Reasons of a refused sign-in: the product's innerError codes
// (docs/compatibility.md, "The sign-in flow"), plus the two password states that
// dirgate answers with a session that cannot be exchanged (docs/compatibility.md,
// "Signing in").
const (
	ReasonInvalidCredentials = "invalidCredentials"   // AD data 52e, and unknown users
	ReasonAccountDisabled    = "accountIsDisabled"    // 533
	ReasonAccountLockedOut   = "accountLockedOut"     // 775
	ReasonAccountExpired     = "accountExpired"       // 701
	ReasonLogonTime          = "logonTimeIncorrect"   // 530
	ReasonAccessDenied       = "accessDenied"         // the sign-in policy refused the account
	ReasonPasswordExpired    = "passwordExpired"      // 532: the password was right but has expired
	ReasonMustChangePassword = "mustChangePassword"   // 773: the password was right but must be changed
	ReasonPasswordChange     = "passwordChangeNeeded" // POST /api/auth for such a session
)

// SignInError is a refused sign-in. Reason is one of the Reason constants; Err is
// detail (never a password; its text may name the account, so it is not logged).
// DataCode is the DC's data code of a refused bind ("52e", …; "" if none), which the
// proxy logs: an operator needs it to see codes the adapter does not map. It is
// EFORBIDDEN to the error table.
type SignInError struct {
	Reason   string
	DataCode string
	Err      error
}

func (e *SignInError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("sign-in refused: %s: %v", e.Reason, e.Err)
	}
	return "sign-in refused: " + e.Reason
}

func (e *SignInError) Unwrap() error { return e.Err }

// PasswordChangeReason is the session's changePasswordReason for a refusal that
// proved the password right but forbids its use: 1 for "must change at next
// logon" (773), 2 for "expired" (532), 0 otherwise.
func (e *SignInError) PasswordChangeReason() int {
	switch e.Reason {
	case ReasonMustChangePassword:
		return 1
	case ReasonPasswordExpired:
		return 2
	}
	return 0
}

// MaxSignInNameLength bounds a sign-in name in bytes (a UPN is at most 1,024
// characters in AD; a sAMAccountName 20 and a NetBIOS domain 15).
const MaxSignInNameLength = 1024

// MaxPasswordLength bounds a password in bytes (AD allows 256 characters).
const MaxPasswordLength = 1024

// SignInName is a validated user name in one of the two forms the product takes:
// user@domain (a UPN) or DOMAIN\user (down-level).
type SignInName struct {
	raw string
	// User and Domain are the two parts: for a UPN the prefix and suffix, for a
	// down-level name the account name and the NetBIOS domain.
	User, Domain string
	// DownLevel tells DOMAIN\user from user@domain.
	DownLevel bool
}

// String is the name as given (after validation), the form that is bound with.
func (n SignInName) String() string { return n.raw }

// downLevelForbidden are the characters a sAMAccountName or NetBIOS domain name
// cannot hold (MS-ADTS 3.1.1.5.2.6) besides controls, and the filter and DN
// metacharacters ( ) # that it could.
const downLevelForbidden = "\"/\\[]:;|=,+*?<>@()#"

// upnForbidden are the characters refused in a UPN's prefix: those of DN syntax and
// of search filters. AD allows some of them there; no real account is expected to
// use them, and refusing them keeps every hostile name away from the directory.
const upnForbidden = "\\,=+<>#;\"*()/"

// ParseSignInName validates a name for signing in. It refuses anything that is not
// one of the two forms (a DN, in particular, so that no caller binds by DN), control
// characters, and names over MaxSignInNameLength. The message is client-safe and
// says nothing about whether the account exists.
func ParseSignInName(s string) (SignInName, error) {
	switch {
	case s == "":
		return SignInName{}, InvalidParam("username", "The username field is required.")
	case len(s) > MaxSignInNameLength:
		return SignInName{}, InvalidParam("username", "The username field is longer than %d bytes.", MaxSignInNameLength)
	case !utf8.ValidString(s):
		return SignInName{}, InvalidParam("username", "The username field is not valid UTF-8.")
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (0x80 <= r && r < 0xa0) {
			return SignInName{}, InvalidParam("username", "The username field contains a control character.")
		}
	}
	bad := InvalidParam("username", `The username field must be user@domain or DOMAIN\user.`)
	if dom, user, ok := strings.Cut(s, `\`); ok {
		if dom == "" || user == "" || strings.ContainsAny(dom, downLevelForbidden) || strings.ContainsAny(user, downLevelForbidden) ||
			strings.TrimSpace(user) != user || strings.TrimSpace(dom) != dom {
			return SignInName{}, bad
		}
		return SignInName{raw: s, User: user, Domain: dom, DownLevel: true}, nil
	}
	i := strings.LastIndexByte(s, '@')
	if i <= 0 || i == len(s)-1 {
		return SignInName{}, bad
	}
	user, dom := s[:i], s[i+1:]
	// A UPN's suffix is a DNS name; its prefix may hold none of the characters that
	// mean something in a DN or a search filter.
	if strings.ContainsAny(user, upnForbidden) || strings.TrimSpace(user) != user || !isDNSName(dom) {
		return SignInName{}, bad
	}
	return SignInName{raw: s, User: user, Domain: dom}, nil
}

func isDNSName(s string) bool {
	if len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// SignInSession is the answer to creating an authentication session.
type SignInSession struct {
	ID string
	// ChangePasswordReason is not 0 when the password was right but must be changed
	// first (SignInError.PasswordChangeReason); such a session yields no token.
	ChangePasswordReason int
	Expires              time.Time
}

// SignInToken is the answer to exchanging a session.
type SignInToken struct {
	Token   string
	Expires time.Time
}
