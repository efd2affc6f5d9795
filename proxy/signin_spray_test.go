package proxy_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/proxy"
	"github.com/dirgate/dirgate/throttle"
)

// signInFrom posts a sign-in of name with password from addr.
func signInFrom(e *env, addr, name, password string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, createPath, strings.NewReader(`{"username":"`+name+`","password":"`+password+`"}`))
	r.Header.Set("Content-Type", "application/json")
	r.RemoteAddr = addr
	return e.serve(r)
}

// tokenFrom sends a listing with token from addr.
func tokenFrom(e *env, addr, token string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, listURL, nil)
	r.RemoteAddr = addr
	r.Header.Set(proxy.HeaderToken, token)
	return e.serve(r)
}

// TestSignInSprayBounded: one password tried against many names from one address
// (spraying) is bounded: once the address's failed checks, whatever the names, fill
// its budget (ClientSignInFailuresFactor × MaxFailures by default), a further name
// is answered 429 without a check reaching the directory. A valid token from that
// address is still served, and another address still signs in.
func TestSignInSprayBounded(t *testing.T) {
	const maxFailures = 3
	e, f := newSignInEnv(t, func(c *proxy.Config) {
		c.Throttle = newThrottle(t, c, throttle.Config{MaxFailures: maxFailures, SlowAfter: 1000, Window: time.Minute})
	})
	const sprayer, other = "203.0.113.5:1000", "203.0.113.6:1000"
	budget := throttle.ClientSignInFailuresFactor * maxFailures
	for i := range budget {
		if w := signInFrom(e, sprayer, fmt.Sprintf("user%d@corp.example.com", i), "Winter2026!"); w.Code != 403 {
			t.Fatalf("name %d of %d: %d %s", i+1, budget, w.Code, w.Body)
		}
	}
	checks := f.calls()
	w := signInFrom(e, sprayer, "fresh@corp.example.com", "Winter2026!")
	if w.Code != 429 || f.calls() != checks || w.Header().Get("Retry-After") == "" {
		t.Fatalf("name %d: %d Retry-After %q, %d checks made; want 429 without a check", budget+1, w.Code, w.Header().Get("Retry-After"), f.calls()-checks)
	}
	if b := errorBody(t, w); b.Code != dirgate.ETOOMANY || !strings.Contains(b.Message, "from this address") {
		t.Errorf("body %s", w.Body)
	}
	// The right password of an account not tried yet is refused too: the address,
	// not the name, has used up its checks.
	if w := signInFrom(e, sprayer, "alice@corp.example.com", "right"); w.Code != 429 || f.calls() != checks {
		t.Errorf("alice from the spraying address: %d, %d checks", w.Code, f.calls()-checks)
	}
	if w := tokenFrom(e, sprayer, goodToken); w.Code != 200 {
		t.Errorf("a valid token from the spraying address: %d", w.Code)
	}
	if w := signInFrom(e, other, "alice@corp.example.com", "right"); w.Code != 200 {
		t.Errorf("alice from another address: %d %s", w.Code, w.Body)
	}
	e.clock.Advance(time.Minute)
	if w := signInFrom(e, sprayer, "alice@corp.example.com", "right"); w.Code != 200 {
		t.Errorf("after the window: %d %s", w.Code, w.Body)
	}
}

// TestSignInSprayBoundedAcrossReplicas: with a shared count the address's budget is
// the replicas' together, not each one's.
func TestSignInSprayBoundedAcrossReplicas(t *testing.T) {
	shared := &sharedCount{n: map[string]int{}}
	const maxFailures, budget = 3, 8
	mod := func(c *proxy.Config) {
		c.Throttle = newThrottle(t, c, throttle.Config{MaxFailures: maxFailures, MaxClientSignInFailures: budget, SlowAfter: 1000, Window: time.Minute, Shared: shared})
	}
	a, fa := newSignInEnv(t, mod)
	b, fb := newSignInEnv(t, mod)
	const sprayer = "203.0.113.5:1000"
	for i := range budget {
		e := []*env{a, b}[i%2]
		if w := signInFrom(e, sprayer, fmt.Sprintf("user%d@corp.example.com", i), "x"); w.Code != 403 {
			t.Fatalf("name %d: %d %s", i+1, w.Code, w.Body)
		}
	}
	checks := fa.calls() + fb.calls()
	for name, e := range map[string]*env{"a": a, "b": b} {
		if w := signInFrom(e, sprayer, "fresh-"+name+"@corp.example.com", "x"); w.Code != 429 || fa.calls()+fb.calls() != checks {
			t.Errorf("replica %s after %d names on both: %d, %d checks", name, budget, w.Code, fa.calls()+fb.calls()-checks)
		}
	}
	if w := tokenFrom(a, sprayer, goodToken); w.Code != 200 {
		t.Errorf("a valid token from the spraying address: %d", w.Code)
	}
}

