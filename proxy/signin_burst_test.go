package proxy_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/proxy"
	"github.com/dirgate/dirgate/throttle"
)

// slowChecker is a SignIn whose every password check takes a while and is
// wrong, counting the checks that reach it: a directory under a burst.
type slowChecker struct {
	fakeSignIn
	checks atomic.Int64
	delay  time.Duration
}

func (c *slowChecker) CreateSession(ctx context.Context, name dirgate.SignInName, password string) (dirgate.SignInSession, error) {
	c.checks.Add(1)
	time.Sleep(c.delay)
	return dirgate.SignInSession{}, &dirgate.SignInError{Reason: dirgate.ReasonInvalidCredentials, DataCode: "52e"}
}

// burst sends n sign-ins with a wrong password at once and returns their answers.
func burst(h http.Handler, n int) []*httptest.ResponseRecorder {
	out := make([]*httptest.ResponseRecorder, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := httptest.NewRequest(http.MethodPost, createPath, strings.NewReader(`{"username":"a@corp.example.com","password":"x"}`))
			r.Header.Set("Content-Type", "application/json")
			<-start
			out[i] = httptest.NewRecorder()
			h.ServeHTTP(out[i], r)
		}()
	}
	close(start)
	wg.Wait()
	return out
}

// TestSignInBurstCountsBeforeTheCheck: 60 wrong passwords at once from one address
// reach the checker at most MaxFailures times, whatever the concurrency; the rest
// are 429 with Retry-After in the error shape. Counted after the check, all of
// them passed the block check before the first failure was recorded.
func TestSignInBurstCountsBeforeTheCheck(t *testing.T) {
	for _, c := range []struct {
		name    string
		perAddr int
		exact   bool
	}{
		// The gate wide open: the failure count alone holds, at exactly the limit.
		{name: "count only", perAddr: 1000, exact: true},
		// The defaults: the gate refuses most of the burst first.
		{name: "default gate", perAddr: 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			chk := &slowChecker{delay: 20 * time.Millisecond}
			e := newEnv(t, func(cfg *proxy.Config) {
				cfg.SignIn = chk
				cfg.Throttle = newThrottle(t, cfg, throttle.Config{MaxFailures: 10, SlowAfter: 1000, Window: time.Minute,
					MaxSignIns: 1000, MaxSignInsPerClient: c.perAddr})
			})
			ws := burst(e.h, 60)
			codes := map[int]int{}
			for _, w := range ws {
				codes[w.Code]++
				if w.Code == 429 {
					if w.Header().Get("Retry-After") == "" {
						t.Errorf("429 without Retry-After")
					}
					if b := errorBody(t, w); b.Code != dirgate.ETOOMANY || b.Message == "" {
						t.Errorf("429 body %s", w.Body)
					}
				}
			}
			n := int(chk.checks.Load())
			if n > 10 || n < 1 || (c.exact && n != 10) {
				t.Errorf("%d checks reached the directory, want at most 10 (exactly 10: %v)", n, c.exact)
			}
			if codes[403] != n || codes[429] != 60-n {
				t.Errorf("answers %v for %d checks, want %d 403 and the rest 429", codes, n, n)
			}
			if !c.exact {
				return
			}
			// And the address stays blocked once the burst is over.
			if w := post(e, createPath, "application/json", `{"username":"a@corp.example.com","password":"x"}`); w.Code != 429 {
				t.Errorf("after the burst: %d", w.Code)
			}
			if got := int(chk.checks.Load()); got != n {
				t.Errorf("a blocked sign-in reached the checker (%d checks)", got)
			}
		})
	}
}

