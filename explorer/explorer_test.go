package explorer_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dirgate/dirgate/explorer"
)

// TestMounts: every asset is served with the CSP and its type, the API paths are
// escaped into the page, and only GET and HEAD are answered.
func TestMounts(t *testing.T) {
	mounts, err := explorer.Mounts(explorer.Config{DecisionsURL: `/base"><script>x</script>/api/policy/decisions`,
		SessionURL: `/base"><script>y</script>/api/authSessions/create`, AuthURL: `/base"><script>z</script>/api/auth`})
	if err != nil {
		t.Fatal(err)
	}
	for path, ctype := range map[string]string{"/explorer/": "text/html", "/explorer/explorer.js": "text/javascript", "/explorer/explorer.css": "text/css"} {
		w := httptest.NewRecorder()
		mounts[path].ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		h := w.Header()
		if w.Code != 200 || h.Get("Content-Security-Policy") != explorer.CSP || !strings.HasPrefix(h.Get("Content-Type"), ctype) ||
			h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: %d %v", path, w.Code, h)
		}
		if path == "/explorer/" {
			body := w.Body.String()
			if strings.Contains(body, "<script>x") || strings.Contains(body, "<script>y") || strings.Contains(body, "<script>z") ||
				!strings.Contains(body, `src="explorer.js"`) || strings.Contains(body, "<script>") || strings.Contains(body, "style=") {
				t.Errorf("page: an API path is not escaped, or an inline script or style is present:\n%s", body)
			}
			if !strings.Contains(body, `<form id="signin"`) {
				t.Error("page: sign-in is served, but the page has no sign-in form")
			}
		}
		w = httptest.NewRecorder()
		mounts[path].ServeHTTP(w, httptest.NewRequest("POST", path, nil))
		if w.Code != http.StatusMethodNotAllowed {
			t.Errorf("POST %s: %d", path, w.Code)
		}
	}
	w := httptest.NewRecorder()
	mounts["/explorer"].ServeHTTP(w, httptest.NewRequest("GET", "/explorer", nil))
	if w.Code != http.StatusMovedPermanently || w.Header().Get("Location") != "/explorer/" {
		t.Errorf("/explorer: %d %v", w.Code, w.Header())
	}
	if !strings.Contains(explorer.CSP, "script-src 'self'") || strings.Contains(explorer.CSP, "unsafe") {
		t.Errorf("CSP %q", explorer.CSP)
	}
}

// TestMountsWithoutSignIn: when sign-in is not served the page has no sign-in
// form, only the token field; a half-configured sign-in is an error.
func TestMountsWithoutSignIn(t *testing.T) {
	mounts, err := explorer.Mounts(explorer.Config{DecisionsURL: "/restApi/api/policy/decisions"})
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	mounts["/explorer/"].ServeHTTP(w, httptest.NewRequest("GET", "/explorer/", nil))
	body := w.Body.String()
	if strings.Contains(body, `id="signin"`) || strings.Contains(body, `id="password"`) || !strings.Contains(body, `id="token"`) ||
		!strings.Contains(body, `data-session-url=""`) {
		t.Errorf("page without sign-in:\n%s", body)
	}
	if _, err := explorer.Mounts(explorer.Config{DecisionsURL: "/d", SessionURL: "/s"}); err == nil {
		t.Error("a session path without an auth path was accepted")
	}
}
