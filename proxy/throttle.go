package proxy

import (
	"context"
	"github.com/dirgate/dirgate/internal/ctxsleep"
	"net/http"
	"strconv"
	"time"

	"github.com/dirgate/dirgate"
)

// Throttle judges failed authentications and password checks per client address
// (*throttle.Throttle; docs/auth.md, "Throttling"): one call per event. The proxy
// holds the answers it is told to hold and words the 429s.
type Throttle interface {
	// TokenFailed counts a rejected token from client.
	TokenFailed(ctx context.Context, client string) dirgate.Throttled
	// SessionIDFailed counts an unknown session id from client.
	SessionIDFailed(ctx context.Context, client string) dirgate.Throttled
	// StartSignIn judges and counts a password check of name from client before
	// it is made; unless it is refused, finish follows with the check's outcome
	// and says how long to hold the answer.
	StartSignIn(ctx context.Context, client string, name dirgate.SignInName) (finish func(context.Context, error) time.Duration, v dirgate.Throttled)
}

// throttled holds the answer as v says and, when v refuses it, sets Retry-After
// and returns the 429 worded by refusal; otherwise it returns nil.
func throttled(w http.ResponseWriter, r *http.Request, v dirgate.Throttled, refusal func(dirgate.ThrottleBound) error) error {
	ctxsleep.Sleep(r.Context(), v.Hold)
	if v.Refused == dirgate.NotThrottled {
		return nil
	}
	w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(v.RetryAfter)))
	return refusal(v.Refused)
}

// retryAfterSeconds renders a wait as Retry-After seconds, rounded up: a client that
// waits that long is no longer blocked.
func retryAfterSeconds(d time.Duration) int {
	s := int((d + time.Second - 1) / time.Second)
	return max(s, 1)
}
