package proxy_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/proxy"
)

const memberSID = "S-1-5-21-1-2-3-1105"

// post serves one POST with the good token and a JSON body unless hdr says otherwise
// (an empty value deletes the header).
func (e *env) post(body string, hdr map[string]string) *httptest.ResponseRecorder {
	e.t.Helper()
	r := httptest.NewRequest("POST", api, strings.NewReader(body))
	r.Header.Set(proxy.HeaderToken, goodToken)
	r.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		if v == "" {
			r.Header.Del(k)
		} else {
			r.Header.Set(k, v)
		}
	}
	return e.serve(r)
}

func TestAdd(t *testing.T) {
	e := newEnv(t, nil)
	e.svc.result = dirgate.OperationResult{InnerMessages: []dirgate.InnerMessage{}, ActualObjectDN: groupDN, ExtraInfo: map[string]string{}, NoChanges: true}
	w := e.post(`{"group":"`+groupDN+`","newMember":"`+memberSID+`"}`, nil)
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body.String())
	}
	checkJSONHeaders(t, w)
	want := `{"resultType":0,"innerMessages":[],"exception":null,"actualObjectDN":"CN=Sales,OU=Groups,DC=corp,DC=com","noChanges":true,"extraInfo":{}}`
	if w.Body.String() != want {
		t.Errorf("body %s\nwant %s", w.Body.String(), want)
	}
	if e.svc.addCalls != 1 || e.svc.group.Canonical() != groupDN || e.svc.member.Canonical() != memberSID || e.svc.principal.DN != alice.DN {
		t.Errorf("service: %d calls, group %q, member %q, principal %q", e.svc.addCalls, e.svc.group.Canonical(), e.svc.member.Canonical(), e.svc.principal.DN)
	}
	// The request log names both objects, as for a removal.
	var logged bool
	for _, l := range e.logLines() {
		if l["method"] == "POST" && l["group"] == groupDN && l["member"] == memberSID && l["status"] == float64(200) {
			logged = true
		}
	}
	if !logged {
		t.Errorf("no request log line names the addition: %s", e.log.String())
	}
}

// Bodies the parser accepts: field names in any ASCII letter case, unknown fields
// (ignored, whatever their value), a byte order mark, whitespace, escapes.
func TestAddBodyAccepted(t *testing.T) {
	tests := map[string]string{
		"letter case":    `{"GROUP":"` + groupDN + `","NewMember":"` + memberSID + `"}`,
		"unknown fields": `{"comment":{"a":[1,2,{"b":null}]},"group":"` + groupDN + `","newMember":"` + memberSID + `","extra":true}`,
		"bom":            "\xef\xbb\xbf" + `{"group":"` + groupDN + `","newMember":"` + memberSID + `"}`,
		"whitespace":     "\r\n\t {  \"group\" : \"" + groupDN + "\" ,\n \"newMember\":\"" + memberSID + "\"\n}\n",
		"escapes":        `{"group":"CN\u003dSales,OU=Groups,DC=corp,DC=com","newMember":"S-1-5-21-1-2-3-1105"}`,
	}
	// An escaped backslash before "ufffd" is no escape, and a real U+FFFD is a character.
	e := newEnv(t, nil)
	if w := e.post(`{"group":"CN=x\\\\ufffd\ufffd,DC=y","newMember":"`+memberSID+`"}`, nil); w.Code != 200 || e.svc.group.Canonical() != "CN=x\\\\ufffd\uFFFD,DC=y" {
		t.Errorf("a U+FFFD after an escaped backslash: status %d %s, group %q", w.Code, w.Body.String(), e.svc.group.Canonical())
	}
	for name, body := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, nil)
			w := e.post(body, nil)
			if w.Code != 200 || e.svc.group.Canonical() != groupDN || e.svc.member.Canonical() != memberSID {
				t.Errorf("status %d body %s; service got %q %q", w.Code, w.Body.String(), e.svc.group.Canonical(), e.svc.member.Canonical())
			}
		})
	}
}

