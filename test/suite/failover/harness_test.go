package failover

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	bundled "github.com/dirgate/dirgate/rego"
	"github.com/dirgate/dirgate/test/harness/child"
	"github.com/dirgate/dirgate/test/harness/redistest"
	"github.com/dirgate/dirgate/test/harness/sambatest"
	goldap "github.com/go-ldap/ldap/v3"
)

// Smoke objects that test/harness/samba/pair.sh seeds on DC1 and replicates to DC2
// (test/harness/samba/testdata/smoke.ldif and smoke-post.json).
const (
	smokeOU    = "OU=dirgate-smoke,DC=corp,DC=example,DC=com"
	alice      = "CN=smoke-alice," + smokeOU
	aliceUPN   = "smoke-alice@corp.example.com"
	alicePw    = "Smoke-Alice-1"
	smith      = `CN=Smith\, John (Ünïcode)*,` + smokeOU
	quoted     = `CN=a\+b \"quoted\" back\\slash,` + smokeOU
	hashUser   = `CN=\#hash-user,OU=Nested Ünits,` + smokeOU
	zoe        = "CN=Zoë Ørsted-Łukasz,OU=Nested Ünits," + smokeOU
	contact    = "CN=smoke-contact," + smokeOU
	pc         = "CN=smoke-pc," + smokeOU
	mustChange = "CN=smoke-mustchange," + smokeOU
)

// slowAnswer is the bound: no request may take longer, whatever one DC does.
const slowAnswer = 5 * time.Second

// healthInterval replaces the default 30 s so that a DC that comes back is
// preferred again within seconds and the tests stay short; every other LDAP
// setting keeps its default (attempt 1.5 s, dial 2 s, operation 10 s), because
// the 5 s bound must hold with the defaults.
const healthInterval = 5 * time.Second

// cluster is two dirgate replicas (A and B) sharing one Redis, each configured
// with both DCs, DC1 preferred, and a token acting as smoke-alice, whom the policy
// lets view, remove and add everything in the smoke OU.
type cluster struct {
	pair sambatest.Pair
	a, b *child.Program
	tok  string
	c    *child.Client
	// props numbers the properties sets of listings that must miss the cache.
	props atomic.Int64
}

// newProps returns a properties parameter no listing of this cluster used yet.
func (cl *cluster) newProps() string { return child.PropsFor(int(cl.props.Add(1))) }

