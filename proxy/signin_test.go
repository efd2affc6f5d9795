package proxy_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/proxy"
	"github.com/dirgate/dirgate/throttle"
)

// fakeSignIn accepts alice@corp.example.com with "right", refuses others with the
// reason the test set, and records what reached it.
type fakeSignIn struct {
	// hold, when set, is waited on by every CreateSession: a check in progress.
	hold    chan struct{}
	mu      sync.Mutex
	names   []string
	reason  string
	ended   []string
	revoked []string
}

func (f *fakeSignIn) CreateSession(_ context.Context, name dirgate.SignInName, password string) (dirgate.SignInSession, error) {
	if f.hold != nil {
		f.mu.Lock()
		f.names = append(f.names, name.String())
		f.mu.Unlock()
		<-f.hold
		f.mu.Lock()
		f.names = f.names[:len(f.names)-1]
		f.mu.Unlock()
	}
	if password == "down" {
		f.mu.Lock()
		f.names = append(f.names, name.String())
		f.mu.Unlock()
		return dirgate.SignInSession{}, dirgate.WrapError(dirgate.EUPSTREAM, "", errors.New("dial tcp: refused"))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.names = append(f.names, name.String())
	if password == "right" && f.reason == "" {
		return dirgate.SignInSession{ID: "session-1", Expires: time.Date(2025, 1, 1, 12, 10, 0, 123456700, time.UTC)}, nil
	}
	r := f.reason
	if r == "" {
		r = dirgate.ReasonInvalidCredentials
	}
	return dirgate.SignInSession{}, &dirgate.SignInError{Reason: r, DataCode: "52e", Err: errors.New("bind data code 52e")}
}

func (f *fakeSignIn) Exchange(_ context.Context, id string) (dirgate.SignInToken, error) {
	switch id {
	case "session-1":
		return dirgate.SignInToken{Token: "dgt_x", Expires: time.Date(2025, 1, 1, 12, 30, 0, 0, time.UTC)}, nil
	case "must-change":
		return dirgate.SignInToken{}, &dirgate.SignInError{Reason: dirgate.ReasonPasswordChange}
	case "redis-down":
		return dirgate.SignInToken{}, dirgate.WrapError(dirgate.EUNAVAILABLE, "", errors.New("dial tcp: refused"))
	}
	return dirgate.SignInToken{}, dirgate.Errorf(dirgate.EUNAUTHENTICATED, "unknown session")
}

func (f *fakeSignIn) RevokeToken(_ context.Context, token string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.revoked = append(f.revoked, token)
	return nil
}

func (f *fakeSignIn) EndSession(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ended = append(f.ended, id)
	return nil
}

func (f *fakeSignIn) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.names)
}

func newSignInEnv(t *testing.T, mod func(*proxy.Config)) (*env, *fakeSignIn) {
	f := &fakeSignIn{}
	e := newEnv(t, func(c *proxy.Config) {
		c.SignIn = f
		if mod != nil {
			mod(c)
		}
	})
	return e, f
}

func post(e *env, target, ctype, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, target, strings.NewReader(body))
	if ctype != "" {
		r.Header.Set("Content-Type", ctype)
	}
	return e.serve(r)
}

const (
	createPath = "/restApi/api/authSessions/create"
	authPath   = "/restApi/api/auth"
)

func TestSignInFlow(t *testing.T) {
	e, f := newSignInEnv(t, nil)
	w := post(e, createPath, "application/json", `{"username":"alice@corp.example.com","password":"right"}`)
	if w.Code != 200 {
		t.Fatalf("create: %d %s", w.Code, w.Body)
	}
	checkJSONHeaders(t, w)
	if got, want := w.Body.String(), `{"sessionId":"session-1","totpState":null,"changePasswordReason":0,"expiresAtUtc":"2025-01-01T12:10:00.1234567Z"}`; got != want {
		t.Errorf("create body\n got %s\nwant %s", got, want)
	}
	// Field names in any ASCII case, as the product's binder takes them.
	w = post(e, strings.ToUpper(authPath)+"/", "application/json; charset=utf-8", `{"SessionID":"session-1"}`)
	if got, want := w.Body.String(), `{"token":"dgt_x","expiresAtUtc":"2025-01-01T12:30:00.0000000Z"}`; w.Code != 200 || got != want {
		t.Errorf("auth: %d %s, want %s", w.Code, got, want)
	}
	for _, c := range []struct{ target, want string }{
		{"/restApi/api/auth?token=dgt_x", "revoked"},
		{"/restApi/api/authSessions?id=session-1", "ended"},
	} {
		w := e.serve(httptest.NewRequest(http.MethodDelete, c.target, nil))
		if w.Code != http.StatusNoContent || w.Body.Len() != 0 {
			t.Errorf("DELETE %s: %d %q", c.target, w.Code, w.Body)
		}
	}
	if len(f.revoked) != 1 || f.revoked[0] != "dgt_x" || len(f.ended) != 1 || f.ended[0] != "session-1" {
		t.Errorf("revoked %q, ended %q", f.revoked, f.ended)
	}
	// The request log names routes, never the query (which holds the token).
	for _, l := range e.logLines() {
		line, _ := json.Marshal(l)
		if strings.Contains(string(line), "dgt_x") || strings.Contains(string(line), "session-1") || strings.Contains(string(line), "right") {
			t.Errorf("log line holds a secret: %s", line)
		}
	}
}

