package ldap

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/dirgate/dirgate"
	goldap "github.com/go-ldap/ldap/v3"
)

// TestResultCodesComplete: every result code go-ldap knows has a deliberate entry,
// so a code added to the library shows up here instead of silently becoming
// EUPSTREAM.
func TestResultCodesComplete(t *testing.T) {
	for rc, name := range goldap.LDAPResultCodeMap {
		if rc == goldap.LDAPResultSuccess {
			continue
		}
		if _, ok := resultCodes[rc]; !ok {
			t.Errorf("result code %d (%s) has no entry in resultCodes", rc, name)
		}
	}
	valid := map[string]bool{dirgate.EINVALID: true, dirgate.EFORBIDDEN: true, dirgate.ENOTFOUND: true,
		dirgate.EINTERNAL: true, dirgate.EUPSTREAM: true, dirgate.ETIMEOUT: true, dirgate.ECANCELED: true}
	for rc, code := range resultCodes {
		if !valid[code] {
			t.Errorf("result code %d maps to %q, which an upstream must not return", rc, code)
		}
	}
}

func TestWrap(t *testing.T) {
	ldapErr := func(rc uint16) error { return goldap.NewError(rc, errors.New("server said CN=secret,DC=x")) }
	tests := []struct {
		name string
		err  error
		want string
	}{
		// The codes measured on Samba for identifiers and removals
		// (docs/directory.md, "Identifiers as base DNs" and "Changing membership").
		{"noSuchObject", ldapErr(goldap.LDAPResultNoSuchObject), dirgate.ENOTFOUND},
		{"invalidDNSyntax", ldapErr(goldap.LDAPResultInvalidDNSyntax), dirgate.EINVALID},
		{"noSuchAttribute (not a group)", ldapErr(goldap.LDAPResultNoSuchAttribute), dirgate.EINVALID},
		{"insufficientAccessRights", ldapErr(goldap.LDAPResultInsufficientAccessRights), dirgate.EFORBIDDEN},
		{"referral (another server's object)", ldapErr(goldap.LDAPResultReferral), dirgate.ENOTFOUND},
		// Infrastructure: the breaker counts these.
		{"invalidCredentials at bind", fmt.Errorf("dial: %w", ldapErr(goldap.LDAPResultInvalidCredentials)), dirgate.EUPSTREAM},
		{"busy", ldapErr(goldap.LDAPResultBusy), dirgate.EUPSTREAM},
		{"unavailable", ldapErr(goldap.LDAPResultUnavailable), dirgate.EUPSTREAM},
		{"adminLimit", ldapErr(goldap.LDAPResultAdminLimitExceeded), dirgate.EUPSTREAM},
		{"sizeLimit", ldapErr(goldap.LDAPResultSizeLimitExceeded), dirgate.EUPSTREAM},
		{"timeLimit", ldapErr(goldap.LDAPResultTimeLimitExceeded), dirgate.ETIMEOUT},
		{"client timeout", ldapErr(goldap.LDAPResultTimeout), dirgate.ETIMEOUT},
		{"network", ldapErr(goldap.ErrorNetwork), dirgate.EUPSTREAM},
		{"unwilling (outside a removal)", ldapErr(goldap.LDAPResultUnwillingToPerform), dirgate.EUPSTREAM},
		// A bad filter is dirgate's bug.
		{"filter compile", ldapErr(goldap.ErrorFilterCompile), dirgate.EINTERNAL},
		// A code nobody knows is the directory's problem.
		{"unknown code", ldapErr(999), dirgate.EUPSTREAM},
		// Context errors, bare or wrapped as do() wraps them.
		{"deadline", fmt.Errorf("%w (%v)", context.DeadlineExceeded, ldapErr(goldap.ErrorNetwork)), dirgate.ETIMEOUT},
		{"canceled", context.Canceled, dirgate.ECANCELED},
		// A dial failure or a malformed answer.
		{"dial", &net.OpError{Op: "dial", Err: errors.New("connection refused")}, dirgate.EUPSTREAM},
		{"malformed", errors.New("entry \"x\": missing objectGUID"), dirgate.EUPSTREAM},
		// An already coded error keeps its code.
		{"coded", dirgate.Errorf(dirgate.EINVALID, "x"), dirgate.EINVALID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := wrap("op", tt.err)
			if got := dirgate.ErrorCode(err); got != tt.want {
				t.Errorf("code = %q, want %q (%v)", got, tt.want, err)
			}
			if !errors.Is(err, tt.err) {
				t.Errorf("wrapped error lost its cause")
			}
			if msg := dirgate.ErrorMessage(err); strings.Contains(msg, "secret") || msg == "" {
				t.Errorf("client message %q leaks detail or is empty", msg)
			}
		})
	}
	if wrap("op", nil) != nil {
		t.Error("wrap(nil) != nil")
	}
}

func TestIsNetworkError(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		// The connection is gone: retry a read elsewhere.
		{"ErrorNetwork", goldap.NewError(goldap.ErrorNetwork, errors.New("ldap: connection closed")), true},
		{"serverDown", goldap.NewError(goldap.LDAPResultServerDown, errors.New("x")), true},
		{"connectError", goldap.NewError(goldap.LDAPResultConnectError, errors.New("x")), true},
		{"net error", fmt.Errorf("dial: %w", &net.OpError{Op: "read", Err: errors.New("reset")}), true},
		// Answers from a working connection.
		{"noSuchObject", goldap.NewError(goldap.LDAPResultNoSuchObject, errors.New("x")), false},
		{"busy", goldap.NewError(goldap.LDAPResultBusy, errors.New("x")), false},
		// The caller's context ended: not the connection's fault, no retry.
		{"deadline", context.DeadlineExceeded, false},
		{"plain", errors.New("x"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := isNetworkError(tt.err); got != tt.want {
				t.Errorf("isNetworkError(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}