// TestSignInNameFolding: AD compares account names without regard to case or to
// the width of a character, so spellings that reach one account share its count:
// after three failures as alice, her full-width name is refused without a check.
func TestSignInNameFolding(t *testing.T) {
	e, f := newSignInEnv(t, func(c *proxy.Config) {
		c.Throttle = newThrottle(t, c, throttle.Config{MaxFailures: 3, SlowAfter: 1000, Window: time.Minute})
	})
	for i, name := range []string{"alice@corp.example.com", "ａｌｉｃｅ@corp.example.com", `CORP\\ＡＬＩＣＥ`} {
		if w := post(e, createPath, "application/json", `{"username":"`+name+`","password":"x"}`); w.Code != 403 {
			t.Fatalf("attempt %d: %d %s", i, w.Code, w.Body)
		}
	}
	checks := f.calls()
	for _, name := range []string{"ａｌｉｃｅ@corp.example.com", "Ａlice@corp.example.com", "alice@corp.example.com"} {
		if w := post(e, createPath, "application/json", `{"username":"`+name+`","password":"right"}`); w.Code != 429 || f.calls() != checks {
			t.Errorf("%s after 3 failures of its spellings: %d, %d checks", name, w.Code, f.calls()-checks)
		}
	}
	if w := post(e, createPath, "application/json", `{"username":"bob@corp.example.com","password":"right"}`); w.Code != 200 {
		t.Errorf("bob: %d %s", w.Code, w.Body)
	}
}

// TestSignInJunkNamesKeepTokenCounts: names tried from one address are counted apart
// from addresses, so however many an address tries, another address's count of bad
// tokens is not pushed out of the bounded throttle.
func TestSignInJunkNamesKeepTokenCounts(t *testing.T) {
	e, _ := newSignInEnv(t, func(c *proxy.Config) {
		c.Throttle = newThrottle(t, c, throttle.Config{MaxFailures: 3, SlowAfter: 1000, Window: time.Minute, MaxClients: 4})
	})
	const guesser, sprayer = "198.51.100.9:1000", "203.0.113.5:1000"
	for i := range 3 {
		if w := tokenFrom(e, guesser, "guess-"+strconv.Itoa(i)); w.Code != 401 {
			t.Fatalf("bad token %d: %d", i, w.Code)
		}
	}
	for i := range 10 {
		if w := signInFrom(e, sprayer, fmt.Sprintf("junk%d@corp.example.com", i), "x"); w.Code != 403 {
			t.Fatalf("junk name %d: %d %s", i, w.Code, w.Body)
		}
	}
	if w := tokenFrom(e, guesser, "one more guess"); w.Code != 429 {
		t.Errorf("the guesser after another address's junk names: %d, want 429 (its count was forgotten)", w.Code)
	}
}

// TestThrottleConcurrentBadTokens: of bad tokens sent at once from one address,
// exactly MaxFailures answer 401 and the rest 429: whether the address was
// throttled is judged in the same step that counts the failure.
func TestThrottleConcurrentBadTokens(t *testing.T) {
	const maxFailures, n = 10, 200
	e := newEnv(t, func(c *proxy.Config) {
		c.Throttle = newThrottle(t, c, throttle.Config{MaxFailures: maxFailures, SlowAfter: 1000, Window: time.Minute})
	})
	codes := make([]int, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range codes {
		wg.Go(func() {
			<-start
			codes[i] = tokenFrom(e, "198.51.100.7:4000", "guess-"+strconv.Itoa(i)).Code
		})
	}
	close(start)
	wg.Wait()
	count := map[int]int{}
	for _, c := range codes {
		count[c]++
	}
	if count[401] != maxFailures || count[429] != n-maxFailures {
		t.Errorf("answers %v, want %d 401 and %d 429", count, maxFailures, n-maxFailures)
	}
}