func TestSignInRefusals(t *testing.T) {
	for _, reason := range []string{dirgate.ReasonInvalidCredentials, dirgate.ReasonAccountDisabled, dirgate.ReasonAccountLockedOut,
		dirgate.ReasonAccountExpired, dirgate.ReasonLogonTime, dirgate.ReasonAccessDenied} {
		e, f := newSignInEnv(t, nil)
		f.reason = reason
		w := post(e, createPath, "application/json", `{"username":"CORP\\alice","password":"x"}`)
		b := errorBody(t, w)
		if w.Code != 403 || b.Code != dirgate.EFORBIDDEN || b.InnerError == nil || b.InnerError.Code != reason || b.InnerError.Message == "" {
			t.Errorf("%s: %d %s", reason, w.Code, w.Body)
		}
		if !strings.Contains(e.log.String(), `"msg":"sign-in refused","reason":"`+reason+`"`) || !strings.Contains(e.log.String(), `"data_code":"52e"`) ||
			strings.Contains(e.log.String(), "alice") {
			t.Errorf("%s: log %s", reason, e.log.String())
		}
	}
	e, _ := newSignInEnv(t, nil)
	w := post(e, authPath, "application/json", `{"sessionId":"must-change"}`)
	if b := errorBody(t, w); w.Code != 403 || b.InnerError == nil || b.InnerError.Code != dirgate.ReasonPasswordChange {
		t.Errorf("must-change session: %d %s", w.Code, w.Body)
	}
	w = post(e, authPath, "application/json", `{"sessionId":"nope"}`)
	if b := errorBody(t, w); w.Code != 401 || b.Message != proxy.UnauthenticatedMessage {
		t.Errorf("unknown session: %d %s", w.Code, w.Body)
	}
	w = post(e, authPath, "application/json", `{"sessionId":"redis-down"}`)
	if b := errorBody(t, w); w.Code != 503 || strings.Contains(w.Body.String(), "refused") {
		t.Errorf("store down: %d %s (%+v)", w.Code, w.Body, b)
	}
}

