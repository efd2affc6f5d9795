package proxy_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/proxy"
)

// TestEncodedSlashNotASeparator: an encoded slash in the path does not become a
// separator before routing: every such spelling of a route is 404 in the error
// shape and reaches neither the authenticator, the service nor the checker, while
// other escapes still name the route.
func TestEncodedSlashNotASeparator(t *testing.T) {
	e, f := newSignInEnv(t, func(c *proxy.Config) { c.Decisions = &fakeDecisions{} })
	for _, target := range []string{
		"/restApi/api/directoryObjects%2FgroupMembers?group=CN%3Dx%2CDC%3Dy",
		"/restApi/api%2fdirectoryObjects/groupMembers?group=CN%3Dx%2CDC%3Dy",
		"/restApi%2Fapi/directoryObjects/groupMembers?group=CN%3Dx%2CDC%3Dy",
		"/restApi/api/directoryObjects/groupMembers%2F?group=CN%3Dx%2CDC%3Dy",
		"/restApi/api/policy%2Fdecisions?subject=CN%3Dx%2CDC%3Dy&group=CN%3Dx%2CDC%3Dy",
	} {
		w := e.do(http.MethodGet, target, nil)
		if w.Code != 404 || errorBody(t, w).Code != dirgate.ENOTFOUND {
			t.Errorf("GET %s: %d %s", target, w.Code, w.Body)
		}
	}
	for _, target := range []string{"/restApi/api/authSessions%2Fcreate", "/restApi%2Fapi/auth"} {
		w := post(e, target, "application/json", `{"username":"alice@corp.example.com","password":"right"}`)
		if w.Code != 404 {
			t.Errorf("POST %s: %d %s", target, w.Code, w.Body)
		}
	}
	if n := e.auth.callCount(); n != 0 || e.svc.listCalls != 0 || f.calls() != 0 {
		t.Errorf("an encoded slash reached a route: %d authentications, %d listings, %d checks", n, e.svc.listCalls, f.calls())
	}
	// Other escapes of unreserved characters still name the route.
	if w := e.do(http.MethodGet, "/restApi/%61pi/directoryObjects/groupMembers?group=CN%3Dx%2CDC%3Dy", nil); w.Code != 200 {
		t.Errorf("escaped letter: %d %s", w.Code, w.Body)
	}
}

func TestRoutePath(t *testing.T) {
	for raw, want := range map[string]string{
		"/a/b":          "/a/b",
		"/a%2Fb":        "/a%2Fb",
		"/a%2fb%2F":     "/a%2Fb%2F",
		"/%61%2F%62/c":  "/a%2Fb/c",
		"/a%20b%2Fc%25": "/a b%2Fc%",
	} {
		r := httptest.NewRequest(http.MethodGet, raw, nil)
		if got := proxy.RoutePath(r); got != want {
			t.Errorf("RoutePath(%q) = %q, want %q", raw, got, want)
		}
	}
}

// FuzzRoutePath: for any path net/http accepts, the route path is the decoded
// path with exactly the encoded slashes kept encoded.
func FuzzRoutePath(f *testing.F) {
	for _, s := range []string{"/a/b", "/a%2Fb", "/%2f%2F%252F", "/x%zz", "/%C3%A9%2f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := url.ParseRequestURI(raw)
		if err != nil || u.Path == "" {
			return
		}
		r := &http.Request{URL: u}
		got := proxy.RoutePath(r)
		esc := u.EscapedPath()
		n := strings.Count(esc, "%2F") + strings.Count(esc, "%2f")
		if strings.Count(got, "%2F") < n {
			t.Fatalf("RoutePath(%q) = %q lost an encoded slash", raw, got)
		}
		if strings.ReplaceAll(got, "%2F", "/") != strings.ReplaceAll(u.Path, "%2F", "/") {
			t.Fatalf("RoutePath(%q) = %q, path %q", raw, got, u.Path)
		}
	})
}
