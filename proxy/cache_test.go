package proxy_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/proxy"
)

// cachingLister answers like render.Lister over a cache: the listing's body and how
// it was served.
type cachingLister struct {
	objs   []dirgate.Object
	status dirgate.CacheStatus
}

func (l cachingLister) ListBody(context.Context, dirgate.Principal, dirgate.Identifier, dirgate.ListOptions) (proxy.Body, dirgate.CacheStatus, error) {
	objs := l.objs
	if objs == nil {
		objs = []dirgate.Object{}
	}
	b, err := json.Marshal(objs)
	return jsonBody(b), l.status, err
}

type jsonBody []byte

func (b jsonBody) JSON() []byte                                      { return b }
func (b jsonBody) Variant(_ string, make func([]byte) []byte) []byte { return make(b) }

// TestCacheHeader: a listing says how the cache served it, and its body is what
// encoding the objects writes; without a cache there is no header. (Bodies joined
// from the cache's encodings are render's: render.TestAppendJSON, TestListBodyIsList.)
func TestCacheHeader(t *testing.T) {
	objs := []dirgate.Object{{GUID: "a", DN: "CN=A"}, {GUID: "b", DN: "CN=B"}, {GUID: "c", DN: "CN=C"}}
	tests := []struct {
		name   string
		status dirgate.CacheStatus
		served []dirgate.Object
		want   string
	}{
		{"hit, filtered", dirgate.CacheHit, []dirgate.Object{objs[0], objs[2]}, "hit"},
		{"stale", dirgate.CacheStale, objs, "stale"},
		{"bypass, empty", dirgate.CacheBypass, nil, "bypass"},
		// No cache configured: the service reports nothing, and no header is sent.
		{"no cache", "", objs, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(c *proxy.Config) { c.Bodies = cachingLister{objs: tc.served, status: tc.status} })
			w := e.do(http.MethodGet, api+"?group=CN%3DG", nil)
			if w.Code != http.StatusOK {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			checkJSONHeaders(t, w)
			if got := w.Header().Get(proxy.CacheHeader); got != tc.want || (tc.want == "" && len(w.Header().Values(proxy.CacheHeader)) > 0) {
				t.Errorf("%s = %q, want %q", proxy.CacheHeader, got, tc.want)
			}
			want := []dirgate.Object{}
			if tc.served != nil {
				want = tc.served
			}
			body, _ := json.Marshal(want)
			if w.Body.String() != string(body) {
				t.Errorf("body %s, want %s", w.Body, body)
			}
		})
	}
}