func TestAddBodyRefused(t *testing.T) {
	ok := `"newMember":"` + memberSID + `"`
	tests := []struct {
		name, body, param, msg string
	}{
		{"empty", "", "body", "empty"},
		{"not JSON", "group=x&newMember=y", "body", "not valid JSON"},
		{"truncated", `{"group":"` + groupDN + `"`, "body", "not valid JSON"},
		{"array", `[{"group":"x"}]`, "body", "JSON object"},
		{"string", `"CN=x"`, "body", "JSON object"},
		{"null", `null`, "body", "JSON object"},
		{"trailing data", `{"group":"` + groupDN + `",` + ok + `} {}`, "body", "nothing after"},
		{"invalid UTF-8", "{\"group\":\"CN=\xff,DC=x\"," + ok + "}", "body", "UTF-8"},
		{"missing group", `{` + ok + `}`, "group", "required"},
		{"missing newMember", `{"group":"` + groupDN + `"}`, "newMember", "required"},
		{"empty group", `{"group":"",` + ok + `}`, "group", "required"},
		{"null group", `{"group":null,` + ok + `}`, "group", "required"},
		{"number", `{"group":5,` + ok + `}`, "group", "string"},
		{"object", `{"group":{"dn":"x"},` + ok + `}`, "group", "string"},
		{"array value", `{"group":["` + groupDN + `"],` + ok + `}`, "group", "string"},
		{"duplicate", `{"group":"` + groupDN + `","Group":"` + groupDN + `",` + ok + `}`, "group", "more than once"},
		{"not an identifier", `{"group":"x",` + ok + `}`, "group", "DN, GUID or SID"},
		{"NUL escape", `{"group":"CN=a\u0000b,DC=x",` + ok + `}`, "group", ""},
		{"escaped NUL in DN", `{"group":"CN=a\\00b,DC=x",` + ok + `}`, "group", ""},
		{"lone surrogate", `{"group":"CN=\ud800,DC=x",` + ok + `}`, "group", "escape"},
		{"lone low surrogate", `{"group":"CN=\udc00,DC=x",` + ok + `}`, "group", "escape"},
		{"reversed surrogates", `{"group":"CN=\udc00\ud800,DC=x",` + ok + `}`, "group", "escape"},
		{"surrogate after an escaped backslash", `{"group":"CN=a\\\\ufffd\ud800,DC=x",` + ok + `}`, "group", "escape"},
		// The body as a whole comes first: a truncated body is not judged by its fields.
		{"truncated after a bad field", `{"group":5`, "body", "not valid JSON"},
		{"truncated after a duplicate", `{"group":"` + groupDN + `","group":"x"`, "body", "not valid JSON"},
		{"duplicate then trailing data", `{"group":"` + groupDN + `","group":"x"} x`, "body", "nothing after"},
		{"too long", `{"group":"CN=` + strings.Repeat("a", dirgate.MaxIdentifierLength) + `,DC=x",` + ok + `}`, "group", "longer than"},
		{"filter injection", `{"group":"` + groupDN + `","newMember":"*)(objectClass=*"}`, "newMember", ""},
		{"GUID form", `{"group":"<GUID=0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0>",` + ok + `}`, "group", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			w := e.post(tt.body, nil)
			b := errorBody(t, w)
			if w.Code != 400 || b.Code != "invalid" || len(b.ModelState[tt.param]) != 1 || b.ModelState[tt.param][0] != b.Message {
				t.Fatalf("status %d body %+v, want 400 with modelState %s", w.Code, b, tt.param)
			}
			if !strings.Contains(b.Message, tt.msg) {
				t.Errorf("message %q lacks %q", b.Message, tt.msg)
			}
			if e.svc.addCalls != 0 {
				t.Error("the service was called")
			}
		})
	}
}

func TestAddContentType(t *testing.T) {
	body := `{"group":"` + groupDN + `","newMember":"` + memberSID + `"}`
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON; Charset=\"UTF-8\"", "text/json"} {
		if w := newEnv(t, nil).post(body, map[string]string{"Content-Type": ct}); w.Code != 200 {
			t.Errorf("Content-Type %q: status %d %s", ct, w.Code, w.Body.String())
		}
	}
	for _, ct := range []string{"", "text/plain", "application/x-www-form-urlencoded", "application/json; charset=latin1", "application/jsonx", "application/json;;"} {
		e := newEnv(t, nil)
		w := e.post(body, map[string]string{"Content-Type": ct})
		if b := errorBody(t, w); w.Code != 415 || b.Code != "unsupportedMediaType" || b.ModelState != nil || e.svc.addCalls != 0 {
			t.Errorf("Content-Type %q: status %d body %+v, want 415", ct, w.Code, b)
		}
	}
	// Two Content-Type headers: which one is meant is unknowable.
	e := newEnv(t, nil)
	r := httptest.NewRequest("POST", api, strings.NewReader(body))
	r.Header.Set(proxy.HeaderToken, goodToken)
	r.Header.Add("Content-Type", "application/json")
	r.Header.Add("Content-Type", "application/json")
	if w := e.serve(r); w.Code != 415 {
		t.Errorf("two Content-Type headers: status %d", w.Code)
	}
}

// errReader fails the test's request if the handler reads the body.
type errReader struct{ read *bool }

func (r errReader) Read([]byte) (int, error) { *r.read = true; return 0, errors.New("read") }

