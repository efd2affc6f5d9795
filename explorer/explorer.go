// Package explorer serves the policy explorer page (docs/policy.md, "The explorer
// page"): one HTML page, its script and its style sheet, embedded in the binary
// (no CDN, no build step) and served under a Content-Security-Policy that allows
// no inline script. The page calls the decisions API with a token the engineer
// pastes, or gets by signing in when the gateway serves sign-in; it keeps the token
// in memory only.
package explorer

import (
	"bytes"
	"embed"
	"errors"
	"html/template"
	"net/http"
	"strconv"
)

// Path is where the page is served, outside the API's base path like /healthz.
const Path = "/explorer/"

// CSP is the page's Content-Security-Policy: its own script, style and API only;
// no inline script or style, no frames, no forms posted elsewhere.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

//go:embed assets
var assets embed.FS

// Config is what the page is told about the gateway. The page reads these paths
// from its own markup (data- attributes of its body), escaped by html/template.
type Config struct {
	// DecisionsURL is the decisions API's path, base path included.
	DecisionsURL string
	// SessionURL and AuthURL are the sign-in flow's paths, base path included
	// ({base}/api/authSessions/create and {base}/api/auth; docs/auth.md). When
	// SessionURL is empty (sign-in is not served) the page has no sign-in form.
	SessionURL, AuthURL string
}

// Mounts returns the page's handlers by exact path, for proxy.Config.Mounts.
func Mounts(c Config) (map[string]http.Handler, error) {
	if (c.SessionURL == "") != (c.AuthURL == "") {
		return nil, errors.New("explorer: sign-in needs both the session and the auth path")
	}
	tmpl, err := template.ParseFS(assets, "assets/index.html")
	if err != nil {
		return nil, err
	}
	var page bytes.Buffer
	if err := tmpl.Execute(&page, c); err != nil {
		return nil, err
	}
	js, err := assets.ReadFile("assets/explorer.js")
	if err != nil {
		return nil, err
	}
	css, err := assets.ReadFile("assets/explorer.css")
	if err != nil {
		return nil, err
	}
	return map[string]http.Handler{
		"/explorer":           http.RedirectHandler(Path, http.StatusMovedPermanently),
		Path:                  static("text/html; charset=utf-8", page.Bytes()),
		Path + "explorer.js":  static("text/javascript; charset=utf-8", js),
		Path + "explorer.css": static("text/css; charset=utf-8", css),
	}, nil
}

func static(contentType string, body []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h := w.Header()
		h.Set("Content-Type", contentType)
		h.Set("Content-Length", strconv.Itoa(len(body)))
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		if r.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(body)
	})
}
