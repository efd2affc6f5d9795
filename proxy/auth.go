package proxy

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/dirgate/dirgate"
	"go.opentelemetry.io/otel/attribute"
)

// HeaderToken carries the raw access token, without a scheme (docs/api.md,
// "Authentication"; docs/compatibility.md, "Requests").
const HeaderToken = "Adm-Authorization"

// MaxTokenLength bounds the token passed to the authenticator, in bytes.
const MaxTokenLength = 4096

// authenticate returns the caller behind the request's token. A throttled address is
// refused before the authenticator is called. Only tokens that were presented and
// rejected count as failures: a missing header is a misconfigured client, and an
// authenticator that cannot reach the directory has not judged the token.
func (s *server) authenticate(w http.ResponseWriter, r *http.Request, rec *record) (dirgate.Principal, error) {
	addr := rec.client
	if wait, blocked := s.throttle.blocked(addr, s.cfg.Now()); blocked {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(wait)))
		return dirgate.Principal{}, dirgate.Errorf(dirgate.ETOOMANY, "Too many failed authentications from this address; try again later.")
	}
	vals := r.Header.Values(HeaderToken)
	if len(vals) != 1 || vals[0] == "" {
		return dirgate.Principal{}, dirgate.Errorf(dirgate.EUNAUTHENTICATED, "missing or repeated %s header", HeaderToken)
	}
	if len(vals[0]) > MaxTokenLength {
		dirgate.Sleep(r.Context(), s.throttle.fail(addr, s.cfg.Now()))
		return dirgate.Principal{}, dirgate.Errorf(dirgate.EUNAUTHENTICATED, "token longer than %d bytes", MaxTokenLength)
	}
	// The span records who was authenticated, never the token.
	ctx, span := tracer().Start(r.Context(), "authenticate")
	defer span.End()
	p, err := s.cfg.Authenticator.Authenticate(ctx, vals[0])
	if err != nil {
		span.SetAttributes(attribute.String("dirgate.outcome", dirgate.ErrorCode(err)))
		if dirgate.ErrorCode(err) == dirgate.EUNAUTHENTICATED {
			dirgate.Sleep(ctx, s.throttle.fail(addr, s.cfg.Now()))
		}
		return dirgate.Principal{}, fmt.Errorf("authenticate: %w", err)
	}
	span.SetAttributes(attribute.String("dirgate.outcome", "ok"), attribute.String("dirgate.subject.guid", p.GUID))
	return p, nil
}