func TestAddBodyTooLarge(t *testing.T) {
	// A declared length over the bound is refused without reading the body.
	e := newEnv(t, nil)
	var read bool
	r := httptest.NewRequest("POST", api, nil)
	r.Body, r.ContentLength = io.NopCloser(errReader{&read}), proxy.MaxBodyLength+1
	r.Header.Set(proxy.HeaderToken, goodToken)
	r.Header.Set("Content-Type", "application/json")
	w := e.serve(r)
	if b := errorBody(t, w); w.Code != 413 || b.Code != "requestTooLarge" || read || e.svc.addCalls != 0 {
		t.Errorf("status %d body %+v read %v, want 413 unread", w.Code, b, read)
	}

	// Over the wire, chunked (no declared length): read up to the bound, then 413.
	// A body of exactly the bound is read and parsed (the padding is an unknown field).
	e = newEnv(t, nil)
	srv := httptest.NewServer(e.h)
	defer srv.Close()
	fill := func(n int) string {
		head := `{"group":"` + groupDN + `","newMember":"` + memberSID + `","pad":"`
		return head + strings.Repeat("x", n-len(head)-2) + `"}`
	}
	for _, tt := range []struct {
		n, status int
	}{{proxy.MaxBodyLength, 200}, {proxy.MaxBodyLength + 1, 413}, {4 * proxy.MaxBodyLength, 413}} {
		req, _ := http.NewRequest("POST", srv.URL+api, io.MultiReader(strings.NewReader(fill(tt.n))))
		req.Header.Set(proxy.HeaderToken, goodToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.status {
			t.Errorf("chunked body of %d bytes: status %d, want %d", tt.n, resp.StatusCode, tt.status)
		}
	}
}

// The order of checks holds for POST: no token, no look at the body; the body before
// the query string.
func TestAddOrderOfChecks(t *testing.T) {
	e := newEnv(t, nil)
	var read bool
	r := httptest.NewRequest("POST", api, nil)
	r.Body = io.NopCloser(errReader{&read})
	r.Header.Set("Content-Type", "application/json")
	if w := e.serve(r); w.Code != 401 || read {
		t.Errorf("no token: status %d, body read %v; want 401 without reading", w.Code, read)
	}
	r = httptest.NewRequest("POST", api+"?x=%zz", strings.NewReader("[]"))
	r.Header.Set(proxy.HeaderToken, goodToken)
	r.Header.Set("Content-Type", "application/json")
	if b := errorBody(t, e.serve(r)); b.ModelState["body"] == nil {
		t.Errorf("bad body and bad query: %+v, want the body's error", b)
	}
	// The query takes no parameters, but must be validly encoded; group and member in
	// it are ignored, as another method's parameters are.
	body := `{"group":"` + groupDN + `","newMember":"` + memberSID + `"}`
	r = httptest.NewRequest("POST", api+"?x=%zz", strings.NewReader(body))
	r.Header.Set(proxy.HeaderToken, goodToken)
	r.Header.Set("Content-Type", "application/json")
	if w := e.serve(r); w.Code != 400 || e.svc.addCalls != 0 {
		t.Errorf("malformed query: status %d", w.Code)
	}
	r = httptest.NewRequest("POST", api+"?group=x&member=y", strings.NewReader(body))
	r.Header.Set(proxy.HeaderToken, goodToken)
	r.Header.Set("Content-Type", "application/json")
	if w := e.serve(r); w.Code != 200 || e.svc.group.Canonical() != groupDN {
		t.Errorf("query parameters: status %d group %q", w.Code, e.svc.group.Canonical())
	}
}

// The service's errors map as for a removal: a policy refusal is 403 forbidden.
func TestAddServiceErrors(t *testing.T) {
	body := `{"group":"` + groupDN + `","newMember":"` + memberSID + `"}`
	for _, tt := range []struct {
		err    error
		status int
	}{
		{dirgate.Errorf(dirgate.EFORBIDDEN, "You are not allowed to add this member to this group."), 403},
		{&dirgate.Error{Code: dirgate.ENOTFOUND, Param: "newMember", Message: "The newMember was not found."}, 404},
		{dirgate.InvalidParam("newMember", "A group cannot be a member of itself."), 400},
		{dirgate.WrapError(dirgate.EUPSTREAM, "", errors.New("ldap: boom")), 502},
	} {
		e := newEnv(t, nil)
		e.svc.err = tt.err
		w := e.post(body, nil)
		b := errorBody(t, w)
		if w.Code != tt.status || b.Code != dirgate.ErrorCode(tt.err) {
			t.Errorf("%v: status %d body %+v, want %d", tt.err, w.Code, b, tt.status)
		}
		if strings.Contains(w.Body.String(), "boom") {
			t.Errorf("detail leaked: %s", w.Body.String())
		}
	}
}

// A client that sends its headers and then trickles the body, or stops, gets its
// answer once Config.BodyReadTimeout has passed, whatever the answer is: one read
// by the handler (a JSON body), one refused before it is read (415, or 413 on the
// declared length, which net/http would otherwise wait to drain).
func TestAddSlowBody(t *testing.T) {
	e := newEnv(t, func(c *proxy.Config) { c.BodyReadTimeout = 200 * time.Millisecond })
	srv := httptest.NewServer(e.h)
	defer srv.Close()
	for _, tt := range []struct {
		name, contentType string
		length, status    int
	}{
		{"JSON", "application/json", 100, 400},
		{"wrong type", "text/plain", 100, 415},
		{"over the bound", "application/json", 64 << 10, 413},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\n%s: %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n{\"group\":",
				api, proxy.HeaderToken, goodToken, tt.contentType, tt.length)
			// Far beyond the server's bound: only a server that never answers fails.
			c.SetReadDeadline(time.Now().Add(20 * time.Second))
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("no answer to a stalled body: %v", err)
			}
			res.Body.Close()
			if res.StatusCode != tt.status {
				t.Errorf("status %d, want %d", res.StatusCode, tt.status)
			}
		})
	}
}
