package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/cache"
	"github.com/dirgate/dirgate/policy"
	"github.com/dirgate/dirgate/proxy"
	bundled "github.com/dirgate/dirgate/rego"
	"github.com/dirgate/dirgate/render"
	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/throttle"
	"github.com/dirgate/dirgate/upstream/memory"
)

// tokenAuth maps tokens to principals.
type tokenAuth map[string]dirgate.Principal

func (a tokenAuth) Authenticate(_ context.Context, token string) (dirgate.Principal, error) {
	if p, ok := a[token]; ok {
		return p, nil
	}
	return dirgate.Principal{}, dirgate.Errorf(dirgate.EUNAUTHENTICATED, "unknown token")
}

// policyWithRole writes the bundled policy to a directory with two more roles: the
// trustee views the objects below the subtrees, and the groups of OU=Groups (a
// caller lists only a group it may view itself: docs/api.md).
func policyWithRole(t testing.TB, trustee string, subtrees ...string) string {
	t.Helper()
	return policyWithRoles(t, viewRole(trustee, subtrees...), groupsRole(trustee))
}

// policyWithRoles writes the bundled policy to a directory with more roles.
func policyWithRoles(t testing.TB, roles ...any) string {
	t.Helper()
	dir := t.TempDir()
	if err := bundled.WriteWithRoles(dir, roles...); err != nil {
		t.Fatal(err)
	}
	return dir
}

// viewRole lets the trustee view the objects below the subtrees.
func viewRole(trustee string, subtrees ...string) map[string]any {
	var scopes []any
	for _, s := range subtrees {
		scopes = append(scopes, map[string]string{"subtree": s})
	}
	return map[string]any{"name": "test-part", "trustees": []string{trustee}, "permissions": []string{"view"}, "scopes": scopes}
}

// groupsRole lets the trustees view the groups of OU=Groups.
func groupsRole(trustees ...string) map[string]any {
	return map[string]any{"name": "test-groups", "trustees": trustees, "permissions": []string{"view"},
		"scopes": []any{map[string]string{"subtree": fixture.GroupsOU}}, "objectTypes": []string{"group"}}
}

// TestSharedBodiesNeverCrossCallers: many clients with different rights (all, the
// help desk's, about half, and none for two callers, whose decisions are equal) list the same cached listings at once, in every coding and with
// size limits, through the real cache, policy and handler. Each answer must be its
// own caller's listing exactly; bodies are shared only between equal answers.
func TestSharedBodiesNeverCrossCallers(t *testing.T) {
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir, err := memory.Demo()
	if err != nil {
		t.Fatal(err)
	}
	authz, err := policy.Open(ctx, policy.Config{Dir: policyWithRoles(t, viewRole(fixture.FutureExpiryDN, fixture.FinanceOU, fixture.HROU),
		groupsRole(fixture.FutureExpiryDN, fixture.ExpiredDN, fixture.DisabledDN)), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer authz.Close()
	// A generous timeout: a bypassed read (a busy machine) would fill a listing of
	// its own, with bodies of its own.
	c, err := cache.Config{Logger: quiet, Timeout: time.Minute}.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	bodies := render.NewBodyCache(64 << 20)
	svc := &dirgate.MemberService{Dir: c, Listings: c, Authz: authz}
	ref := &dirgate.MemberService{Dir: dir, Authz: authz} // uncached, unshared

	// Fay Future holds only the roles above; Eve Expired and Ada Disabled only view
	// the groups (so that they may list them), and none of All Staff's members.
	callers := []string{fixture.DemoAdminDN, fixture.DemoHelpdeskDN, fixture.FutureExpiryDN, fixture.ExpiredDN, fixture.DisabledDN}
	auth := tokenAuth{}
	principals := make([]dirgate.Principal, len(callers))
	for i, dn := range callers {
		if principals[i], err = ref.Principal(ctx, dirgate.MustParseIdentifier(dn)); err != nil {
			t.Fatal(err)
		}
		auth[fmt.Sprint("token-", i)] = principals[i]
	}
	h, err := proxy.New(proxy.Config{Authenticator: auth, Service: svc, Bodies: render.NewLister(svc, bodies), Logger: quiet,
		Throttle: newThrottle(t, &proxy.Config{}, throttle.Config{})})
	if err != nil {
		t.Fatal(err)
	}

	type query struct {
		group    string
		indirect bool
		limit    int
	}
	var queries []query
	for _, g := range []string{fixture.AllStaffDN, fixture.ITDepartmentDN} {
		for _, indirect := range []bool{false, true} {
			for _, limit := range []int{0, 2, 5} {
				queries = append(queries, query{g, indirect, limit})
			}
		}
	}
	// The expected answer of every caller and query, and how many distinct bodies a
	// listing (group, indirect) has: the most that sharing may keep.
	want := map[[2]int]string{}
	distinct := map[string]bool{}
	mixed := 0
	for qi, q := range queries {
		seen := map[string]bool{}
		for ci, p := range principals {
			objs, err := ref.List(ctx, p, dirgate.MustParseIdentifier(q.group), dirgate.ListOptions{IncludeIndirect: q.indirect, SizeLimit: q.limit})
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(append([]dirgate.Object{}, objs...))
			want[[2]int{qi, ci}] = string(b)
			distinct[fmt.Sprint(q.group, q.indirect, string(b))] = true
			seen[string(b)] = true
		}
		if len(seen) >= 3 {
			mixed++
		}
	}
	if mixed == 0 {
		t.Fatal("no query gives three callers three different answers: the test would prove nothing")
	}

	// Each listing is filled once before the clients start: concurrent first
	// requests may otherwise make two listings of one group (one read back from the
	// store while the fill that wrote it has not yet kept it in the first level),
	// each with its own bodies: exact, but more than the bound below allows.
	for _, q := range queries {
		if _, err := svc.List(ctx, principals[0], dirgate.MustParseIdentifier(q.group), dirgate.ListOptions{IncludeIndirect: q.indirect}); err != nil {
			t.Fatal(err)
		}
	}

	codings := []string{"", "gzip", "zstd", "gzip, zstd;q=0.5"}
	var wg sync.WaitGroup
	errs := make(chan string, 16)
	for w := range 16 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range 150 {
				qi, ci := rng.IntN(len(queries)), rng.IntN(len(callers))
				q := queries[qi]
				v := url.Values{"group": {q.group}}
				if q.indirect {
					v.Set("includeIndirect", "true")
				}
				if q.limit > 0 {
					v.Set("sizeLimit", fmt.Sprint(q.limit))
				}
				r := httptest.NewRequest(http.MethodGet, api+"?"+v.Encode(), nil)
				r.Header.Set(proxy.HeaderToken, fmt.Sprint("token-", ci))
				r.Header.Set("Accept-Encoding", codings[rng.IntN(len(codings))])
				rw := httptest.NewRecorder()
				h.ServeHTTP(rw, r)
				if rw.Code != http.StatusOK {
					errs <- fmt.Sprintf("status %d: %s", rw.Code, rw.Body)
					return
				}
				got := string(decode(t, rw.Header().Get("Content-Encoding"), rw.Body.Bytes()))
				if got != want[[2]int{qi, ci}] {
					whose := "nobody's"
					for cj := range callers {
						if got == want[[2]int{qi, cj}] {
							whose = callers[cj] + "'s"
						}
					}
					errs <- fmt.Sprintf("%s, query %+v: received %s answer", callers[ci], q, whose)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if n := bodies.Len(); n == 0 || n > len(distinct) {
		t.Errorf("%d bodies kept for %d distinct answers", n, len(distinct))
	}
}
