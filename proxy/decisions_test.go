package proxy_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/proxy"
)

// fakeDecisions records the query it was asked and answers it back.
type fakeDecisions struct {
	got    proxy.DecisionsQuery
	caller dirgate.Principal
	err    error
}

func (f *fakeDecisions) Decisions(_ context.Context, caller dirgate.Principal, q proxy.DecisionsQuery) (any, error) {
	f.got, f.caller = q, caller
	if f.err != nil {
		return nil, f.err
	}
	return map[string]any{"subject": q.Subject.Canonical(), "draft": q.Draft}, nil
}

const decisionsAPI = "/restApi/api/policy/decisions"

// TestDecisionsAPI: the decisions API is authenticated like the API, validates its
// query and body with the documented errors, and passes a valid query on.
func TestDecisionsAPI(t *testing.T) {
	dec := &fakeDecisions{}
	e := newEnv(t, func(c *proxy.Config) { c.Decisions = dec })
	q := "?subject=" + url.QueryEscape("CN=Hugo,DC=x") + "&group=" + url.QueryEscape("CN=G,DC=x") + "&includeIndirect=True&properties=mail"

	w := e.do("GET", decisionsAPI+q, nil)
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"subject"`) {
		t.Fatalf("GET: %d %s", w.Code, w.Body)
	}
	checkJSONHeaders(t, w)
	if dec.got.Subject.Canonical() == "" || dec.got.Group.Canonical() == "" || !dec.got.Options.IncludeIndirect ||
		len(dec.got.Options.Properties) != 1 || dec.got.Draft != "" {
		t.Errorf("query passed on: %+v", dec.got)
	}

	post := func(body, contentType string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", decisionsAPI+q, strings.NewReader(body))
		r.Header.Set(proxy.HeaderToken, goodToken)
		if contentType != "" {
			r.Header.Set("Content-Type", contentType)
		}
		return e.serve(r)
	}
	if w := post(`{"module": "package dirgate.authz\nallow := true"}`, "application/json"); w.Code != 200 || !strings.Contains(dec.got.Draft, "allow := true") {
		t.Errorf("POST: %d %s, draft %q", w.Code, w.Body, dec.got.Draft)
	}

	for _, tc := range []struct {
		name   string
		w      *httptest.ResponseRecorder
		status int
		code   string
	}{
		{"no token", e.do("GET", decisionsAPI+q, map[string]string{proxy.HeaderToken: ""}), 401, dirgate.EUNAUTHENTICATED},
		{"method", e.do("DELETE", decisionsAPI+q, nil), 405, dirgate.EMETHOD},
		{"no subject", e.do("GET", decisionsAPI+"?group=x", nil), 400, dirgate.EINVALID},
		{"bad subject", e.do("GET", decisionsAPI+"?group=x&subject=%00", nil), 400, dirgate.EINVALID},
		{"no group", e.do("GET", decisionsAPI+"?subject=x", nil), 400, dirgate.EINVALID},
		{"bad indirect", e.do("GET", decisionsAPI+"?subject=x&group=y&includeIndirect=maybe", nil), 400, dirgate.EINVALID},
		{"long subject", e.do("GET", decisionsAPI+"?group=x&subject="+strings.Repeat("a", dirgate.MaxIdentifierLength+1), nil), 400, dirgate.EINVALID},
		{"not JSON", post(`{"module":"x"}`, "text/plain"), 415, dirgate.EMEDIATYPE},
		{"no module", post(`{"modules":"x"}`, "application/json"), 400, dirgate.EINVALID},
		{"empty module", post(`{"module":""}`, "application/json"), 400, dirgate.EINVALID},
		{"too large", post(`{"module":"`+strings.Repeat("a", proxy.MaxDraftBodyLength)+`"}`, "application/json"), 413, dirgate.ETOOLARGE},
	} {
		if tc.w.Code != tc.status || errorBody(t, tc.w).Code != tc.code {
			t.Errorf("%s: %d %s, want %d %s", tc.name, tc.w.Code, tc.w.Body, tc.status, tc.code)
		}
	}
	if w := e.do("DELETE", decisionsAPI+q, nil); w.Header().Get("Allow") != "GET, POST" {
		t.Errorf("405 Allow %q", w.Header().Get("Allow"))
	}

	// The policy's refusal and a draft's error keep their codes.
	dec.err = dirgate.Errorf(dirgate.EFORBIDDEN, "no")
	if w := e.do("GET", decisionsAPI+q, nil); w.Code != 403 {
		t.Errorf("refusal: %d", w.Code)
	}
	dec.err = dirgate.InvalidParam("module", "draft: draft.rego:3: rego_parse_error")
	if w := e.do("GET", decisionsAPI+q, nil); w.Code != 400 || !strings.Contains(w.Body.String(), "draft.rego:3") {
		t.Errorf("draft error: %d %s", w.Code, w.Body)
	}

	// Without a Decisions service the path is not served.
	if w := newEnv(t, nil).do("GET", decisionsAPI+q, nil); w.Code != http.StatusNotFound {
		t.Errorf("without Decisions: %d", w.Code)
	}
}

// FuzzDecisionsQuery: any query string is either refused with a coded error or
// yields a subject and a group.
func FuzzDecisionsQuery(f *testing.F) {
	f.Add("subject=CN%3Dx&group=y&includeIndirect=true&properties=mail,cn")
	f.Add("subject=&group=")
	f.Add("SUBJECT=a&subject=b&group=c")
	dec := &fakeDecisions{}
	e := newEnv(&testing.T{}, func(c *proxy.Config) { c.Decisions = dec })
	f.Fuzz(func(t *testing.T, raw string) {
		dec.got = proxy.DecisionsQuery{}
		r := httptest.NewRequest("GET", decisionsAPI, nil)
		r.URL.RawQuery = raw
		r.Header.Set(proxy.HeaderToken, goodToken)
		w := e.serve(r)
		switch w.Code {
		case 200:
			if dec.got.Subject.Canonical() == "" || dec.got.Group.Canonical() == "" {
				t.Fatalf("accepted %q without a subject and a group: %+v", raw, dec.got)
			}
		case 400:
		default:
			t.Fatalf("%q: status %d", raw, w.Code)
		}
	})
}

// TestDecisionsSlowBody: a client that sends a draft's headers and then trickles
// its body, or stops, is answered once Config.BodyReadTimeout has passed, as on the
// API's resource (TestAddSlowBody); GET with a body too.
func TestDecisionsSlowBody(t *testing.T) {
	e := newEnv(t, func(c *proxy.Config) {
		c.Decisions = &fakeDecisions{}
		c.BodyReadTimeout = 200 * time.Millisecond
	})
	srv := httptest.NewServer(e.h)
	defer srv.Close()
	q := "?subject=" + url.QueryEscape("CN=Hugo,DC=x") + "&group=" + url.QueryEscape("CN=G,DC=x")
	for _, tt := range []struct {
		name, method, contentType string
		status                    int
	}{
		{"draft", "POST", "application/json", 400},
		{"wrong type", "POST", "text/plain", 415},
		{"GET with a body", "GET", "application/json", 400},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			start := time.Now()
			fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: x\r\n%s: %s\r\nContent-Type: %s\r\nContent-Length: 1000\r\n\r\n{\"module\":",
				tt.method, decisionsAPI+q, proxy.HeaderToken, goodToken, tt.contentType)
			// Far beyond the server's bound: only a server that never answers fails.
			c.SetReadDeadline(time.Now().Add(20 * time.Second))
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("no answer to a stalled body after %v: %v", time.Since(start), err)
			}
			res.Body.Close()
			if res.StatusCode != tt.status {
				t.Errorf("status %d, want %d", res.StatusCode, tt.status)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("answered after %v, want about the 200ms bound", d)
			}
		})
	}
}
