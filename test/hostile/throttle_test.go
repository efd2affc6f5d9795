package hostile

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dirgate/dirgate/test/faults"
	"github.com/dirgate/dirgate/test/fixture"
)

// TestTokenGuessing guesses tokens from one address and checks the throttle that
// proxy implements (docs/api.md, "Throttling of failed authentications"): with five
// failures allowed per minute, the sixth request gets 429 tooManyRequests with a
// Retry-After within the window, even with the valid token; another address is not
// affected; X-Forwarded-For does not move a client to another address; missing or
// repeated headers are not counted as guesses, over-long tokens are.
//
// Like the product (compat.md), dirgate slows repeated failures down progressively
// before refusing them: from the third failure on, each 401 is held back 250 ms,
// then twice as long with each further one (docs/api.md).
func TestTokenGuessing(t *testing.T) {
	e := demoTarget(t, "--auth-max-failures", "5", "--auth-failure-window", "1m")
	ctx := context.Background()
	u := faults.ListURL(e.p.Base, fixture.HelpDeskDN, "")
	from := func(ip string) *faults.Client { return faults.ClientFrom(ip) }
	guesser := from("127.0.0.1")

	var times []string
	for i := range 5 {
		r := guesser.Do(ctx, "GET", u, fmt.Sprintf("guess-%d", i))
		if r.Status != 401 {
			t.Fatalf("guess %d: %s, want 401", i+1, r)
		}
		times = append(times, r.Elapsed.Round(10*time.Microsecond).String())
		// A lower bound only: the answer is held at least this long by design.
		if min := [5]time.Duration{0, 0, 250 * time.Millisecond, 500 * time.Millisecond, time.Second}[i]; r.Elapsed < min {
			t.Errorf("guess %d answered after %s, want at least %s (progressive slow-down)", i+1, r.Elapsed, min)
		}
	}
	t.Logf("the five failures were answered in %s", strings.Join(times, ", "))

	r := guesser.Do(ctx, "GET", u, "guess-6")
	checkThrottled(t, "sixth guess", r)
	checkThrottled(t, "the valid token from the guessing address", guesser.Do(ctx, "GET", u, e.token))
	req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
	req.Header.Set("Adm-Authorization", e.token)
	req.Header.Set("X-Forwarded-For", "127.0.0.9")
	req.Header.Set("X-Real-IP", "127.0.0.9")
	checkThrottled(t, "a forwarded-for header from the guessing address", guesser.Send(req))

	if r := from("127.0.0.2").Do(ctx, "GET", u, e.token); r.Status != 200 {
		t.Errorf("another address with the valid token: %s, want 200", r)
	}

	// A client without a token, or with two, is misconfigured, not guessing.
	clumsy := from("127.0.0.3")
	for range 10 {
		if r := clumsy.Do(ctx, "GET", u, ""); r.Status != 401 {
			t.Fatalf("no token: %s", r)
		}
		req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
		req.Header.Add("Adm-Authorization", "a")
		req.Header.Add("Adm-Authorization", "b")
		if r := clumsy.Send(req); r.Status != 401 {
			t.Fatalf("two tokens: %s", r)
		}
	}
	if r := clumsy.Do(ctx, "GET", u, e.token); r.Status != 200 {
		t.Errorf("after missing and repeated headers: %s, want 200 (they are not guesses)", r)
	}

	// A token too long to be looked at is still a guess.
	long := from("127.0.0.4")
	for i := range 5 {
		if r := long.Do(ctx, "GET", u, strings.Repeat("x", 5000+i)); r.Status != 401 {
			t.Fatalf("long token %d: %s", i+1, r)
		}
	}
	checkThrottled(t, "after five over-long tokens", long.Do(ctx, "GET", u, e.token))
}

func checkThrottled(t *testing.T, what string, r faults.Result) {
	t.Helper()
	if r.Status != 429 {
		t.Errorf("%s: %s, want 429", what, r)
		return
	}
	if _, err := faults.CheckError(r); err != nil {
		t.Errorf("%s: %v", what, err)
	}
	s, err := strconv.Atoi(r.Header.Get("Retry-After"))
	if err != nil || s < 1 || s > 60 {
		t.Errorf("%s: Retry-After %q, want 1..60 seconds", what, r.Header.Get("Retry-After"))
	}
}
