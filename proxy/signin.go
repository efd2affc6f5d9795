package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/ctxsleep"
	"go.opentelemetry.io/otel/attribute"
	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
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

// SharedFailures counts failed sign-ins across replicas (*session.RedisFailures),
// per key in a window that starts at the key's first failure: a client address for
// unknown session ids, an address and an account name for passwords (signInKey),
// and an address for its password checks whatever the names (clientSignInKey).
// A password check is counted before it is made and given back (RemoveFailure) when
// it succeeds, as in the in-process throttle (reserveSignIn). Its errors only lose
// the shared count: the in-process throttle still holds.
type SharedFailures interface {
	AddFailure(ctx context.Context, addr string, window time.Duration) (int, error)
	RemoveFailure(ctx context.Context, addr string) error
	Failures(ctx context.Context, addr string) (int, time.Duration, error)
}

// refused counts an unknown session id against the client's address, here and in
// SharedFailures, and holds the answer as for a bad token, by the larger of the two
// counts. It returns err or, when the address had already used up its failures
// (here or on all replicas together), a 429 with Retry-After: as with tokens, a
// valid session id is exchanged whatever its address's failures, and only failing
// ones are refused (authenticate, auth.go). Each count is judged in the step that
// takes it (throttle.failJudged; the count INCR returns).
func (s *server) refused(w http.ResponseWriter, r *http.Request, rec *record, err error) error {
	if !isRefusal(err) {
		return err
	}
	d, wait, blocked := s.throttle.failJudged(rec.client, s.cfg.Now())
	if s.cfg.SharedFailures != nil {
		n, err := s.cfg.SharedFailures.AddFailure(r.Context(), rec.client, s.cfg.Throttle.Window)
		switch {
		case err != nil:
			s.logSharedDown(r, err)
		case n > s.cfg.Throttle.MaxFailures:
			blocked, wait = true, max(wait, s.sharedWait(r, rec.client))
		}
		d = max(d, s.throttle.delay(n))
	}
	ctxsleep.Sleep(r.Context(), d)
	if !blocked {
		return err
	}
	w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(wait)))
	return dirgate.Errorf(dirgate.ETOOMANY, "Too many failed sign-ins from this address; try again later.")
}

// isRefusal tells a judged and refused attempt (a wrong password, an unknown
// session id) from an error that judged nothing (the directory down).
func isRefusal(err error) bool {
	code := dirgate.ErrorCode(err)
	return code == dirgate.EFORBIDDEN || code == dirgate.EUNAUTHENTICATED
}

func (s *server) logSharedDown(r *http.Request, err error) {
	s.cfg.Logger.DebugContext(r.Context(), "shared sign-in failure count unavailable", "err", clip(err.Error(), maxLoggedError))
}

// signInRefusal is the 429 of a password check the throttle refuses: the address
// has used up its failures across names (clientBlocked), or the address and name
// theirs.
func signInRefusal(clientBlocked bool) error {
	if clientBlocked {
		return dirgate.Errorf(dirgate.ETOOMANY, "Too many failed sign-ins from this address; try again later.")
	}
	return dirgate.Errorf(dirgate.ETOOMANY, "Too many failed sign-ins for this account from this address; try again later.")
}

// signInAttempt is a password check counted before it is made (reserveSignIn).
type signInAttempt struct {
	at     time.Time
	shared int  // the pair's shared count with this attempt; 0: not counted there
	client bool // counted in the address's shared count
}

// reserveSignIn lets a password check through only with a place in the sign-in
// gate (per address) and an attempt counted against key (signInKey) and against
// the address whatever the name, here and in SharedFailures, before the check is
// made. Counting after the check would let a burst pass the block check all at
// once, every request of it reaching a bind; counted first, at most MaxFailures
// checks of one name, and MaxClientSignInFailures of all names, from one address
// reach the directory in a window, whatever the concurrency. It answers 429 itself
// and returns false when the check must not be made; otherwise finishSignIn must
// follow.
func (s *server) reserveSignIn(w http.ResponseWriter, r *http.Request, rec *record, key string) (signInAttempt, bool) {
	if !s.signInGate.enter(rec.client) {
		// A check takes milliseconds: a second is long enough to find a place.
		w.Header().Set("Retry-After", "1")
		Error(w, r, dirgate.Errorf(dirgate.ETOOMANY, "Too many sign-ins in progress; try again later."))
		return signInAttempt{}, false
	}
	a := signInAttempt{at: s.cfg.Now()}
	wait, clientBlocked, ok := s.throttle.reserveSignIn(rec.client, key, a.at)
	if ok && s.cfg.SharedFailures != nil {
		wait, clientBlocked, ok = s.reserveShared(r, rec, key, &a)
		if !ok {
			s.throttle.releaseSignIn(rec.client, key, a.at)
		}
	}
	if !ok {
		s.signInGate.leave(rec.client)
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(wait)))
		Error(w, r, signInRefusal(clientBlocked))
		return signInAttempt{}, false
	}
	return a, true
}

