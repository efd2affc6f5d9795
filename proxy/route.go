package proxy

import (
	"net/http"
	"net/url"
	"strings"
)

// RoutePath is the path a request is routed by: its decoded path, except that an
// encoded slash (%2F, %2f) stays encoded. Decoding it into a separator would let
// /restApi/api/directoryObjects%2FgroupMembers reach the API as if it were
// /restApi/api/directoryObjects/groupMembers, so that a front end (an ingress, a
// WAF) that routes or filters by the raw path and dirgate would disagree on which
// resource a request names; kept encoded, no route matches it and it is answered
// 404 like any unknown path. Other escapes are decoded as before (%61pi is api).
// Telemetry names routes by the same path (cmd/dirgate/http.go).
func RoutePath(r *http.Request) string {
	if r.URL.RawPath == "" {
		return r.URL.Path // nothing was encoded differently from the default
	}
	esc := r.URL.EscapedPath()
	if !strings.Contains(esc, "%2F") && !strings.Contains(esc, "%2f") {
		return r.URL.Path
	}
	var b strings.Builder
	for i, part := range splitEncodedSlash(esc) {
		if i > 0 {
			b.WriteString("%2F")
		}
		p, err := url.PathUnescape(part)
		if err != nil {
			return esc // not reached: net/http parsed the same escapes
		}
		b.WriteString(p)
	}
	return b.String()
}

// splitEncodedSlash splits an escaped path at each %2F or %2f.
func splitEncodedSlash(s string) []string {
	var parts []string
	for {
		i := strings.Index(s, "%2F")
		if j := strings.Index(s, "%2f"); j >= 0 && (i < 0 || j < i) {
			i = j
		}
		if i < 0 {
			return append(parts, s)
		}
		parts = append(parts, s[:i])
		s = s[i+3:]
	}
}