// TestSignInHostileInput: each is a 4xx in the error shape and never reaches the
// credential check (so never the directory).
func TestSignInHostileInput(t *testing.T) {
	long := strings.Repeat("a", dirgate.MaxSignInNameLength) + "@corp.example.com"
	cases := []struct {
		name, ctype, body string
		status            int
	}{
		{"wrong type", "text/plain", `{"username":"a@b.c","password":"x"}`, 415},
		{"no type", "", `{"username":"a@b.c","password":"x"}`, 415},
		{"over the bound", "application/json", `{"username":"a@b.c","password":"` + strings.Repeat("x", proxy.MaxBodyLength) + `"}`, 413},
		{"malformed", "application/json", `{"username":"a@b.c",`, 400},
		{"not an object", "application/json", `["a@b.c","x"]`, 400},
		{"empty", "application/json", ``, 400},
		{"twice", "application/json", `{"username":"a@b.c","USERNAME":"d@b.c","password":"x"}`, 400},
		{"number", "application/json", `{"username":5,"password":"x"}`, 400},
		{"lone surrogate", "application/json", `{"username":"a\ud800@b.c","password":"x"}`, 400},
		{"no name", "application/json", `{"password":"x"}`, 400},
		{"NUL", "application/json", `{"username":"a\u0000b@corp.example.com","password":"x"}`, 400},
		{"overlong name", "application/json", `{"username":"` + long + `","password":"x"}`, 400},
		{"overlong password", "application/json", `{"username":"a@b.c","password":"` + strings.Repeat("x", dirgate.MaxPasswordLength+1) + `"}`, 400},
		{"a DN", "application/json", `{"username":"CN=Administrator,CN=Users,DC=corp,DC=example,DC=com","password":"x"}`, 400},
		{"filter in a UPN", "application/json", `{"username":"*)(objectClass=*@corp.example.com","password":"x"}`, 400},
		{"filter down-level", "application/json", `{"username":"CORP\\*)(cn=*","password":"x"}`, 400},
		{"no user", "application/json", `{"username":"CORP\\","password":"x"}`, 400},
		{"bad domain", "application/json", `{"username":"a@corp..example","password":"x"}`, 400},
		{"bare name", "application/json", `{"username":"administrator","password":"x"}`, 400},
		{"invalid UTF-8", "application/json", "{\"username\":\"a\xff@b.c\",\"password\":\"x\"}", 400},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, f := newSignInEnv(t, nil)
			w := post(e, createPath, c.ctype, c.body)
			if b := errorBody(t, w); w.Code != c.status || b.Message == "" {
				t.Errorf("%d %s, want %d", w.Code, w.Body, c.status)
			}
			if f.calls() != 0 {
				t.Errorf("reached the credential check: %q", f.names)
			}
		})
	}
}

func TestSignInMethodsAndPaths(t *testing.T) {
	e, _ := newSignInEnv(t, nil)
	for _, c := range []struct {
		method, target, allow string
	}{
		{http.MethodGet, createPath, "POST"},
		{http.MethodDelete, createPath, "POST"},
		{http.MethodGet, authPath, "POST, DELETE"},
		{http.MethodPut, authPath, "POST, DELETE"},
		{http.MethodPost, "/restApi/api/authSessions", "DELETE"},
		{"OST", authPath, "POST, DELETE"},
		{"post", createPath, "POST"},
	} {
		w := e.serve(httptest.NewRequest(c.method, c.target, nil))
		if w.Code != 405 || w.Header().Get("Allow") != c.allow {
			t.Errorf("%s %s: %d Allow %q", c.method, c.target, w.Code, w.Header().Get("Allow"))
		}
	}
	for _, target := range []string{"/restApi/api/auth?token=", "/restApi/api/authSessions", "/restApi/api/auth?token=a&TOKEN=b"} {
		if w := e.serve(httptest.NewRequest(http.MethodDelete, target, nil)); w.Code != 400 {
			t.Errorf("DELETE %s: %d", target, w.Code)
		}
	}
	// Without SignIn the paths do not exist.
	plain := newEnv(t, nil)
	if w := post(plain, createPath, "application/json", `{}`); w.Code != 404 {
		t.Errorf("without sign-in: %d", w.Code)
	}
}

// TestSignInThrottle: password checks are counted per account name and address.
// Once alice's failures from an address fill the window, her right password from
// there is refused without a check (checking it would answer whether it is right);
// another account's right password from the same address is not (one address is
// many people behind an ingress), nor are tokens from it.
func TestSignInThrottle(t *testing.T) {
	e, f := newSignInEnv(t, func(c *proxy.Config) {
		c.Throttle = newThrottle(t, c, throttle.Config{MaxFailures: 3, SlowAfter: 100, Window: time.Minute})
	})
	// Spellings of one name share a count: the case, and user@domain or DOMAIN\user.
	for i, name := range []string{"alice@corp.example.com", "ALICE@corp.example.com", `CORP\\Alice`} {
		if w := post(e, createPath, "application/json", `{"username":"`+name+`","password":"x"}`); w.Code != 403 {
			t.Fatalf("attempt %d: %d %s", i, w.Code, w.Body)
		}
	}
	checks := f.calls()
	w := post(e, createPath, "application/json", `{"username":"alice@corp.example.com","password":"right"}`)
	if w.Code != 429 || !regexp.MustCompile(`^[1-9][0-9]*$`).MatchString(w.Header().Get("Retry-After")) || f.calls() != checks {
		t.Fatalf("alice after 3 failures: %d Retry-After %q, %d checks", w.Code, w.Header().Get("Retry-After"), f.calls()-checks)
	}
	if b := errorBody(t, w); b.Code != dirgate.ETOOMANY {
		t.Errorf("code %q", b.Code)
	}
	if w := post(e, createPath, "application/json", `{"username":"bob@corp.example.com","password":"right"}`); w.Code != 200 {
		t.Errorf("bob from the same address: %d %s", w.Code, w.Body)
	}
	if w := e.do(http.MethodGet, listURL, nil); w.Code != 200 {
		t.Errorf("a token from the same address: %d", w.Code)
	}
	e.clock.Advance(time.Minute)
	if w := post(e, createPath, "application/json", `{"username":"alice@corp.example.com","password":"right"}`); w.Code != 200 {
		t.Errorf("after the window: %d %s", w.Code, w.Body)
	}
}

