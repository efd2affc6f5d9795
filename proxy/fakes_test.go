package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
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

// Tokens the fake authenticator knows.
const (
	goodToken = "good-token-0123456789"
	downToken = "token-while-directory-down"
)

var alice = dirgate.Principal{DN: "CN=Alice,OU=Users,DC=corp,DC=com", GUID: "11111111-2222-3333-4444-555555555555"}

// fakeAuth accepts goodToken, fails downToken as an unreachable directory would, and
// rejects anything else as unknown.
type fakeAuth struct {
	mu     sync.Mutex
	calls  int
	tokens []string
}

func (a *fakeAuth) Authenticate(_ context.Context, token string) (dirgate.Principal, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls++
	a.tokens = append(a.tokens, token)
	switch token {
	case goodToken:
		return alice, nil
	case downToken:
		return dirgate.Principal{}, dirgate.WrapError(dirgate.EUPSTREAM, "", io.ErrUnexpectedEOF)
	}
	return dirgate.Principal{}, dirgate.Errorf(dirgate.EUNAUTHENTICATED, "unknown token")
}

func (a *fakeAuth) callCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls
}

// fakeService records its calls and answers with what the test set.
type fakeService struct {
	objs   []dirgate.Object
	result dirgate.OperationResult
	err    error

	listCalls   int
	removeCalls int
	addCalls    int
	principal   dirgate.Principal
	group       dirgate.Identifier
	member      dirgate.Identifier
	opts        dirgate.ListOptions
}

func (s *fakeService) List(_ context.Context, p dirgate.Principal, group dirgate.Identifier, opts dirgate.ListOptions) ([]dirgate.Object, error) {
	s.listCalls++
	s.principal, s.group, s.opts = p, group, opts
	return s.objs, s.err
}

func (s *fakeService) Remove(_ context.Context, p dirgate.Principal, group, member dirgate.Identifier) (dirgate.OperationResult, error) {
	s.removeCalls++
	s.principal, s.group, s.member = p, group, member
	return s.result, s.err
}

func (s *fakeService) Add(_ context.Context, p dirgate.Principal, group, member dirgate.Identifier) (dirgate.OperationResult, error) {
	s.addCalls++
	s.principal, s.group, s.member = p, group, member
	return s.result, s.err
}

var _ proxy.Service = (*fakeService)(nil)

// clock is a settable clock for the throttle; tests never sleep.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// env is a handler with fakes, a clock and a captured JSON log.
type env struct {
	t     *testing.T
	h     http.Handler
	auth  *fakeAuth
	svc   *fakeService
	clock *clock
	log   *bytes.Buffer
}

func newEnv(t *testing.T, mod func(*proxy.Config)) *env {
	t.Helper()
	e := &env{t: t, auth: &fakeAuth{}, svc: &fakeService{}, clock: &clock{now: time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)}, log: &bytes.Buffer{}}
	cfg := proxy.Config{
		Authenticator: e.auth,
		Service:       e.svc,
		Logger:        slog.New(slog.NewJSONHandler(e.log, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Now:           e.clock.Now,
	}
	if mod != nil {
		mod(&cfg)
	}
	if cfg.Throttle == nil {
		cfg.Throttle = newThrottle(t, &cfg, throttle.Config{})
	}
	h, err := proxy.New(cfg)
	if err != nil {
		t.Fatalf("proxy.New: %v", err)
	}
	e.h = h
	return e
}

// newThrottle is a throttle of cfg on c's clock.
func newThrottle(t testing.TB, c *proxy.Config, cfg throttle.Config) *throttle.Throttle {
	t.Helper()
	cfg.Now = c.Now
	th, err := throttle.New(cfg)
	if err != nil {
		t.Fatalf("throttle.New: %v", err)
	}
	return th
}

const api = "/restApi/api/directoryObjects/groupMembers"

// do serves one request with the good token unless headers say otherwise.
func (e *env) do(method, target string, hdr map[string]string) *httptest.ResponseRecorder {
	e.t.Helper()
	r := httptest.NewRequest(method, target, nil)
	r.Header.Set(proxy.HeaderToken, goodToken)
	for k, v := range hdr {
		if v == "" {
			r.Header.Del(k)
		} else {
			r.Header.Set(k, v)
		}
	}
	return e.serve(r)
}

func (e *env) serve(r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, r)
	return w
}

// logLines returns the captured log records, decoded.
func (e *env) logLines() []map[string]any {
	e.t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(e.log.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			e.t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// errorBody decodes an error response and checks the headers every error carries.
func errorBody(t *testing.T, w *httptest.ResponseRecorder) proxy.ErrorResponse {
	t.Helper()
	checkJSONHeaders(t, w)
	var b proxy.ErrorResponse
	dec := json.NewDecoder(bytes.NewReader(w.Body.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		t.Fatalf("error body %q: %v", w.Body.String(), err)
	}
	return b
}

// checkJSONHeaders checks the headers of every JSON response (docs/api.md).
func checkJSONHeaders(t *testing.T, w *httptest.ResponseRecorder) {
	t.Helper()
	want := map[string]string{
		"Content-Type":           "application/json; charset=utf-8",
		"Content-Length":         strconv.Itoa(w.Body.Len()),
		"Cache-Control":          "no-store",
		"X-Content-Type-Options": "nosniff",
	}
	for k, v := range want {
		if got := w.Header().Get(k); got != v {
			t.Errorf("header %s %q, want %q", k, got, v)
		}
	}
}
