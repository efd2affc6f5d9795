package load

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/auth/tokenfile"
	"github.com/dirgate/dirgate/cache"
	"github.com/dirgate/dirgate/policy"
	"github.com/dirgate/dirgate/proxy"
	"github.com/dirgate/dirgate/test/fixture"
	"github.com/dirgate/dirgate/upstream/memory"
)

// readdable is the demo directory with removals kept beside it, so that a member can
// be put back (the memory upstream has no add): what LDAP gives the load tool on a
// domain controller.
type readdable struct {
	dirgate.Directory
	mu      sync.Mutex
	removed map[[2]string]bool // group GUID, member GUID
}

func (d *readdable) gone(group, member string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.removed[[2]string{group, member}]
}

func (d *readdable) Members(ctx context.Context, group dirgate.Object, props []string) ([]dirgate.Object, error) {
	ms, err := d.Directory.Members(ctx, group, props)
	return slices.DeleteFunc(ms, func(m dirgate.Object) bool { return d.gone(group.GUID, m.GUID) }), err
}

func (d *readdable) MemberOf(ctx context.Context, obj dirgate.Object) ([]dirgate.Object, error) {
	gs, err := d.Directory.MemberOf(ctx, obj)
	return slices.DeleteFunc(gs, func(g dirgate.Object) bool { return d.gone(g.GUID, obj.GUID) }), err
}

func (d *readdable) RemoveMember(ctx context.Context, group, member dirgate.Object) error {
	ms, err := d.Members(ctx, group, nil)
	if err != nil {
		return err
	}
	rid, ok := dirgate.RID(group.SID)
	if !slices.ContainsFunc(ms, func(m dirgate.Object) bool { return m.GUID == member.GUID }) || (ok && member.PrimaryGroupID == rid) {
		return d.Directory.RemoveMember(ctx, group, member) // its error: not a member, primary group
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.removed[[2]string{group.GUID, member.GUID}] = true
	return nil
}

func (d *readdable) ReAdd(ctx context.Context, group, member string) error {
	g, err := d.Lookup(ctx, dirgate.MustParseIdentifier(group), nil)
	if err != nil {
		return fmt.Errorf("re-add: %w", err)
	}
	m, err := d.Lookup(ctx, dirgate.MustParseIdentifier(member), nil)
	if err != nil {
		return fmt.Errorf("re-add: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.removed, [2]string{g.GUID, m.GUID})
	return nil
}

// gateway is dirgate in process: the demo directory (re-addable) behind the
// in-process cache, the bundled policy, tokens for the setup's callers, and the HTTP
// layer. It is wired as cmd/dirgate wires it, less telemetry.
type gateway struct {
	URL   string
	Dir   *readdable
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
	dir := &readdable{Directory: mem, removed: map[[2]string]bool{}}
	c, err := cache.Config{Logger: quiet}.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	svc := &dirgate.MemberService{Dir: c, Listings: c, Authz: openPolicy(t), Bodies: dirgate.NewBodyCache(16 << 20)}

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
	h, err := proxy.New(proxy.Config{Authenticator: tokens, Service: svc, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &gateway{URL: srv.URL + proxy.DefaultBasePath + proxy.ResourcePath, Dir: dir, Setup: s}
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
