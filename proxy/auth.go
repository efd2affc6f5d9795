package proxy

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/ctxsleep"
	"go.opentelemetry.io/otel/attribute"
)

// HeaderToken carries the raw access token, without a scheme (docs/api.md,
// "Authentication"; docs/compatibility.md, "Requests").
const HeaderToken = "Adm-Authorization"

// MaxTokenLength bounds the token passed to the authenticator, in bytes.
const MaxTokenLength = 4096

// authenticate returns the caller behind the request's token. A valid token is
// served whatever its address's failures: behind an ingress or a NAT one address is
// every client, and refusing valid tokens there would let anyone lock everyone out
// with a few bad ones. So every token is checked, and the throttle acts on failures
// only: they are held progressively longer (throttle.fail), and from an address that
// has used up its failures they are answered 429, not 401. Checking stays cheap
// whoever sends the token: a hash compared with the tokens file's, or one Redis read
// for a signed-in token, never a directory read for an unknown token. Guessing is
// left to the tokens' entropy (docs/auth.md, "Throttling"). Only tokens that were
// presented and rejected count as failures: a missing header is a misconfigured
// client, and an authenticator that cannot reach the directory has not judged the
// token.
func (s *server) authenticate(w http.ResponseWriter, r *http.Request, rec *record) (dirgate.Principal, error) {
	addr := rec.client
	vals := r.Header.Values(HeaderToken)
	if len(vals) != 1 || vals[0] == "" {
		return dirgate.Principal{}, dirgate.Errorf(dirgate.EUNAUTHENTICATED, "missing or repeated %s header", HeaderToken)
	}
	if len(vals[0]) > MaxTokenLength {
		return dirgate.Principal{}, s.tokenFailed(w, r, addr,
			dirgate.Errorf(dirgate.EUNAUTHENTICATED, "token longer than %d bytes", MaxTokenLength))
	}
	// The span records who was authenticated, never the token.
	ctx, span := tracer().Start(r.Context(), "authenticate")
	defer span.End()
	p, err := s.cfg.Authenticator.Authenticate(ctx, vals[0])
	if err != nil {
		span.SetAttributes(attribute.String("dirgate.outcome", dirgate.ErrorCode(err)))
		if dirgate.ErrorCode(err) == dirgate.EUNAUTHENTICATED {
			return dirgate.Principal{}, s.tokenFailed(w, r.WithContext(ctx), addr, fmt.Errorf("authenticate: %w", err))
		}
		return dirgate.Principal{}, fmt.Errorf("authenticate: %w", err)
	}
	span.SetAttributes(attribute.String("dirgate.outcome", "ok"), attribute.String("dirgate.subject.guid", p.GUID))
	return p, nil
}

// tokenFailed counts a rejected token against addr and holds the answer as the
// throttle says. It returns err (401) or, when addr had already used up its
// failures in the window, a 429 with Retry-After: how long until this failure's
// window, which the new failure extends, lets the address fail again. Whether addr
// was blocked is judged in the same step as the failure is counted
// (throttle.failJudged), so concurrent failures cannot all pass as the first.
func (s *server) tokenFailed(w http.ResponseWriter, r *http.Request, addr string, err error) error {
	d, wait, wasBlocked := s.throttle.failJudged(addr, s.cfg.Now())
	ctxsleep.Sleep(r.Context(), d)
	if !wasBlocked {
		return err
	}
	w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(wait)))
	return dirgate.Errorf(dirgate.ETOOMANY, "Too many failed authentications from this address; try again later.")
}