func startCluster(t *testing.T) *cluster {
	t.Helper()
	pair := sambatest.PairFromEnv(t)
	rds := redistest.Start(t)
	policyDir := filepath.Join(t.TempDir(), "policy")
	if err := os.Mkdir(policyDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := bundled.WriteWithRoles(policyDir, map[string]any{"name": "failover-smoke",
		"trustees": []string{alice}, "permissions": []string{"view", "remove", "add"},
		"scopes": []any{map[string]string{"subtree": smokeOU}}}); err != nil {
		t.Fatal(err)
	}
	tok := child.NewToken(t, "failover-")
	env := map[string]string{
		"DIRGATE_UPSTREAM":             "ldap",
		"DIRGATE_LDAP_URL":             pair.URL(1) + " " + pair.URL(2),
		"DIRGATE_LDAP_BIND_DN":         pair.BindDN,
		"DIRGATE_LDAP_PASSWORD_FILE":   child.WriteFile(t, "ldap-password", pair.Password),
		"DIRGATE_LDAP_BASE_DN":         pair.BaseDN,
		"DIRGATE_LDAP_CA_FILE":         pair.CAFile,
		"DIRGATE_LDAP_HEALTH_INTERVAL": healthInterval.String(),
		"DIRGATE_TOKENS_FILE":          child.WriteTokens(t, map[string]string{tok: alice}),
		"DIRGATE_POLICY_DIR":           policyDir,
		"DIRGATE_DECISION_LOG":         "off",
		"DIRGATE_REDIS_ADDR":           rds.Addr(),
		"DIRGATE_SECRET_FILE":          child.WriteFile(t, "secret", "the failover tests' secret, 32 bytes or more\n"),
	}
	cl := &cluster{pair: pair, tok: tok, c: child.NewClient()}
	cl.a = child.Start(t, env)
	cl.b = child.Start(t, env)
	// The replicas run with the race detector when the tests do: a race found in
	// them while DCs fail fails the test, with the report.
	t.Cleanup(func() {
		for _, name := range []string{"A", "B"} {
			p := cl.replicas()[name]
			err := p.Stop()
			_, stderr := p.Output(t)
			if i := strings.Index(string(stderr), "WARNING: DATA RACE"); i >= 0 {
				t.Errorf("replica %s (exit: %v) reported a data race:\n%s", name, err, stderr[i:min(len(stderr), i+6000)])
			}
			if t.Failed() {
				t.Logf("replica %s log (warnings and errors):\n%s", name, interesting(stderr))
			}
		}
	})
	return cl
}

// interesting keeps the log lines above info level and the failover events, which
// are what explains a failure here.
func interesting(log []byte) string {
	var out []string
	for _, l := range strings.Split(string(log), "\n") {
		if strings.Contains(l, `"level":"WARN"`) || strings.Contains(l, `"level":"ERROR"`) ||
			strings.Contains(l, "domain controller") {
			out = append(out, l)
		}
	}
	if len(out) > 60 {
		out = append(out[:30:30], append([]string{"…"}, out[len(out)-30:]...)...)
	}
	return strings.Join(out, "\n")
}

func (cl *cluster) replicas() map[string]*child.Program {
	return map[string]*child.Program{"A": cl.a, "B": cl.b}
}

// newGroups creates groups of the test's own in the smoke OU on DC1 and waits
// until DC2 holds them too (so that a fault on DC1 cannot strand them); they are
// deleted when the test ends (after the pair is restored: cleanups run last-in
// first-out). Each spec is a name followed by the members.
func newGroups(t *testing.T, pair sambatest.Pair, specs ...[]string) []string {
	t.Helper()
	admin := pair.DC(1).DialAdmin(t)
	var dns []string
	for _, spec := range specs {
		name, members := spec[0], spec[1:]
		dn := fmt.Sprintf("CN=failover %s %d,%s", goldap.EscapeDN(name), os.Getpid(), smokeOU)
		_ = admin.Del(goldap.NewDelRequest(dn, nil)) // left over by a killed run
		add := goldap.NewAddRequest(dn, nil)
		add.Attribute("objectClass", []string{"top", "group"})
		add.Attribute("member", members)
		if err := admin.Add(add); err != nil {
			t.Fatalf("create %s: %v", dn, err)
		}
		t.Cleanup(func() {
			c := pair.DC(1).DialAdmin(t)
			if err := c.Del(goldap.NewDelRequest(dn, nil)); err != nil && !goldap.IsErrorWithCode(err, goldap.LDAPResultNoSuchObject) {
				t.Errorf("delete %s: %v", dn, err)
			}
		})
		dns = append(dns, dn)
	}
	for i, dn := range dns {
		waitOnDC(t, pair, 2, dn, specs[i][1:])
	}
	return dns
}

// waitOnDC waits until DC n's member values of group are want (as keys).
func waitOnDC(t *testing.T, pair sambatest.Pair, n int, group string, want []string) time.Duration {
	t.Helper()
	admin := pair.DC(n).DialAdmin(t)
	return child.Eventually(t, 60*time.Second, fmt.Sprintf("DC%d holds %s as expected", n, group), func() (bool, string) {
		got, err := dcMembers(admin, group)
		if err != nil {
			return false, err.Error()
		}
		return sameKeys(got, want), fmt.Sprint(got)
	})
}

// dcMembers reads the member values of group on one DC, as the administrator: the
// ground truth.
func dcMembers(admin *goldap.Conn, group string) ([]string, error) {
	res, err := admin.Search(goldap.NewSearchRequest(group, goldap.ScopeBaseObject, goldap.NeverDerefAliases,
		0, 0, false, "(objectClass=group)", []string{"member"}, nil))
	if err != nil {
		return nil, fmt.Errorf("read members of %s: %w", group, err)
	}
	if len(res.Entries) != 1 {
		return nil, fmt.Errorf("read members of %s: %d entries", group, len(res.Entries))
	}
	return res.Entries[0].GetAttributeValues("member"), nil
}

func key(dn string) string { return dirgate.MustParseDN(dn).Key() }

func sameKeys(got, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	for _, w := range want {
		if !hasDN(got, w) {
			return false
		}
	}
	return true
}

func hasDN(list []string, dn string) bool {
	k := key(dn)
	for _, v := range list {
		if p, err := dirgate.ParseDN(v); err == nil && p.Key() == k {
			return true
		}
	}
	return false
}

// list lists group on p; extra is appended to the query ("&properties=…" makes a
// listing the cache never saw).
func (cl *cluster) list(ctx context.Context, p *child.Program, group, extra string) child.Result {
	return cl.c.Do(ctx, "GET", child.ListURL(p.Base, group, extra), cl.tok)
}

func (cl *cluster) remove(ctx context.Context, p *child.Program, group, member string) child.Result {
	return cl.c.Do(ctx, "DELETE", child.RemoveURL(p.Base, group, member), cl.tok)
}

func (cl *cluster) add(ctx context.Context, p *child.Program, group, member string) child.Result {
	return cl.c.Add(ctx, p.Base, group, member, cl.tok)
}

// root is the program's base path (/restApi), under which the sign-in flow lives.
func root(p *child.Program) string {
	return strings.TrimSuffix(p.Base, "/api/directoryObjects/groupMembers")
}

// signIn runs the sign-in flow as smoke-alice on p: create a session (the bind
// against the directory), exchange it for a token, end the session. It returns
// each step's result; the first is the one that reaches the directory.
func (cl *cluster) signIn(ctx context.Context, p *child.Program, group string) []step {
	post := func(u, body string) child.Result {
		req, err := http.NewRequestWithContext(ctx, "POST", u, strings.NewReader(body))
		if err != nil {
			return child.Result{Err: err}
		}
		req.Header.Set("Content-Type", "application/json")
		return cl.c.Send(req)
	}
	var steps []step
	r := post(root(p)+"/api/authSessions/create", `{"username":"`+aliceUPN+`","password":"`+alicePw+`"}`)
	steps = append(steps, step{"sign-in", r})
	var s struct{ SessionID string }
	if r.Status != 200 || json.Unmarshal(r.Body, &s) != nil || s.SessionID == "" {
		return steps
	}
	r = post(root(p)+"/api/auth", `{"sessionId":"`+s.SessionID+`"}`)
	steps = append(steps, step{"exchange", r})
	var tk struct{ Token string }
	if r.Status != 200 || json.Unmarshal(r.Body, &tk) != nil || tk.Token == "" {
		steps[len(steps)-1].r.Err = fmt.Errorf("no token in %s", r)
		return steps
	}
	// The signed-in token works: a listing as alice, whose role lets her view group.
	steps = append(steps, step{"signed-in listing", cl.c.Do(ctx, "GET", child.ListURL(p.Base, group, ""), tk.Token)})
	steps = append(steps, step{"sign-out", cl.c.Do(ctx, "DELETE", root(p)+"/api/authSessions?id="+s.SessionID, "")})
	return steps
}

type step struct {
	kind string
	r    child.Result
}

// upstreamCheck returns p's /readyz upstream check.
func upstreamCheck(ctx context.Context, p *child.Program) (string, error) {
	_, body, err := p.Ready(ctx)
	if err != nil {
		return "", err
	}
	var r struct {
		Checks map[string]string `json:"checks"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		return "", fmt.Errorf("readyz %q: %w", body, err)
	}
	return r.Checks["upstream"], nil
}

// serverCalls returns dirgate_ldap_server_requests for the DC at url with outcome ok.
func serverCalls(ctx context.Context, p *child.Program, url string) (float64, error) {
	m, err := p.Metrics(ctx)
	if err != nil {
		return 0, err
	}
	var n float64
	for k, v := range m {
		if strings.HasPrefix(k, "dirgate_ldap_server_requests") && strings.Contains(k, `server="`+url+`"`) &&
			strings.Contains(k, `outcome="ok"`) {
			n += v
		}
	}
	return n, nil
}

// feedSwitch returns when the change feed, on whichever replica reads it, first
// logged that it follows another DC after since ("cache: change feed follows
// another DC", changefeed/feed.go), and the line; zero when none did.
func (cl *cluster) feedSwitch(t *testing.T, since time.Time) (time.Time, string) {
	t.Helper()
	var first time.Time
	var line string
	for _, p := range cl.replicas() {
		_, stderr := p.Output(t)
		for _, l := range strings.Split(string(stderr), "\n") {
			if !strings.Contains(l, "cache: change feed follows another DC") {
				continue
			}
			var e struct{ Time time.Time }
			if json.Unmarshal([]byte(l), &e) != nil || e.Time.Before(since) {
				continue
			}
			if first.IsZero() || e.Time.Before(first) {
				first, line = e.Time, l
			}
		}
	}
	return first, line
}
