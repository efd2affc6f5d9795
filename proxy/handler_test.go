package proxy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/proxy"
	"github.com/dirgate/dirgate/throttle"
)

const groupDN = "CN=Sales,OU=Groups,DC=corp,DC=com"

var listURL = api + "?group=" + url.QueryEscape(groupDN)

func TestRouting(t *testing.T) {
	tests := []struct {
		name   string
		base   string // Config.BasePath
		target string
		want   int
	}{
		{"default base", "", listURL, 200},
		// docs/compatibility.md, "Requests": clients use /restapi/api/... on a
		// case-insensitive server.
		{"lower-case path", "", "/restapi/api/directoryobjects/groupmembers?group=S-1-5-11", 200},
		{"mixed-case path", "", "/RESTAPI/API/directoryObjects/GROUPMEMBERS?group=S-1-5-11", 200},
		// One trailing slash names the same resource; two do not.
		{"trailing slash", "", api + "/?group=S-1-5-11", 200},
		{"two trailing slashes", "", api + "//?group=S-1-5-11", 404},
		{"prefix of the path", "", "/restApi/api/directoryObjects", 404},
		{"longer path", "", api + "/x?group=S-1-5-11", 404},
		{"root", "", "/", 404},
		{"no base path by default", "", "/api/directoryObjects/groupMembers?group=S-1-5-11", 404},
		// Unicode case folding would match "ſ" (U+017F) to "s"; the server folds ASCII only.
		{"long s", "", "/re%C5%BFtApi/api/directoryObjects/groupMembers?group=S-1-5-11", 404},
		// "/" means no virtual directory.
		{"empty base", "/", "/api/directoryObjects/groupMembers?group=S-1-5-11", 200},
		{"empty base, old path", "/", listURL, 404},
		{"custom base", "/dirgate/v1", "/DIRGATE/V1/api/directoryObjects/groupMembers?group=S-1-5-11", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, func(c *proxy.Config) { c.BasePath = tt.base })
			w := e.do("GET", tt.target, nil)
			if w.Code != tt.want {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.want, w.Body.String())
			}
			if tt.want == 404 {
				if b := errorBody(t, w); b.Code != "notFound" || b.Message == "" {
					t.Errorf("404 body %+v", b)
				}
				if e.auth.callCount() != 0 {
					t.Errorf("an unknown path was authenticated")
				}
			}
		})
	}
}

func TestMethods(t *testing.T) {
	// HEAD and OPTIONS are refused like any other method (docs/api.md).
	for _, m := range []string{"PUT", "PATCH", "HEAD", "OPTIONS", "TRACE", "get", "post"} {
		t.Run(m, func(t *testing.T) {
			e := newEnv(t, nil)
			w := e.do(m, listURL, nil)
			if w.Code != 405 {
				t.Fatalf("status %d, want 405", w.Code)
			}
			if got := w.Header().Get("Allow"); got != "GET, POST, DELETE" {
				t.Errorf("Allow %q", got)
			}
			if b := errorBody(t, w); b.Code != "methodNotAllowed" {
				t.Errorf("code %q", b.Code)
			}
			// Routing precedes authentication: a 405 needs no token.
			if e.auth.callCount() != 0 || e.svc.listCalls+e.svc.removeCalls+e.svc.addCalls != 0 {
				t.Errorf("the authenticator or service was called")
			}
		})
	}
}

