package ldap

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/dirgate/dirgate"
	goldap "github.com/go-ldap/ldap/v3"
)

// resultCodes is the one table that decides what every LDAP result code (and go-ldap's
// client-side codes from 200 up) means to a dirgate client. Operations that give a
// code a more precise meaning handle it before consulting the table, and only these:
//   - a member removal: 53 is "not a member" (or "primary group"; on a retry, done);
//   - a member addition: 68 and 20 are "already a member" (on a retry, done), 53 is
//     the directory's refusal of this addition (400), and any of the three for a
//     member whose primary group this is is "already a member";
//   - a SID lookup: 32 is "not found" in another form.
//
// A code missing here is EUPSTREAM.
var resultCodes = map[uint16]string{
	goldap.LDAPResultOperationsError:                    dirgate.EUPSTREAM,
	goldap.LDAPResultProtocolError:                      dirgate.EUPSTREAM,
	goldap.LDAPResultTimeLimitExceeded:                  dirgate.ETIMEOUT,
	goldap.LDAPResultSizeLimitExceeded:                  dirgate.EUPSTREAM, // a listing must never be silently cut
	goldap.LDAPResultCompareFalse:                       dirgate.EINTERNAL, // dirgate sends no Compare
	goldap.LDAPResultCompareTrue:                        dirgate.EINTERNAL,
	goldap.LDAPResultAuthMethodNotSupported:             dirgate.EUPSTREAM, // service account setup
	goldap.LDAPResultStrongAuthRequired:                 dirgate.EUPSTREAM,
	goldap.LDAPResultReferral:                           dirgate.ENOTFOUND, // the object lives on another server
	goldap.LDAPResultAdminLimitExceeded:                 dirgate.EUPSTREAM,
	goldap.LDAPResultUnavailableCriticalExtension:       dirgate.EUPSTREAM,
	goldap.LDAPResultConfidentialityRequired:            dirgate.EUPSTREAM,
	goldap.LDAPResultSaslBindInProgress:                 dirgate.EUPSTREAM,
	goldap.LDAPResultNoSuchAttribute:                    dirgate.EINVALID, // e.g. removing a member from a non-group
	goldap.LDAPResultUndefinedAttributeType:             dirgate.EINVALID,
	goldap.LDAPResultInappropriateMatching:              dirgate.EINVALID,
	goldap.LDAPResultConstraintViolation:                dirgate.EINVALID,
	goldap.LDAPResultAttributeOrValueExists:             dirgate.EINVALID,
	goldap.LDAPResultInvalidAttributeSyntax:             dirgate.EINVALID,
	goldap.LDAPResultNoSuchObject:                       dirgate.ENOTFOUND,
	goldap.LDAPResultAliasProblem:                       dirgate.EUPSTREAM,
	goldap.LDAPResultInvalidDNSyntax:                    dirgate.EINVALID, // e.g. <GUID=zzz> (docs/directory.md, "Identifiers as base DNs")
	goldap.LDAPResultIsLeaf:                             dirgate.EINVALID,
	goldap.LDAPResultAliasDereferencingProblem:          dirgate.EUPSTREAM,
	goldap.LDAPResultInappropriateAuthentication:        dirgate.EUPSTREAM,
	goldap.LDAPResultInvalidCredentials:                 dirgate.EUPSTREAM, // the service account's bind failed
	goldap.LDAPResultInsufficientAccessRights:           dirgate.EFORBIDDEN,
	goldap.LDAPResultBusy:                               dirgate.EUPSTREAM,
	goldap.LDAPResultUnavailable:                        dirgate.EUPSTREAM,
	goldap.LDAPResultUnwillingToPerform:                 dirgate.EUPSTREAM,
	goldap.LDAPResultLoopDetect:                         dirgate.EUPSTREAM,
	goldap.LDAPResultSortControlMissing:                 dirgate.EUPSTREAM,
	goldap.LDAPResultOffsetRangeError:                   dirgate.EUPSTREAM,
	goldap.LDAPResultNamingViolation:                    dirgate.EINVALID,
	goldap.LDAPResultObjectClassViolation:               dirgate.EINVALID,
	goldap.LDAPResultNotAllowedOnNonLeaf:                dirgate.EINVALID,
	goldap.LDAPResultNotAllowedOnRDN:                    dirgate.EINVALID,
	goldap.LDAPResultEntryAlreadyExists:                 dirgate.EINVALID,
	goldap.LDAPResultObjectClassModsProhibited:          dirgate.EINVALID,
	goldap.LDAPResultResultsTooLarge:                    dirgate.EUPSTREAM,
	goldap.LDAPResultAffectsMultipleDSAs:                dirgate.EUPSTREAM,
	goldap.LDAPResultVirtualListViewErrorOrControlError: dirgate.EUPSTREAM,
	goldap.LDAPResultOther:                              dirgate.EUPSTREAM,
	goldap.LDAPResultServerDown:                         dirgate.EUPSTREAM,
	goldap.LDAPResultLocalError:                         dirgate.EUPSTREAM,
	goldap.LDAPResultEncodingError:                      dirgate.EUPSTREAM,
	goldap.LDAPResultDecodingError:                      dirgate.EUPSTREAM,
	goldap.LDAPResultTimeout:                            dirgate.ETIMEOUT,
	goldap.LDAPResultAuthUnknown:                        dirgate.EUPSTREAM,
	goldap.LDAPResultFilterError:                        dirgate.EINTERNAL, // dirgate built a bad filter
	goldap.LDAPResultUserCanceled:                       dirgate.ECANCELED,
	goldap.LDAPResultParamError:                         dirgate.EINTERNAL,
	goldap.LDAPResultNoMemory:                           dirgate.EUPSTREAM,
	goldap.LDAPResultConnectError:                       dirgate.EUPSTREAM,
	goldap.LDAPResultNotSupported:                       dirgate.EUPSTREAM,
	goldap.LDAPResultControlNotFound:                    dirgate.EUPSTREAM,
	goldap.LDAPResultNoResultsReturned:                  dirgate.EUPSTREAM,
	goldap.LDAPResultMoreResultsToReturn:                dirgate.EUPSTREAM,
	goldap.LDAPResultClientLoop:                         dirgate.EUPSTREAM,
	goldap.LDAPResultReferralLimitExceeded:              dirgate.EUPSTREAM,
	goldap.LDAPResultInvalidResponse:                    dirgate.EUPSTREAM,
	goldap.LDAPResultAmbiguousResponse:                  dirgate.EUPSTREAM,
	goldap.LDAPResultTLSNotSupported:                    dirgate.EUPSTREAM,
	goldap.LDAPResultIntermediateResponse:               dirgate.EUPSTREAM,
	goldap.LDAPResultUnknownType:                        dirgate.EUPSTREAM,
	goldap.LDAPResultCanceled:                           dirgate.EUPSTREAM, // dirgate sends no Cancel: the server did it
	goldap.LDAPResultNoSuchOperation:                    dirgate.EUPSTREAM,
	goldap.LDAPResultTooLate:                            dirgate.EUPSTREAM,
	goldap.LDAPResultCannotCancel:                       dirgate.EUPSTREAM,
	goldap.LDAPResultAssertionFailed:                    dirgate.EUPSTREAM,
	goldap.LDAPResultAuthorizationDenied:                dirgate.EFORBIDDEN,
	goldap.LDAPResultSyncRefreshRequired:                dirgate.EUPSTREAM,
	goldap.ErrorNetwork:                                 dirgate.EUPSTREAM,
	goldap.ErrorFilterCompile:                           dirgate.EINTERNAL,
	goldap.ErrorFilterDecompile:                         dirgate.EINTERNAL,
	goldap.ErrorDebugging:                               dirgate.EINTERNAL,
	goldap.ErrorUnexpectedMessage:                       dirgate.EUPSTREAM,
	goldap.ErrorUnexpectedResponse:                      dirgate.EUPSTREAM,
	goldap.ErrorEmptyPassword:                           dirgate.EUPSTREAM,
	goldap.ErrorMalformedPacket:                         dirgate.EUPSTREAM,
}

