package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/ctxsleep"
	"go.opentelemetry.io/otel/attribute"
)

// SignIn is the product's sign-in flow (docs/compatibility.md, "The sign-in flow";
// docs/auth.md): *session.Service implements it. Config.SignIn nil serves none of its
// paths.
type SignIn interface {
	CreateSession(ctx context.Context, name dirgate.SignInName, password string) (dirgate.SignInSession, error)
	Exchange(ctx context.Context, sessionID string) (dirgate.SignInToken, error)
	RevokeToken(ctx context.Context, token string) error
	EndSession(ctx context.Context, id string) error
}

// Paths of the sign-in flow below the base path.
const (
	SessionCreatePath = "/api/authSessions/create"
	SessionsPath      = "/api/authSessions"
	AuthPath          = "/api/auth"
)

// Route names of the sign-in flow in the request log.
const (
	routeSessionCreate = "authSessionsCreate"
	routeSessions      = "authSessions"
	routeAuth          = "auth"
)

// MaxSessionIDLength bounds a session id or token sent to the sign-in paths;
// dirgate's are 43 and 47 bytes.
const MaxSessionIDLength = 256

// SignInRoute returns the sign-in path that path is under basePath (as
// Config.BasePath spells it), matched as the handler matches it, for telemetry to
// name spans and metrics by.
func SignInRoute(basePath, path string) (string, bool) {
	return routeOf(basePath, path, SessionCreatePath, AuthPath, SessionsPath)
}

// DecisionsRoute is SignInRoute for the decisions API (decisions.go).
func DecisionsRoute(basePath, path string) (string, bool) {
	return routeOf(basePath, path, DecisionsPath)
}

// routeOf matches path against resources below basePath, as the handler does.
func routeOf(basePath, path string, resources ...string) (string, bool) {
	if basePath == "" {
		basePath = DefaultBasePath
	}
	prefix := strings.TrimSuffix(basePath, "/")
	for _, p := range resources {
		if isAPIPath(path, prefix+p) {
			return prefix + p, true
		}
	}
	return "", false
}

// serveSignIn serves the sign-in paths and reports whether path (RoutePath) was one
// of them.
func (s *server) serveSignIn(w http.ResponseWriter, r *http.Request, rec *record, path string) bool {
	if s.cfg.SignIn == nil {
		return false
	}
	var route, allow string
	var serve func(http.ResponseWriter, *http.Request, *record)
	switch {
	case isAPIPath(path, s.basePrefix+SessionCreatePath):
		route, allow, serve = routeSessionCreate, http.MethodPost, s.createSession
	case isAPIPath(path, s.basePrefix+AuthPath):
		route, allow = routeAuth, "POST, DELETE"
		serve = s.exchange
		if r.Method == http.MethodDelete {
			serve = s.revokeToken
		}
	case isAPIPath(path, s.basePrefix+SessionsPath):
		route, allow, serve = routeSessions, http.MethodDelete, s.endSession
	default:
		return false
	}
	rec.route = route
	if r.ContentLength != 0 || len(r.TransferEncoding) > 0 {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.cfg.BodyReadTimeout))
	}
	if !slices.Contains(strings.Split(allow, ", "), r.Method) {
		w.Header().Set("Allow", allow)
		Error(w, r, dirgate.Errorf(dirgate.EMETHOD, "The method is not allowed on this resource; use %s.", allow))
		return true
	}
	serve(w, r, rec)
	return true
}

// signInBody is a validated body of either POST.
type signInBody struct {
	Username, Password, SessionID string
}

// Field names of the sign-in bodies, matched without regard to ASCII case.
const (
	fieldUsername  = "username"
	fieldPassword  = "password"
	fieldSessionID = "sessionId"
)

// parseSignInBody validates a sign-in body the way parseAddBody validates an
// addition's: one JSON object, known fields once each, strings only, unknown
// fields ignored. Values are bounded but not otherwise judged here.
func parseSignInBody(b []byte, fields ...string) (signInBody, error) {
	raws, err := parseObject(b, fields, "a JSON object with "+strings.Join(fields, " and "))
	if err != nil {
		return signInBody{}, err
	}
	var out signInBody
	for _, f := range fields {
		v, err := boundedString(f, raws[f])
		if err != nil {
			return signInBody{}, err
		}
		switch f {
		case fieldUsername:
			out.Username = v
		case fieldPassword:
			out.Password = v
		case fieldSessionID:
			out.SessionID = v
		}
	}
	return out, nil
}

// boundedString decodes a string field of at most dirgate.MaxPasswordLength bytes;
// absent and null give "".
func boundedString(name string, raw json.RawMessage) (string, error) {
	if raw == nil || string(raw) == "null" {
		return "", nil
	}
	var v string
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", dirgate.InvalidParam(name, "The %s field must be a string.", name)
	}
	if !validSurrogates(raw) {
		return "", dirgate.InvalidParam(name, "The %s field contains an invalid \\u escape.", name)
	}
	if len(v) > dirgate.MaxPasswordLength {
		return "", dirgate.InvalidParam(name, "The %s field is longer than %d bytes.", name, dirgate.MaxPasswordLength)
	}
	return v, nil
}

// refused counts an unknown session id against the client's address
// (Throttle.SessionIDFailed: with Redis, on all replicas together too) and holds
// the answer as for a bad token. It returns err or, when the address had already
// used up its failures, a 429 with Retry-After: as with tokens, a valid session id
// is exchanged whatever its address's failures, and only failing ones are refused
// (authenticate, auth.go).
func (s *server) refused(w http.ResponseWriter, r *http.Request, rec *record, err error) error {
	if !dirgate.IsRefusal(err) {
		return err
	}
	if tooMany := throttled(w, r, s.cfg.Throttle.SessionIDFailed(r.Context(), rec.client), signInRefusal); tooMany != nil {
		return tooMany
	}
	return err
}