func TestList(t *testing.T) {
	e := newEnv(t, nil)
	e.svc.objs = []dirgate.Object{{GUID: "g1", DN: "CN=Bob,DC=corp,DC=com", DisplayName: "Bob", ObjectType: "user", ObjectTypeCode: 2, SID: "S-1-5-21-1-2-3-1105"}}
	w := e.do("GET", listURL+"&includeIndirect=True&properties=Mail,department&sizeLimit=5", nil)
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body.String())
	}
	checkJSONHeaders(t, w)
	// The service gets the parsed request and the authenticated principal.
	want := dirgate.ListOptions{IncludeIndirect: true, Properties: []string{"department", "mail"}, SizeLimit: 5}
	if e.svc.group.Canonical() != groupDN || e.svc.principal.DN != alice.DN ||
		e.svc.opts.IncludeIndirect != want.IncludeIndirect || e.svc.opts.SizeLimit != want.SizeLimit || !slices.Equal(e.svc.opts.Properties, want.Properties) {
		t.Errorf("service got group %q principal %q opts %+v", e.svc.group.Canonical(), e.svc.principal.DN, e.svc.opts)
	}
	var got []map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	// Object.MarshalJSON: properties {} when none; SID is never rendered.
	if len(got) != 1 || got[0]["guid"] != "g1" || fmt.Sprint(got[0]["properties"]) != "map[]" || strings.Contains(w.Body.String(), "S-1-5-21") {
		t.Errorf("body %s", w.Body.String())
	}
}

func TestListEmptyIsArray(t *testing.T) {
	for _, objs := range [][]dirgate.Object{nil, {}} {
		e := newEnv(t, nil)
		e.svc.objs = objs
		w := e.do("GET", listURL, nil)
		if w.Code != 200 || w.Body.String() != "[]" {
			t.Errorf("service returned %#v: status %d body %q, want 200 []", objs, w.Code, w.Body.String())
		}
	}
}

func TestRemove(t *testing.T) {
	e := newEnv(t, nil)
	e.svc.result = dirgate.OperationResult{InnerMessages: []dirgate.InnerMessage{}, ActualObjectDN: groupDN, ExtraInfo: map[string]string{}}
	w := e.do("DELETE", listURL+"&member=S-1-5-21-1-2-3-1105&includeIndirect=bogus", nil)
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body.String())
	}
	want := `{"resultType":0,"innerMessages":[],"exception":null,"actualObjectDN":"CN=Sales,OU=Groups,DC=corp,DC=com","noChanges":false,"extraInfo":{}}`
	if w.Body.String() != want {
		t.Errorf("body %s\nwant %s", w.Body.String(), want)
	}
	if e.svc.removeCalls != 1 || e.svc.member.Canonical() != "S-1-5-21-1-2-3-1105" || e.svc.principal.DN != alice.DN {
		t.Errorf("service: %d calls, member %q, principal %q", e.svc.removeCalls, e.svc.member.Canonical(), e.svc.principal.DN)
	}
}

func TestBadRequests(t *testing.T) {
	long := strings.Repeat("a", proxy.MaxQueryLength)
	tests := []struct {
		name      string
		method    string
		target    string
		wantParam string
	}{
		{"group missing", "GET", api, "group"},
		{"repeated group", "GET", listURL + "&group=S-1-5-11", "group"},
		{"repeated in other case", "GET", listURL + "&GROUP=S-1-5-11", "group"},
		{"includeIndirect yes", "GET", listURL + "&includeIndirect=yes", "includeIndirect"},
		{"sizeLimit negative", "GET", listURL + "&sizeLimit=-1", "sizeLimit"},
		{"sizeLimit above max", "GET", listURL + "&sizeLimit=1000001", "sizeLimit"},
		{"properties with space", "GET", listURL + "&properties=a,%20b", "properties"},
		{"member missing", "DELETE", listURL, "member"},
		{"bad escape", "GET", listURL + "&x=%G1", ""},
		{"query too long", "GET", listURL + "&x=" + long, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			w := e.do(tt.method, tt.target, nil)
			if w.Code != 400 {
				t.Fatalf("status %d, want 400: %s", w.Code, w.Body.String())
			}
			b := errorBody(t, w)
			if b.Code != "invalid" || b.Message == "" {
				t.Errorf("body %+v", b)
			}
			if tt.wantParam == "" && b.ModelState != nil {
				t.Errorf("modelState %v, want none", b.ModelState)
			}
			if tt.wantParam != "" && (len(b.ModelState) != 1 || len(b.ModelState[tt.wantParam]) != 1 || b.ModelState[tt.wantParam][0] != b.Message) {
				t.Errorf("modelState %v, want {%q: [message]}", b.ModelState, tt.wantParam)
			}
			if e.svc.listCalls+e.svc.removeCalls != 0 {
				t.Errorf("the service was called")
			}
		})
	}
}

