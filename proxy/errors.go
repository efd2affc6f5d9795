package proxy

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/dirgate/dirgate"
)

// statusCodes is the one table from dirgate's error codes to HTTP statuses.
// ECANCELED is absent on purpose: a client that went away gets no response.
var statusCodes = map[string]int{
	dirgate.EINVALID:         http.StatusBadRequest,
	dirgate.EUNAUTHENTICATED: http.StatusUnauthorized,
	dirgate.EFORBIDDEN:       http.StatusForbidden,
	dirgate.ENOTFOUND:        http.StatusNotFound,
	dirgate.EMETHOD:          http.StatusMethodNotAllowed,
	dirgate.ETOOLARGE:        http.StatusRequestEntityTooLarge,
	dirgate.EMEDIATYPE:       http.StatusUnsupportedMediaType,
	dirgate.ETOOMANY:         http.StatusTooManyRequests,
	dirgate.EINTERNAL:        http.StatusInternalServerError,
	dirgate.EUPSTREAM:        http.StatusBadGateway,
	dirgate.EUNAVAILABLE:     http.StatusServiceUnavailable,
	dirgate.ETIMEOUT:         http.StatusGatewayTimeout,
}

// ErrorStatusCode returns the HTTP status for a dirgate error code; an unknown code
// is a bug and gets 500.
func ErrorStatusCode(code string) int {
	if s, ok := statusCodes[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// UnauthenticatedMessage is the product's message for a missing, invalid or expired
// token (docs/compatibility.md, "Error bodies"); clients compare it.
const UnauthenticatedMessage = "The provided authentication token is either expired or invalid."

// defaultMessages stand in for a coded error without a message.
var defaultMessages = map[string]string{
	dirgate.EINVALID:   "The request is invalid.",
	dirgate.EFORBIDDEN: "You are not allowed to perform this operation.",
	dirgate.ENOTFOUND:  "The object was not found.",
	dirgate.EMETHOD:    "The method is not allowed on this resource.",
	dirgate.ETOOLARGE:  "The request body is too large.",
	dirgate.EMEDIATYPE: "The request body must be JSON.",
	dirgate.ETOOMANY:   "Too many requests; try again later.",
}

// ErrorResponse is the body of every error (docs/compatibility.md, "Error bodies").
// ModelState names the parameter at fault on a 400.
type ErrorResponse struct {
	Message    string              `json:"message"`
	Code       string              `json:"code"`
	ModelState map[string][]string `json:"modelState,omitempty"`
	// InnerError says why a sign-in was refused (403, docs/compatibility.md, "The
	// sign-in flow").
	InnerError *InnerError `json:"innerError,omitempty"`
}

// InnerError is the product's detail of a refused sign-in: code is one of the
// dirgate.Reason constants. attemptsLeft is never sent (docs/auth.md, "Unknown
// users").
type InnerError struct {
	Message string `json:"message"`
	Code    string `json:"code"`
}

// SignInRefusedMessage is the top-level message of every refused sign-in.
const SignInRefusedMessage = "The sign-in was refused."

// reasonMessages are the client messages of the sign-in refusals.
var reasonMessages = map[string]string{
	dirgate.ReasonInvalidCredentials: "The user name or password is incorrect.",
	dirgate.ReasonAccountDisabled:    "The account is disabled.",
	dirgate.ReasonAccountLockedOut:   "The account is locked out.",
	dirgate.ReasonAccountExpired:     "The account has expired.",
	dirgate.ReasonLogonTime:          "The account may not sign in at this time.",
	dirgate.ReasonAccessDenied:       "The account may not sign in to this gateway.",
	dirgate.ReasonPasswordChange:     "The password must be changed before this session can be used.",
}

// signInReason returns the reason of a refused sign-in in err's chain, or "".
func signInReason(err error) string {
	var se *dirgate.SignInError
	if !errors.As(err, &se) {
		return ""
	}
	if _, ok := reasonMessages[se.Reason]; !ok {
		return dirgate.ReasonAccessDenied // a reason with no answer of its own
	}
	return se.Reason
}

// StatusClientClosedRequest is what the request log records when the client went
// away and nothing was written (nginx's 499; never sent).
const StatusClientClosedRequest = 499

// Error writes err as an error response. It is the only place where errors become
// statuses and bodies:
//   - a 5xx shows the generic message of its code; the error itself goes to the log;
//   - a 401 shows UnauthenticatedMessage whatever the authenticator said;
//   - other statuses show the coded error's client-safe message, and a 400 that names
//     a parameter adds modelState;
//   - a cancellation by the client writes nothing (the handler then aborts the
//     connection); a cancellation the client did not cause is a 500.
func Error(w http.ResponseWriter, r *http.Request, err error) {
	rec := recordFrom(r.Context())
	code := dirgate.ErrorCode(err)
	if code == dirgate.ECANCELED && r.Context().Err() != nil {
		rec.abort(err)
		return
	}
	status, ok := statusCodes[code]
	if !ok {
		code, status = dirgate.EINTERNAL, http.StatusInternalServerError
	}
	resp := ErrorResponse{Code: code}
	switch {
	case status >= 500:
		// A coded message is meant to be client-safe, but a 5xx's may still describe
		// the failure; the code's generic text never does.
		resp.Message = dirgate.ErrorMessage(&dirgate.Error{Code: code})
		rec.fail(code, err)
		if rec == nil { // Error used outside this package's handler
			slog.Default().ErrorContext(r.Context(), "http error", "method", clip(r.Method, maxLoggedMethod), "code", code, "error", clip(err.Error(), maxLoggedError))
		}
	case signInReason(err) != "":
		reason := signInReason(err)
		resp.Message = SignInRefusedMessage
		resp.InnerError = &InnerError{Message: reasonMessages[reason], Code: reason}
		rec.fail(code, nil)
	case status == http.StatusUnauthorized:
		resp.Message = UnauthenticatedMessage
		rec.fail(code, nil)
	default:
		resp.Message = defaultMessages[code]
		var e *dirgate.Error
		if errors.As(err, &e) && e.Message != "" {
			resp.Message = e.Message
		}
		if p := dirgate.ErrorParam(err); p != "" && status == http.StatusBadRequest {
			resp.ModelState = map[string][]string{p: {resp.Message}}
		}
		rec.fail(code, nil)
	}
	body, _ := json.Marshal(resp) // strings and a map of strings: cannot fail
	writeJSON(w, status, body)
}

// Header values shared by every response, assigned under canonical keys: Set would
// make a new slice each time. No code may modify them in place (h[k][0] = …, a sort);
// Set and Add replace or copy them.
var (
	jsonContentType = []string{"application/json; charset=utf-8"}
	noSniff         = []string{"nosniff"}
	noStore         = []string{"no-store"}
	varyEncoding    = []string{"Accept-Encoding"}
)

// writeJSON writes an encoded JSON body with the headers every response carries.
func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h["X-Content-Type-Options"] = noSniff
	// Listings are filtered per caller: no shared cache may keep them.
	h["Cache-Control"] = noStore
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