// signInRefusal words the 429 of a sign-in the throttle refuses, by the bound
// that refused it.
func signInRefusal(b dirgate.ThrottleBound) error {
	switch b {
	case dirgate.ThrottledAccount:
		return dirgate.Errorf(dirgate.ETOOMANY, "Too many failed sign-ins for this account from this address; try again later.")
	case dirgate.ThrottledInProgress:
		return dirgate.Errorf(dirgate.ETOOMANY, "Too many sign-ins in progress; try again later.")
	}
	return dirgate.Errorf(dirgate.ETOOMANY, "Too many failed sign-ins from this address; try again later.")
}

func (s *server) createSession(w http.ResponseWriter, r *http.Request, rec *record) {
	b, err := readJSONBody(r)
	if err != nil {
		Error(w, r, err)
		return
	}
	body, err := parseSignInBody(b, fieldUsername, fieldPassword)
	if err != nil {
		Error(w, r, err)
		return
	}
	name, err := dirgate.ParseSignInName(body.Username)
	if err != nil {
		Error(w, r, err)
		return
	}
	// Judged and counted before the check (Throttle.StartSignIn): an account or an
	// address that has used up its failures is refused without one, since checking
	// anyway would answer whether the password is right (an oracle without bound).
	finish, v := s.cfg.Throttle.StartSignIn(r.Context(), rec.client, name)
	if tooMany := throttled(w, r, v, signInRefusal); tooMany != nil {
		Error(w, r, tooMany)
		return
	}
	// The span and the log name the outcome, never the password; the user name is
	// bounded and free of control characters by now.
	ctx, span := tracer().Start(r.Context(), "sign in")
	defer span.End()
	ses, err := s.cfg.SignIn.CreateSession(ctx, name, body.Password)
	ctxsleep.Sleep(r.Context(), finish(r.Context(), err))
	span.SetAttributes(attribute.String("dirgate.outcome", signInOutcome(err)))
	if reason := signInReason(err); reason != "" {
		// The reason only: never the password, and not the name either (users type
		// passwords into name fields).
		// The DC's data code too (not a secret), so that codes the adapter does not
		// map show up.
		var se *dirgate.SignInError
		code := ""
		if errors.As(err, &se) {
			code = se.DataCode
		}
		s.cfg.Logger.InfoContext(ctx, "sign-in refused", "reason", reason, "client", rec.client, "data_code", code)
	}
	if err != nil {
		Error(w, r, fmt.Errorf("create session: %w", err))
		return
	}
	writeOK(w, r, struct {
		SessionID            string  `json:"sessionId"`
		TOTPState            *string `json:"totpState"`
		ChangePasswordReason int     `json:"changePasswordReason"`
		ExpiresAtUTC         string  `json:"expiresAtUtc"`
	}{ses.ID, nil, ses.ChangePasswordReason, FormatUTC(ses.Expires)})
}

func (s *server) exchange(w http.ResponseWriter, r *http.Request, rec *record) {
	b, err := readJSONBody(r)
	if err != nil {
		Error(w, r, err)
		return
	}
	body, err := parseSignInBody(b, fieldSessionID)
	if err != nil {
		Error(w, r, err)
		return
	}
	if body.SessionID == "" {
		Error(w, r, dirgate.InvalidParam(fieldSessionID, "The sessionId field is required."))
		return
	}
	if len(body.SessionID) > MaxSessionIDLength {
		Error(w, r, s.refused(w, r, rec, dirgate.Errorf(dirgate.EUNAUTHENTICATED, "session id too long")))
		return
	}
	tok, err := s.cfg.SignIn.Exchange(r.Context(), body.SessionID)
	if err != nil {
		Error(w, r, s.refused(w, r, rec, fmt.Errorf("exchange session: %w", err)))
		return
	}
	writeOK(w, r, struct {
		Token        string `json:"token"`
		ExpiresAtUTC string `json:"expiresAtUtc"`
	}{tok.Token, FormatUTC(tok.Expires)})
}

func (s *server) revokeToken(w http.ResponseWriter, r *http.Request, rec *record) {
	s.endByQuery(w, r, "token", s.cfg.SignIn.RevokeToken)
}

func (s *server) endSession(w http.ResponseWriter, r *http.Request, rec *record) {
	s.endByQuery(w, r, "id", s.cfg.SignIn.EndSession)
}

// endByQuery serves the two DELETEs: the one parameter names what to end; an
// unknown or already ended one is no error (the client's teardown must not fail).
func (s *server) endByQuery(w http.ResponseWriter, r *http.Request, param string, end func(context.Context, string) error) {
	if r.ContentLength != 0 || len(r.TransferEncoding) > 0 {
		Error(w, r, dirgate.Errorf(dirgate.EINVALID, "The request must not have a body."))
		return
	}
	vals, err := parseParams(r.URL.RawQuery, []string{param})
	if err != nil {
		Error(w, r, err)
		return
	}
	v := vals[param]
	switch {
	case v == "":
		Error(w, r, dirgate.InvalidParam(param, "The %s parameter is required.", param))
		return
	case len(v) > MaxSessionIDLength:
		// Nothing this long was ever issued: there is nothing to end.
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if err := end(r.Context(), v); err != nil {
		Error(w, r, fmt.Errorf("end %s: %w", param, err))
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}

// FormatUTC renders a time as the product does: UTC with seven fractional digits.
func FormatUTC(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.0000000Z")
}

func signInOutcome(err error) string {
	if err == nil {
		return "ok"
	}
	if reason := signInReason(err); reason != "" {
		return reason
	}
	return dirgate.ErrorCode(err)
}
