package dirgate

import (
	"context"
	"errors"
	"fmt"
)

// Error codes. Each maps to exactly one HTTP status in proxy.ErrorStatusCode; the
// strings are what clients read in the "code" field of an error body.
const (
	EINVALID         = "invalid"              // 400: the request is malformed
	EUNAUTHENTICATED = "unauthenticated"      // 401: missing or unknown token
	EFORBIDDEN       = "forbidden"            // 403: the caller may not do this
	ENOTFOUND        = "notFound"             // 404: unknown group or member
	EMETHOD          = "methodNotAllowed"     // 405
	ETOOLARGE        = "requestTooLarge"      // 413: the request body is over its bound
	EMEDIATYPE       = "unsupportedMediaType" // 415: the request body is not JSON
	ETOOMANY         = "tooManyRequests"      // 429
	EINTERNAL        = "internal"             // 500: a bug or an unexpected failure
	EUPSTREAM        = "upstreamError"        // 502: the directory failed
	EUNAVAILABLE     = "upstreamUnavailable"  // 503: the circuit breaker is open
	ETIMEOUT         = "upstreamTimeout"      // 504: the directory did not answer in time
	ECANCELED        = "canceled"             // the client went away: nothing is written
)

// Error is dirgate's application error. Message is written for the client and must
// never contain internal detail; Err carries that detail for the log only.
type Error struct {
	Code    string
	Message string
	// Param names the request parameter at fault; it becomes modelState on a 400.
	Param string
	Err   error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("dirgate: %s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("dirgate: %s: %s", e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns a coded error whose message is shown to the client.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// InvalidParam returns a 400 error that names the parameter at fault.
func InvalidParam(param, format string, args ...any) *Error {
	return &Error{Code: EINVALID, Param: param, Message: fmt.Sprintf(format, args...)}
}

// WrapError attaches a client-safe code and message to an internal error.
func WrapError(code, message string, err error) *Error {
	return &Error{Code: code, Message: message, Err: err}
}

// ErrorCode returns the code of the first *Error in err's chain. Context errors that
// were not coded by an adapter are classified here so every layer agrees on them.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var se *SignInError
	if errors.As(err, &se) {
		return EFORBIDDEN
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	switch {
	case errors.Is(err, context.Canceled):
		return ECANCELED
	case errors.Is(err, context.DeadlineExceeded):
		return ETIMEOUT
	}
	return EINTERNAL
}

// Generic messages for codes whose detail must not reach a client.
var genericMessages = map[string]string{
	EINTERNAL:    "An internal error occurred.",
	EUPSTREAM:    "The directory could not complete the request.",
	EUNAVAILABLE: "The directory is unavailable; try again later.",
	ETIMEOUT:     "The directory did not answer in time.",
	ECANCELED:    "The request was canceled.",
}

// ErrorMessage returns the client-facing message for err: the coded message when
// there is one, otherwise a generic message for the code.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) && e.Message != "" {
		return e.Message
	}
	if m, ok := genericMessages[ErrorCode(err)]; ok {
		return m
	}
	return genericMessages[EINTERNAL]
}

// ErrorParam returns the parameter named by err, if any.
func ErrorParam(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Param
	}
	return ""
}

// IsDirectoryDown reports whether err says the directory could not answer (it failed,
// timed out, or its circuit breaker is open), as opposed to an answer such as "not
// found". Stale cached data may stand in for the directory only then.
func IsDirectoryDown(err error) bool {
	switch ErrorCode(err) {
	case EUPSTREAM, ETIMEOUT, EUNAVAILABLE:
		return true
	}
	return false
}

// Sentinels that upstreams return and the member service interprets.
var (
	// ErrNotMember: the member to remove is not a (direct) member of the group.
	ErrNotMember = errors.New("not a member of the group")
	// ErrPrimaryGroup: the member belongs to the group only through primaryGroupID,
	// which a member removal cannot change (AD refuses it too).
	ErrPrimaryGroup = errors.New("the group is the member's primary group")
	// ErrAlreadyMember: the member to add is a direct member of the group already, or
	// belongs to it through primaryGroupID (AD will not add it to member then).
	ErrAlreadyMember = errors.New("already a member of the group")
)
