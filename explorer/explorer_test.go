package explorer_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dirgate/dirgate/explorer"
)

// TestMounts: every asset is served with the CSP and its type, the API path is
// escaped into the page, and only GET and HEAD are answered.
func TestMounts(t *testing.T) {
	mounts, err := explorer.Mounts(`/base"><script>x</script>/api/policy/decisions`)
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
			if strings.Contains(body, "<script>x") || !strings.Contains(body, `src="explorer.js"`) || strings.Contains(body, "<script>") {
				t.Errorf("page: the API path is not escaped, or an inline script is present:\n%s", body)
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