func TestBodyRefused(t *testing.T) {
	tests := []struct {
		name    string
		method  string
		prepare func(r *http.Request)
	}{
		{"content-length", "GET", func(r *http.Request) {
			r.Body, r.ContentLength = io.NopCloser(strings.NewReader("{}")), 2
		}},
		// net/http reports a chunked body as ContentLength -1.
		{"chunked", "DELETE", func(r *http.Request) {
			r.Body, r.ContentLength, r.TransferEncoding = io.NopCloser(strings.NewReader("")), -1, []string{"chunked"}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			// No group either: the body is checked before the query.
			r := httptest.NewRequest(tt.method, api, nil)
			r.Header.Set(proxy.HeaderToken, goodToken)
			tt.prepare(r)
			w := e.serve(r)
			if b := errorBody(t, w); w.Code != 400 || b.Code != "invalid" || !strings.Contains(b.Message, "body") {
				t.Errorf("status %d body %+v, want 400 about the body", w.Code, b)
			}
			if e.svc.listCalls+e.svc.removeCalls != 0 {
				t.Errorf("the service was called")
			}
		})
	}
	// An explicit "Content-Length: 0" is no body.
	e := newEnv(t, nil)
	r := httptest.NewRequest("GET", listURL, strings.NewReader(""))
	r.Header.Set(proxy.HeaderToken, goodToken)
	r.Header.Set("Content-Length", "0")
	if w := e.serve(r); w.Code != 200 {
		t.Errorf("Content-Length 0: status %d", w.Code)
	}
}

// TestBodyOverTheWire checks the body rule against a real net/http server, which is
// what sets ContentLength and TransferEncoding.
func TestBodyOverTheWire(t *testing.T) {
	e := newEnv(t, nil)
	srv := httptest.NewServer(e.h)
	defer srv.Close()
	for name, body := range map[string]io.Reader{
		"sized":   strings.NewReader("x"),
		"chunked": io.MultiReader(strings.NewReader("x")), // unknown length: sent chunked
	} {
		req, _ := http.NewRequest("GET", srv.URL+listURL, body)
		req.Header.Set(proxy.HeaderToken, goodToken)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Errorf("%s body: status %d, want 400", name, resp.StatusCode)
		}
	}
}

func TestServiceErrors(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		wantStatus int
		wantCode   string
	}{
		{"unknown group", &dirgate.Error{Code: dirgate.ENOTFOUND, Param: "group", Message: "The group was not found."}, 404, "notFound"},
		{"not a group", dirgate.InvalidParam("group", "The group parameter names a user, not a group."), 400, "invalid"},
		{"forbidden", dirgate.Errorf(dirgate.EFORBIDDEN, "You may not remove members from this group."), 403, "forbidden"},
		{"directory down", fmt.Errorf("resolve group: %w", dirgate.WrapError(dirgate.EUPSTREAM, "", errors.New(secret))), 502, "upstreamError"},
		{"breaker open", dirgate.Errorf(dirgate.EUNAVAILABLE, ""), 503, "upstreamUnavailable"},
		{"timeout", fmt.Errorf("members: %w", context.DeadlineExceeded), 504, "upstreamTimeout"},
		{"bug", errors.New(secret), 500, "internal"},
	}
	for _, tt := range tests {
		for _, method := range []string{"GET", "DELETE"} {
			t.Run(tt.name+" "+method, func(t *testing.T) {
				e := newEnv(t, nil)
				e.svc.err = tt.err
				w := e.do(method, listURL+"&member=S-1-5-11", nil)
				if b := errorBody(t, w); w.Code != tt.wantStatus || b.Code != tt.wantCode {
					t.Errorf("status %d code %q, want %d %q", w.Code, b.Code, tt.wantStatus, tt.wantCode)
				}
				if strings.Contains(w.Body.String(), "hunter2") || strings.Contains(w.Body.String(), "10.0.0.5") {
					t.Errorf("internal text reached the client: %s", w.Body.String())
				}
			})
		}
	}
}

