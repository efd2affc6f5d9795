package proxy_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/proxy"
)

// cachingService answers like a MemberService over a cache: it reports a status and
// the listing's encodings in the request's ListingReport.
type cachingService struct {
	fakeService
	status  dirgate.CacheStatus
	encoded *dirgate.EncodedListing
}

func (s *cachingService) List(ctx context.Context, p dirgate.Principal, g dirgate.Identifier, o dirgate.ListOptions) ([]dirgate.Object, error) {
	rep := dirgate.ListingReportFrom(ctx)
	rep.SetCacheStatus(s.status)
	rep.SetEncoded(s.encoded)
	return s.fakeService.List(ctx, p, g, o)
}

// TestCacheHeader: a listing says how the cache served it, and its body is what
// encoding the objects writes; without a cache there is no header. (Bodies joined
// from the cache's encodings are render's: render.TestAppendJSON, TestListBodyIsList.)
func TestCacheHeader(t *testing.T) {
	objs := []dirgate.Object{{GUID: "a", DN: "CN=A"}, {GUID: "b", DN: "CN=B"}, {GUID: "c", DN: "CN=C"}}
	enc, err := dirgate.EncodeListing(objs)
	if err != nil {
		t.Fatal(err)
	}
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
			svc := &cachingService{status: tc.status, encoded: enc}
			svc.objs = tc.served
			e := newEnv(t, func(c *proxy.Config) { c.Service = svc })
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