// TestExchangeThrottle: unknown session ids count against the address like bad
// tokens, and once they fill the window a further unknown one is 429; a valid
// session id is still exchanged from that address, here and, with a shared count,
// when the other replicas filled it.
func TestExchangeThrottle(t *testing.T) {
	shared := &sharedCount{n: map[string]int{}}
	mod := func(c *proxy.Config) {
		c.Throttle = newThrottle(t, c, throttle.Config{MaxFailures: 3, SlowAfter: 100, Window: time.Minute, Shared: shared})
	}
	a, _ := newSignInEnv(t, mod)
	b, _ := newSignInEnv(t, mod)
	for i, e := range []*env{a, a, a} {
		if w := post(e, authPath, "application/json", `{"sessionId":"nope"}`); w.Code != 401 {
			t.Fatalf("unknown session id %d: %d", i, w.Code)
		}
	}
	for name, e := range map[string]*env{"this replica": a, "another replica": b} {
		w := post(e, authPath, "application/json", `{"sessionId":"nope"}`)
		if w.Code != 429 || w.Header().Get("Retry-After") == "" || errorBody(t, w).Code != dirgate.ETOOMANY {
			t.Errorf("%s: unknown session id after 3: %d Retry-After %q", name, w.Code, w.Header().Get("Retry-After"))
		}
		if w := post(e, authPath, "application/json", `{"sessionId":"session-1"}`); w.Code != 200 {
			t.Errorf("%s: valid session id from the throttled address: %d %s", name, w.Code, w.Body)
		}
	}
}

// sharedCount is a shared throttle.Counter as every replica sees it, in a fixed
// window of which 30 s are left, as the Redis one counts.
type sharedCount struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *sharedCount) Fail(_ context.Context, key string, limit int, _ time.Time) (int, time.Duration, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[key]++
	return c.n[key], 30 * time.Second, c.n[key] > limit, nil
}

func (c *sharedCount) Take(_ context.Context, key string, limit int, _ time.Time) (int, time.Duration, func(context.Context) error, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[key] >= limit {
		return c.n[key], 30 * time.Second, nil, nil
	}
	c.n[key]++
	return c.n[key], 0, func(context.Context) error {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.n[key]--
		return nil
	}, nil
}

func (c *sharedCount) Blocked(_ context.Context, key string, limit int, _ time.Time) (time.Duration, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return 30 * time.Second, c.n[key] >= limit, nil
}

// TestSignInThrottleAcrossReplicas: failures made on two replicas add up.
func TestSignInThrottleAcrossReplicas(t *testing.T) {
	shared := &sharedCount{n: map[string]int{}}
	mod := func(c *proxy.Config) {
		c.Throttle = newThrottle(t, c, throttle.Config{MaxFailures: 4, SlowAfter: 100, Window: time.Minute, Shared: shared})
	}
	a, _ := newSignInEnv(t, mod)
	b, _ := newSignInEnv(t, mod)
	for i, e := range []*env{a, b, a, b} {
		if w := post(e, createPath, "application/json", `{"username":"alice@corp.example.com","password":"x"}`); w.Code != 403 {
			t.Fatalf("attempt %d: %d", i, w.Code)
		}
	}
	for _, e := range []*env{a, b} {
		w := post(e, createPath, "application/json", `{"username":"alice@corp.example.com","password":"right"}`)
		if w.Code != 429 || w.Header().Get("Retry-After") != "30" {
			t.Errorf("after 2+2 failures: %d Retry-After %q", w.Code, w.Header().Get("Retry-After"))
		}
		// Another account from the same address is not refused.
		if w := post(e, createPath, "application/json", `{"username":"bob@corp.example.com","password":"right"}`); w.Code != 200 {
			t.Errorf("bob after alice's 2+2 failures: %d %s", w.Code, w.Body)
		}
	}
}
