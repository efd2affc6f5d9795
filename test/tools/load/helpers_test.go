package load

import (
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/auth/tokenfile"
	"github.com/dirgate/dirgate/cache"
	"github.com/dirgate/dirgate/policy"
	"github.com/dirgate/dirgate/proxy"
	"github.com/dirgate/dirgate/render"
	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/throttle"
	"github.com/dirgate/dirgate/upstream/memory"
)

// gateway is dirgate in process: the demo directory behind the in-process cache, the bundled policy, tokens for the setup's callers, and the HTTP
// layer. It is wired as cmd/dirgate wires it, less telemetry.
type gateway struct {
	URL   string
	Dir   *memory.Directory
	Setup Setup
}

func startGateway(t *testing.T) *gateway {
	t.Helper()
	ctx := t.Context()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	mem, err := memory.Demo()
	if err != nil {
		t.Fatal(err)
	}
	c, err := cache.Config{Logger: quiet}.Open(ctx, mem)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	svc := &dirgate.MemberService{Dir: c, Listings: c, Authz: openPolicy(t)}

	s := DemoSetup(fixture.Demo())
	var yaml strings.Builder
	for i := range s.Callers {
		s.Callers[i].Token = "token-" + s.Callers[i].Name
		fmt.Fprintf(&yaml, "- token: %s\n  subject: %q\n", s.Callers[i].Token, s.Callers[i].Subject)
	}
	tokens, err := tokenfile.Open(tokenfile.Config{Path: "test tokens", Data: []byte(yaml.String()), Resolver: svc, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	h, err := proxy.New(proxy.Config{Authenticator: tokens, Service: svc, Bodies: render.NewLister(svc, render.NewBodyCache(16<<20)), Logger: quiet,
		Throttle: mustThrottle(t)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &gateway{URL: srv.URL + proxy.DefaultBasePath + proxy.ResourcePath, Dir: mem, Setup: s}
}

func openPolicy(t *testing.T) *policy.Authorizer {
	t.Helper()
	a, err := policy.Open(t.Context(), policy.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// reference is the uncached reference over a separate copy of the demo directory.
func reference(t *testing.T) *dirgate.MemberService {
	t.Helper()
	mem, err := memory.Demo()
	if err != nil {
		t.Fatal(err)
	}
	return &dirgate.MemberService{Dir: mem, Authz: openPolicy(t)}
}

// expectDemo computes the expected answers of w on the demo directory.
func expectDemo(t *testing.T, w Workload) *Checker {
	t.Helper()
	c, err := Expect(t.Context(), reference(t), w)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// mustThrottle is the throttle of cfg (the defaults without one).
func mustThrottle(t testing.TB, cfg ...throttle.Config) *throttle.Throttle {
	t.Helper()
	var c throttle.Config
	if len(cfg) > 0 {
		c = cfg[0]
	}
	th, err := throttle.New(c)
	if err != nil {
		t.Fatalf("throttle.New: %v", err)
	}
	return th
}