// reserveShared takes the attempt's counts in SharedFailures, the pair's and then
// the address's, and gives back what it took when either count was already full.
// A count it cannot reach is skipped: the in-process one still holds.
func (s *server) reserveShared(r *http.Request, rec *record, key string, a *signInAttempt) (wait time.Duration, clientBlocked, ok bool) {
	sf, ck := s.cfg.SharedFailures, clientSignInKey(rec.client)
	n, err := sf.AddFailure(r.Context(), key, s.cfg.Throttle.Window)
	switch {
	case err != nil:
		s.logSharedDown(r, err)
	case n > s.cfg.Throttle.MaxFailures:
		s.removeShared(r, key)
		return s.sharedWait(r, key), false, false
	default:
		a.shared = n
	}
	n, err = sf.AddFailure(r.Context(), ck, s.cfg.Throttle.Window)
	switch {
	case err != nil:
		s.logSharedDown(r, err)
	case n > s.cfg.Throttle.MaxClientSignInFailures:
		s.removeShared(r, ck)
		if a.shared > 0 {
			s.removeShared(r, key)
		}
		return s.sharedWait(r, ck), true, false
	default:
		a.client = true
	}
	return 0, false, true
}

// finishSignIn ends a reserved check. A success gives the attempt back. Anything
// else keeps it as a failure: a refusal, and an error too, since a bind may have
// reached the directory before it (a timeout, a client that hung up): giving those
// back would let a client that cancels its requests bind without bound. A refusal's
// answer is held as for a bad token, by the larger count of the pair.
func (s *server) finishSignIn(r *http.Request, rec *record, key string, a signInAttempt, err error) {
	s.signInGate.leave(rec.client)
	if err == nil {
		s.throttle.releaseSignIn(rec.client, key, a.at)
		if a.shared > 0 {
			s.removeShared(r, key)
		}
		if a.client {
			s.removeShared(r, clientSignInKey(rec.client))
		}
		return
	}
	d := s.throttle.confirm(key, s.cfg.Now())
	if isRefusal(err) {
		ctxsleep.Sleep(r.Context(), max(d, s.throttle.delay(a.shared)))
	}
}

func (s *server) removeShared(r *http.Request, key string) {
	if err := s.cfg.SharedFailures.RemoveFailure(r.Context(), key); err != nil {
		s.logSharedDown(r, err)
	}
}

// sharedWait is how long the shared count of key still blocks.
func (s *server) sharedWait(r *http.Request, key string) time.Duration {
	if _, ttl, err := s.cfg.SharedFailures.Failures(r.Context(), key); err == nil && ttl > 0 {
		return ttl
	}
	return s.cfg.Throttle.Window
}

// signInThrottled answers 429 when the client has used up its failed password
// checks, or the client and key's name theirs, on this replica or, with
// SharedFailures, on all of them together.
func (s *server) signInThrottled(w http.ResponseWriter, r *http.Request, client, key string) bool {
	wait, clientBlocked, blocked := s.throttle.signInBlocked(client, key, s.cfg.Now())
	if !blocked && s.cfg.SharedFailures != nil {
		ck := clientSignInKey(client)
		if n, ttl, err := s.cfg.SharedFailures.Failures(r.Context(), ck); err == nil && n >= s.cfg.Throttle.MaxClientSignInFailures {
			wait, clientBlocked, blocked = ttl, true, true
		} else if n, ttl, err := s.cfg.SharedFailures.Failures(r.Context(), key); err == nil && n >= s.cfg.Throttle.MaxFailures {
			wait, blocked = ttl, true
		}
	}
	if !blocked {
		return false
	}
	w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(wait)))
	Error(w, r, signInRefusal(clientBlocked))
	return true
}

// signInKey is what password checks are counted by: the client's address and the
// account name's user part, folded (foldName). Failures for one account from an
// address never refuse another account's correct password from that address
// (behind an ingress or a NAT, one address is many people), while guesses at one
// account from one address stay bounded. The domain part is left out so that
// user@domain and DOMAIN\user share a count where the UPN prefix is the
// sAMAccountName. The folded name is hashed: the key's length stays bounded however
// far folding expands a name. A client address holds no space, so the key is
// unambiguous.
func signInKey(client string, name dirgate.SignInName) string {
	sum := sha256.Sum256([]byte(foldName(name.User)))
	return client + " " + hex.EncodeToString(sum[:16])
}

// clientSignInKey is the shared count of an address's password checks, whatever
// the names. It never equals a signInKey (no name folds to NUL, and the hash is
// hex) nor an address.
func clientSignInKey(client string) string {
	return client + " \x00"
}

// foldName folds an account name as the directory compares names, or more
// broadly: AD matches sAMAccountName and userPrincipalName without regard to case
// or to the width of a character, so "ＡＬＩＣＥ" (full width) names the same
// account as "alice". NFKC maps full- and half-width forms (and other
// compatibility characters) to their usual ones, and Unicode case folding then
// ignores case beyond ASCII. Folding more than the directory does only makes two
// names share one count, which can refuse sooner but never lets a guess through.
func foldName(user string) string {
	// A Caser keeps state: one per call.
	return cases.Fold().String(norm.NFKC.String(user))
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
	// A pair that has used up its failures is refused without a check: checking
	// anyway would answer whether the password is right (an oracle without bound).
	key := signInKey(rec.client, name)
	if s.signInThrottled(w, r, rec.client, key) {
		return
	}
	// The span and the log name the outcome, never the password; the user name is
	// bounded and free of control characters by now.
	attempt, ok := s.reserveSignIn(w, r, rec, key)
	if !ok {
		return
	}
	ctx, span := tracer().Start(r.Context(), "sign in")
	defer span.End()
	ses, err := s.cfg.SignIn.CreateSession(ctx, name, body.Password)
	s.finishSignIn(r, rec, key, attempt, err)
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