// TestInternalErrorGoesToLogOnly: the detail of a 5xx is in the request's log line,
// with method and route, and nowhere in the response.
func TestInternalErrorGoesToLogOnly(t *testing.T) {
	e := newEnv(t, nil)
	e.svc.err = fmt.Errorf("members of x: %w", errors.New(secret))
	w := e.do("GET", listURL, nil)
	if w.Code != 500 || strings.Contains(w.Body.String(), "hunter2") || strings.Contains(w.Body.String(), "members of") {
		t.Fatalf("status %d body %s", w.Code, w.Body.String())
	}
	lines := e.logLines()
	if len(lines) != 1 {
		t.Fatalf("%d log lines, want 1", len(lines))
	}
	l := lines[0]
	if l["level"] != "ERROR" || l["method"] != "GET" || l["route"] != "groupMembers" || l["status"] != 500.0 || !strings.Contains(fmt.Sprint(l["error"]), "hunter2") {
		t.Errorf("log line %v", l)
	}
}

func TestCanceledWritesNothing(t *testing.T) {
	e := newEnv(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	e.svc.err = fmt.Errorf("members: %w", context.Canceled)
	cancel()
	r := httptest.NewRequest("GET", listURL, nil).WithContext(ctx)
	r.Header.Set(proxy.HeaderToken, goodToken)
	w := httptest.NewRecorder()
	func() {
		defer func() {
			// The handler aborts the connection so that net/http cannot send a 200.
			if p := recover(); p != http.ErrAbortHandler {
				t.Errorf("panic %v, want http.ErrAbortHandler", p)
			}
		}()
		e.h.ServeHTTP(w, r)
	}()
	if w.Body.Len() != 0 || len(w.Header()) != 0 {
		t.Errorf("wrote headers %v body %q", w.Header(), w.Body.String())
	}
	if l := e.logLines(); len(l) != 1 || l[0]["status"] != 499.0 || l[0]["level"] != "INFO" || l[0]["code"] != "canceled" {
		t.Errorf("log %v", l)
	}
}

func TestRequestLog(t *testing.T) {
	e := newEnv(t, nil)
	token := "secret-token-" + strings.Repeat("z", 40)
	e.do("GET", listURL+"&properties=mail", nil)                                                      // 200, authenticated
	e.do("GET", listURL+"&x="+strings.Repeat("q", 5000), map[string]string{proxy.HeaderToken: token}) // 401
	e.do("GET", "/nowhere/"+strings.Repeat("p", 5000), nil)                                           // 404
	lines := e.logLines()
	if len(lines) != 3 {
		t.Fatalf("%d log lines, want one per request", len(lines))
	}
	ok := lines[0]
	if ok["route"] != "groupMembers" || ok["status"] != 200.0 || ok["subject"] != alice.DN || ok["group"] != groupDN || ok["bytes"] == 0.0 || ok["level"] != "INFO" {
		t.Errorf("200 line %v", ok)
	}
	if _, has := ok["duration"]; !has {
		t.Errorf("no duration in %v", ok)
	}
	if l := lines[1]; l["status"] != 401.0 || l["code"] != "unauthenticated" || l["subject"] != nil {
		t.Errorf("401 line %v", l)
	}
	if l := lines[2]; l["route"] != "notFound" || l["status"] != 404.0 {
		t.Errorf("404 line %v", l)
	}
	all := e.log.String()
	for _, leak := range []string{token, goodToken, "qqqq", "pppp", "nowhere", "properties"} {
		if strings.Contains(all, leak) {
			t.Errorf("log contains %q:\n%s", leak, all)
		}
	}
}

// TestRequestLogBoundsValues: identifiers from the request are cut in the log.
func TestRequestLogBoundsValues(t *testing.T) {
	e := newEnv(t, nil)
	dn := "CN=" + strings.Repeat("x", 1500) + ",DC=corp"
	e.do("GET", api+"?group="+url.QueryEscape(dn), nil)
	l := e.logLines()
	if len(l) != 1 || len(fmt.Sprint(l[0]["group"])) > 300 || !strings.HasPrefix(fmt.Sprint(l[0]["group"]), "CN=xxx") {
		t.Errorf("log %v", l)
	}
}

func TestAuthentication(t *testing.T) {
	tests := []struct {
		name       string
		header     []string // values of Adm-Authorization
		wantStatus int
		wantCalls  int
	}{
		{"missing", nil, 401, 0},
		{"empty", []string{""}, 401, 0},
		// Two tokens: which one is meant is unknowable.
		{"repeated", []string{goodToken, goodToken}, 401, 0},
		{"unknown", []string{"nope"}, 401, 1},
		// The raw token, no scheme (docs/compatibility.md, "Requests"): "Bearer x" is
		// just an unknown token.
		{"with scheme", []string{"Bearer " + goodToken}, 401, 1},
		{"too long", []string{strings.Repeat("t", proxy.MaxTokenLength+1)}, 401, 0},
		{"good", []string{goodToken}, 200, 1},
		// The authenticator could not judge the token: that is the directory's failure.
		{"directory down", []string{downToken}, 502, 1},
	}
	for _, tt := range tests {
		for _, method := range []string{"GET", "DELETE"} {
			t.Run(tt.name+" "+method, func(t *testing.T) {
				e := newEnv(t, nil)
				r := httptest.NewRequest(method, listURL+"&member=S-1-5-11", nil)
				for _, v := range tt.header {
					r.Header.Add(proxy.HeaderToken, v)
				}
				w := e.serve(r)
				if w.Code != tt.wantStatus || e.auth.callCount() != tt.wantCalls {
					t.Fatalf("status %d after %d authenticator calls, want %d after %d", w.Code, e.auth.callCount(), tt.wantStatus, tt.wantCalls)
				}
				if w.Code == 401 {
					b := errorBody(t, w)
					if b.Message != proxy.UnauthenticatedMessage || b.Code != "unauthenticated" {
						t.Errorf("401 body %+v", b)
					}
				}
				if w.Code != 200 && e.svc.listCalls+e.svc.removeCalls != 0 {
					t.Errorf("the service was called without a principal")
				}
			})
		}
	}
}

// TestAuthenticateBeforeValidating: a request without a token learns nothing about
// its parameters.
func TestAuthenticateBeforeValidating(t *testing.T) {
	e := newEnv(t, nil)
	if w := e.do("GET", api+"?sizeLimit=-1", map[string]string{proxy.HeaderToken: ""}); w.Code != 401 {
		t.Errorf("status %d, want 401", w.Code)
	}
}

// TestThrottle: an address's rejected tokens are answered 401 until they fill the
// window, then 429 with Retry-After; every token is still checked, and a valid one
// is served from a throttled address.
func TestThrottle(t *testing.T) {
	e := newEnv(t, func(c *proxy.Config) {
		c.Throttle = newThrottle(t, c, throttle.Config{MaxFailures: 3, Window: time.Minute})
	})
	from := func(addr, token string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", listURL, nil)
		r.RemoteAddr = addr
		r.Header.Set(proxy.HeaderToken, token)
		return e.serve(r)
	}
	const a, b = "192.0.2.1:1000", "192.0.2.2:1000"
	for i := 0; i < 3; i++ {
		if w := from(a, "guess"); w.Code != 401 {
			t.Fatalf("failure %d: status %d", i+1, w.Code)
		}
		e.clock.Advance(time.Second)
	}
	// Missing tokens and directory failures are not guesses: they do not count (b
	// stays unthrottled below).
	for i := 0; i < 3; i++ {
		from(b, "")
		from(b, downToken)
	}
	// a is throttled, from another port too: a further guess is checked and
	// answered 429.
	calls := e.auth.callCount()
	w := from("192.0.2.1:2000", "guess")
	if w.Code != 429 || e.auth.callCount() != calls+1 {
		t.Fatalf("status %d after %d calls, want 429 after one check", w.Code, e.auth.callCount()-calls)
	}
	if b := errorBody(t, w); b.Code != "tooManyRequests" {
		t.Errorf("code %q", b.Code)
	}
	// The failures at 1s, 2s and now (3s) fill the window: 58s until the oldest
	// leaves it.
	if ra := w.Header().Get("Retry-After"); ra != "58" {
		t.Errorf("Retry-After %q, want 58", ra)
	}
	// A valid token is served from a as from b.
	for _, addr := range []string{a, b} {
		if w := from(addr, goodToken); w.Code != 200 {
			t.Errorf("%s with a valid token: status %d", addr, w.Code)
		}
	}
	if w := from(b, "guess"); w.Code != 401 {
		t.Errorf("b's first guess: status %d", w.Code)
	}
	// Once the failures leave the window, a's guesses are 401 again.
	e.clock.Advance(time.Minute)
	if w := from(a, "guess"); w.Code != 401 {
		t.Errorf("a after the window: status %d", w.Code)
	}
}

// TestThrottleLockOutBurst: ten bad tokens from one address (every client behind an
// ingress) do not lock out a valid token from that address, at once or concurrently
// with more bad ones.
func TestThrottleLockOutBurst(t *testing.T) {
	// The default limit, 10 failures a minute, without the holds (real sleeps).
	e := newEnv(t, func(c *proxy.Config) {
		c.Throttle = newThrottle(t, c, throttle.Config{MaxFailures: throttle.DefaultMaxFailures, SlowAfter: 1000, Window: time.Minute})
	})
	from := func(token string) int {
		r := httptest.NewRequest("GET", listURL, nil)
		r.RemoteAddr = "198.51.100.7:4000"
		r.Header.Set(proxy.HeaderToken, token)
		return e.serve(r).Code
	}
	var wg sync.WaitGroup
	codes := make([]int, 10)
	for i := range codes {
		wg.Go(func() { codes[i] = from("guess-" + strconv.Itoa(i)) })
	}
	wg.Wait()
	if got := from("one more guess"); got != 429 {
		t.Fatalf("after ten bad tokens a bad one answers %d (answers %v), want 429: the burst did not throttle", got, codes)
	}
	if got := from(goodToken); got != 200 {
		t.Errorf("a valid token after the burst: %d, want 200", got)
	}
}

// TestThrottleClientAddr: a configured ClientAddr (e.g. behind a trusted proxy) keys
// the throttle.
func TestThrottleClientAddr(t *testing.T) {
	e := newEnv(t, func(c *proxy.Config) {
		c.Throttle = newThrottle(t, c, throttle.Config{MaxFailures: 1})
		c.ClientAddr = func(r *http.Request) string { return r.Header.Get("X-Real-Client") }
	})
	send := func(client string) int {
		r := httptest.NewRequest("GET", listURL, nil)
		r.Header.Set("X-Real-Client", client)
		r.Header.Set(proxy.HeaderToken, "guess")
		return e.serve(r).Code
	}
	if send("c1") != 401 || send("c1") != 429 || send("c2") != 401 {
		t.Errorf("throttle did not follow ClientAddr")
	}
}

func TestMounts(t *testing.T) {
	health := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	e := newEnv(t, func(c *proxy.Config) { c.Mounts = map[string]http.Handler{"/healthz": health} })
	w := e.do("GET", "/healthz", map[string]string{proxy.HeaderToken: ""})
	if w.Code != 200 || w.Body.String() != "ok" || e.auth.callCount() != 0 {
		t.Errorf("mount: status %d body %q auth calls %d", w.Code, w.Body.String(), e.auth.callCount())
	}
	// Any method: the mount decides.
	if w := e.do("POST", "/healthz", nil); w.Code != 200 {
		t.Errorf("POST /healthz: status %d", w.Code)
	}
	// Mounts match exactly.
	if w := e.do("GET", "/HEALTHZ", nil); w.Code != 404 {
		t.Errorf("/HEALTHZ: status %d", w.Code)
	}
	if l := e.logLines(); len(l) != 3 || l[0]["route"] != "/healthz" || l[0]["level"] != "DEBUG" {
		t.Errorf("log %v", l)
	}
}

func TestConfigValidate(t *testing.T) {
	h := http.NotFoundHandler()
	tests := []struct {
		name string
		cfg  proxy.Config
		want []string // fragments of the error, all reported at once
	}{
		{"missing dependencies", proxy.Config{}, []string{"Authenticator", "Service", "Throttle"}},
		{"bad base paths", proxy.Config{Authenticator: &fakeAuth{}, Service: &fakeService{}, BasePath: "restApi/"}, []string{"BasePath"}},
		{"base path with query", proxy.Config{Authenticator: &fakeAuth{}, Service: &fakeService{}, BasePath: "/a?b"}, []string{"BasePath"}},
		{"mount inside base path", proxy.Config{Authenticator: &fakeAuth{}, Service: &fakeService{}, Mounts: map[string]http.Handler{"/RESTAPI/health": h}}, []string{"inside the base path"}},
		{"mount on the API", proxy.Config{Authenticator: &fakeAuth{}, Service: &fakeService{}, BasePath: "/", Mounts: map[string]http.Handler{"/api/directoryObjects/groupMembers/": h}}, []string{"API's path"}},
		{"mount without handler", proxy.Config{Authenticator: &fakeAuth{}, Service: &fakeService{}, Mounts: map[string]http.Handler{"/metrics": nil}}, []string{"no handler"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := proxy.New(tt.cfg)
			if err == nil {
				t.Fatalf("New accepted %+v", tt.cfg)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	// A mount outside the base path is fine, and the zero optional fields default.
	th := newThrottle(t, &proxy.Config{}, throttle.Config{})
	if _, err := proxy.New(proxy.Config{Authenticator: &fakeAuth{}, Service: &fakeService{}, Throttle: th, Mounts: map[string]http.Handler{"/metrics": h}}); err != nil {
		t.Errorf("valid config: %v", err)
	}
}

// TestThrottleCounts: which authentications count as failures, and that a success
// does not wipe its own address's failures either.
func TestThrottleCounts(t *testing.T) {
	e := newEnv(t, func(c *proxy.Config) { c.Throttle = newThrottle(t, c, throttle.Config{MaxFailures: 2}) })
	send := func(tokens ...string) int {
		r := httptest.NewRequest("GET", listURL, nil)
		for _, tok := range tokens {
			r.Header.Add(proxy.HeaderToken, tok)
		}
		return e.serve(r).Code
	}
	// Repeated headers are a client bug, not a guess: never counted.
	for i := 0; i < 5; i++ {
		if got := send("a", "b"); got != 401 {
			t.Fatalf("repeated header: status %d", got)
		}
	}
	// A too-long token is a rejected token: counted, then a success, then one more
	// failure fills the window (the success reset nothing): the next failure, a
	// too-long token too, is 429, and a valid token is still served.
	if got := send(strings.Repeat("t", proxy.MaxTokenLength+1)); got != 401 {
		t.Fatalf("long token: status %d", got)
	}
	if got := send(goodToken); got != 200 {
		t.Fatalf("good token: status %d", got)
	}
	if got := send("guess"); got != 401 {
		t.Fatalf("guess: status %d", got)
	}
	if got := send(strings.Repeat("t", proxy.MaxTokenLength+1)); got != 429 {
		t.Errorf("after two failures around a success: status %d, want 429", got)
	}
	if got := send(goodToken); got != 200 {
		t.Errorf("good token after the failures: status %d", got)
	}
}

// TestHeaderNameCaseOverTheWire: a client spelling the header in lower case (as HTTP/2
// always does) is authenticated.
func TestHeaderNameCaseOverTheWire(t *testing.T) {
	e := newEnv(t, nil)
	srv := httptest.NewServer(e.h)
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL+listURL, nil)
	req.Header["adm-authorization"] = []string{goodToken} // sent as written
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("status %d, want 200", resp.StatusCode)
	}
}