// TestSignInAttemptGivenBack: a success gives its counted attempt back; a refusal
// keeps it, and so does an error (a bind may have reached the directory before it).
func TestSignInAttemptGivenBack(t *testing.T) {
	e, f := newSignInEnv(t, func(c *proxy.Config) {
		c.Throttle = newThrottle(t, c, throttle.Config{MaxFailures: 3, SlowAfter: 100, Window: time.Minute})
	})
	steps := []struct {
		password string
		want     int
	}{{"x", 403}, {"right", 200}, {"right", 200}, {"right", 200}, {"down", 502}, {"x", 403}, {"right", 429}}
	for i, s := range steps {
		w := post(e, createPath, "application/json", `{"username":"alice@corp.example.com","password":"`+s.password+`"}`)
		if w.Code != s.want {
			t.Fatalf("step %d (%s): %d %s, want %d", i, s.password, w.Code, w.Body, s.want)
		}
	}
	if n := f.calls(); n != 6 {
		t.Errorf("%d checks, want 6", n)
	}
}

// TestSignInGate: checks in progress are bounded per address and overall; the
// excess is 429 with Retry-After and never reaches the checker.
func TestSignInGate(t *testing.T) {
	f := &fakeSignIn{hold: make(chan struct{})}
	e := newEnv(t, func(c *proxy.Config) {
		c.SignIn = f
		c.Throttle = newThrottle(t, c, throttle.Config{MaxSignIns: 3, MaxSignInsPerClient: 2})
		c.ClientAddr = func(r *http.Request) string { return r.Header.Get("X-Test-Client") }
	})
	send := func(client string) chan *httptest.ResponseRecorder {
		ch := make(chan *httptest.ResponseRecorder, 1)
		r := httptest.NewRequest(http.MethodPost, createPath, strings.NewReader(`{"username":"alice@corp.example.com","password":"right"}`))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("X-Test-Client", client)
		go func() { ch <- e.serve(r) }()
		return ch
	}
	waitChecks := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); f.calls() != n; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d checks in progress, want %d", f.calls(), n)
			}
		}
	}
	a1, a2 := send("a"), send("a")
	waitChecks(2)
	if w := <-send("a"); w.Code != 429 || w.Header().Get("Retry-After") != "1" || errorBody(t, w).Code != dirgate.ETOOMANY {
		t.Errorf("third from one address: %d %q %s", w.Code, w.Header().Get("Retry-After"), w.Body)
	}
	b1 := send("b")
	waitChecks(3)
	if w := <-send("c"); w.Code != 429 {
		t.Errorf("beyond the overall bound: %d", w.Code)
	}
	close(f.hold)
	for _, ch := range []chan *httptest.ResponseRecorder{a1, a2, b1} {
		if w := <-ch; w.Code != 200 {
			t.Errorf("held sign-in: %d %s", w.Code, w.Body)
		}
	}
	if w := <-send("c"); w.Code != 200 {
		t.Errorf("after the checks ended: %d", w.Code)
	}
}

// TestSignInBurstAcrossReplicas: a burst split over two replicas sharing the count
// reaches the checkers at most MaxFailures times in all, not that many per replica.
func TestSignInBurstAcrossReplicas(t *testing.T) {
	shared := &sharedCount{n: map[string]int{}}
	chk := &slowChecker{delay: 20 * time.Millisecond}
	mod := func(c *proxy.Config) {
		c.SignIn = chk
		c.Throttle = newThrottle(t, c, throttle.Config{MaxFailures: 6, SlowAfter: 1000, Window: time.Minute, MaxSignIns: 1000, MaxSignInsPerClient: 1000, Shared: shared})
	}
	a, b := newEnv(t, mod), newEnv(t, mod)
	var wa, wb []*httptest.ResponseRecorder
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); wa = burst(a.h, 30) }()
	go func() { defer wg.Done(); wb = burst(b.h, 30) }()
	wg.Wait()
	codes := map[int]int{}
	for _, w := range append(wa, wb...) {
		codes[w.Code]++
	}
	if n := int(chk.checks.Load()); n != 6 || codes[403] != 6 || codes[429] != 54 {
		t.Errorf("%d checks, answers %v; want 6 checks in all, 6 403 and 54 429", n, codes)
	}
}