// Client-facing messages. They name no DN, server or LDAP detail: those go to Err.
var codeMessages = map[string]string{
	dirgate.ENOTFOUND:  "The object was not found.",
	dirgate.EINVALID:   "The directory rejected the request as invalid.",
	dirgate.EFORBIDDEN: "The directory refused the operation to the gateway's service account.",
}

// resultCode returns the LDAP result code in err's chain.
func resultCode(err error) (uint16, bool) {
	var le *goldap.Error
	if errors.As(err, &le) {
		return le.ResultCode, true
	}
	return 0, false
}

// codeOf returns the dirgate code for an LDAP result code.
func codeOf(rc uint16) string {
	if c, ok := resultCodes[rc]; ok {
		return c
	}
	return dirgate.EUPSTREAM
}

// wrap turns any error from an operation into a coded dirgate error: context errors
// into ETIMEOUT or ECANCELED, LDAP errors through the table, anything else (a
// malformed answer, a dial failure) into EUPSTREAM. Already coded errors pass through.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	var de *dirgate.Error
	if errors.As(err, &de) {
		return fmt.Errorf("ldap: %s: %w", op, err)
	}
	detail := fmt.Errorf("ldap: %s: %w", op, err)
	code := dirgate.EUPSTREAM
	switch {
	case errors.Is(err, context.Canceled):
		code = dirgate.ECANCELED
	case errors.Is(err, context.DeadlineExceeded):
		code = dirgate.ETIMEOUT
	default:
		if rc, ok := resultCode(err); ok {
			code = codeOf(rc)
		}
	}
	return dirgate.WrapError(code, codeMessages[code], detail)
}

// isNetworkError reports whether err means the connection is unusable, so that a
// read may be retried on another one.
func isNetworkError(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	rc, ok := resultCode(err)
	if !ok {
		var ne net.Error
		return errors.As(err, &ne)
	}
	switch rc {
	case goldap.ErrorNetwork, goldap.LDAPResultServerDown, goldap.LDAPResultConnectError:
		return true
	}
	return false
}
