package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/test/harness/redistest"
	"github.com/dirgate/dirgate/test/harness/sambatest"
	goldap "github.com/go-ldap/ldap/v3"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// syncBuffer is a log destination shared by an instance's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// signInInstance is one dirgate with what it wrote: log, decision log, spans.
type signInInstance struct {
	root   string // scheme://host:port/restApi
	log    *syncBuffer
	dlog   string
	spans  *tracetest.InMemoryExporter
	closer func()
}

// startSignIn runs an LDAP instance with sign-in on Redis, logging everything.
func startSignIn(t *testing.T, dc sambatest.DC, redisAddr, secretFile string, extra ...string) *signInInstance {
	t.Helper()
	dir := t.TempDir()
	pw := filepath.Join(dir, "password")
	tokens := filepath.Join(dir, "tokens.yaml")
	os.WriteFile(pw, []byte(dc.Password), 0o600)
	os.WriteFile(tokens, []byte("- token: e2e-admin\n  subject: "+fixture.DemoAdminDN+"\n"), 0o600)
	in := &signInInstance{log: &syncBuffer{}, dlog: filepath.Join(dir, "decisions.log"), spans: tracetest.NewInMemoryExporter()}
	cfg, err := LoadConfig(append([]string{"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--log-level", "debug", "--upstream", "ldap",
		"--ldap-url", dc.URL, "--ldap-bind-dn", dc.BindDN, "--ldap-password-file", pw, "--ldap-base-dn", dc.BaseDN,
		"--ldap-ca-file", dc.CAFile, "--tokens-file", tokens, "--redis-addr", redisAddr, "--secret-file", secretFile,
		"--decision-log", in.dlog, "--log-flush", "0"}, extra...), func(string) string { return "" }, io.Discard) // logs are read back at once
	if err != nil {
		t.Fatal(err)
	}
	m := NewMain(cfg, io.Discard, in.log)
	m.spanExporter = in.spans
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	in.root = "http://" + m.Addr() + "/restApi"
	return in
}

type signInAnswer struct {
	status int
	body   map[string]any
	raw    string
}

func postJSON(t *testing.T, u string, v any) signInAnswer {
	t.Helper()
	b, _ := json.Marshal(v)
	res, err := http.Post(u, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	a := signInAnswer{status: res.StatusCode, raw: string(raw)}
	json.Unmarshal(raw, &a.body)
	return a
}

// signIn runs both steps and returns the session id and the token.
func signIn(t *testing.T, createOn, exchangeOn, user, password string) (string, string) {
	t.Helper()
	s := postJSON(t, createOn+"/api/authSessions/create", map[string]string{"username": user, "password": password})
	if s.status != 200 || s.body["changePasswordReason"] != 0.0 {
		t.Fatalf("create session as %s: %d %s", user, s.status, s.raw)
	}
	id, _ := s.body["sessionId"].(string)
	a := postJSON(t, exchangeOn+"/api/auth", map[string]string{"sessionId": id})
	tok, _ := a.body["token"].(string)
	if a.status != 200 || tok == "" {
		t.Fatalf("exchange: %d %s", a.status, a.raw)
	}
	return id, tok
}

// listStatus lists Help Desk with token. The accounts this test signs in with hold no
// role under the bundled policy, so an accepted token gets the unknown group's 404
// (docs/api.md, "Objects the caller may not view"), a refused one 401.
func listStatus(t *testing.T, root, token string) int {
	t.Helper()
	return call(t, "GET", root+"/api/directoryObjects/groupMembers?group="+url.QueryEscape(fixture.HelpDeskDN), token).status
}

// TestSignInLDAP: two instances sharing a real Redis in front of the real DC, with
// accounts this test creates in every state of the table.
func TestSignInLDAP(t *testing.T) {
	dc := sambatest.Env(t)
	srv := redistest.Start(t)
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("an e2e secret of at least thirty-two bytes\n"), 0o600)
	a := startSignIn(t, dc, srv.Addr(), secret, "--token-ttl", "4s")
	b := startSignIn(t, dc, srv.Addr(), secret, "--token-ttl", "4s")
	domain := dnsDomainOfBase(dc.BaseDN)
	netbios := strings.ToUpper(strings.SplitN(domain, ".", 2)[0])

	const password = "E2e-Sign-In-1x"
	sam := fmt.Sprintf("sie2e%d", os.Getpid()%100000)
	userDN, upn := dc.TempUser(t, sam, password, nil)

	// Signed in on A, exchanged on B, used on both: the token is the user's.
	sid, tok := signIn(t, a.root, b.root, upn, password)
	for _, in := range []*signInInstance{a, b} {
		if st := listStatus(t, in.root, tok); st != 404 {
			t.Fatalf("listing with the token: %d", st)
		}
	}
	dlog, _ := os.ReadFile(a.dlog)
	if !strings.Contains(string(dlog), userDN) {
		t.Errorf("the decision log does not name the signed-in user %s as subject", userDN)
	}
	// DOMAIN\user signs the same account in.
	sid2, tok2 := signIn(t, b.root, b.root, netbios+`\`+sam, password)

	// Revocation on A takes effect on B at once; ending a session revokes its token.
	if r := call(t, "DELETE", a.root+"/api/auth?token="+url.QueryEscape(tok), tok); r.status != 204 {
		t.Fatalf("revoke: %d %s", r.status, r.body)
	}
	if st := listStatus(t, b.root, tok); st != 401 {
		t.Errorf("revoked token on the other instance: %d", st)
	}
	if r := call(t, "DELETE", b.root+"/api/authSessions?id="+url.QueryEscape(sid2), ""); r.status != 204 {
		t.Fatalf("end session: %d", r.status)
	}
	if st := listStatus(t, a.root, tok2); st != 401 {
		t.Errorf("token of an ended session: %d", st)
	}
	if r := call(t, "DELETE", a.root+"/api/authSessions?id="+url.QueryEscape(sid), ""); r.status != 204 {
		t.Errorf("ending an already used session: %d", r.status)
	}

	// A record altered in Redis is refused by both instances.
	_, tok3 := signIn(t, a.root, a.root, upn, password)
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rc.Close()
	keys, _ := rc.Keys(context.Background(), "dirgate:auth:t:*").Result()
	for _, k := range keys {
		v, _ := rc.Get(context.Background(), k).Result()
		rc.Set(context.Background(), k, strings.Replace(v, `"sub":"`, `"sub":"0`, 1), time.Minute)
	}
	for _, in := range []*signInInstance{a, b} {
		if st := listStatus(t, in.root, tok3); st != 401 {
			t.Errorf("altered token record: %d", st)
		}
	}

	// Expiry, with a 4 s token lifetime.
	_, tok4 := signIn(t, a.root, a.root, upn, password)
	if st := listStatus(t, b.root, tok4); st != 404 {
		t.Fatalf("fresh token: %d", st)
	}
	time.Sleep(4 * time.Second)
	if st := listStatus(t, b.root, tok4); st != 401 {
		t.Errorf("expired token: %d", st)
	}

	// Every refusal of the table, through the whole stack, for real accounts.
	wrong := postJSON(t, a.root+"/api/authSessions/create", map[string]string{"username": upn, "password": "wrong-Password-1"})
	unknown := postJSON(t, a.root+"/api/authSessions/create", map[string]string{"username": "nobody" + sam + "@" + domain, "password": "wrong-Password-1"})
	if wrong.status != 403 || wrong.raw != unknown.raw || unknown.status != 403 ||
		!strings.Contains(wrong.raw, `"innerError":{"message":"The user name or password is incorrect.","code":"invalidCredentials"}`) {
		t.Errorf("wrong password %d %s and unknown user %d %s must be answered alike", wrong.status, wrong.raw, unknown.status, unknown.raw)
	}
	set := func(attr, v string) func(*goldap.Conn, string) {
		return func(c *goldap.Conn, dn string) {
			m := goldap.NewModifyRequest(dn, nil)
			m.Replace(attr, []string{v})
			if err := c.Modify(m); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, s := range []struct {
		tag, code string
		change    func(*goldap.Conn, string)
	}{
		{"dis", "accountIsDisabled", set("userAccountControl", "514")},
		{"exp", "accountExpired", set("accountExpires", "132223104000000000")},
		{"hrs", "logonTimeIncorrect", set("logonHours", string(make([]byte, 21)))},
		{"lck", "accountLockedOut", func(_ *goldap.Conn, dn string) {
			for range 3 {
				c, err := goldap.DialURL(dc.URL, goldap.DialWithTLSConfig(dc.TLSConfig()))
				if err != nil {
					t.Fatal(err)
				}
				_ = c.Bind(dn, "wrong-password")
				c.Close()
			}
		}},
	} {
		_, u := dc.TempUser(t, fmt.Sprintf("si%s%d", s.tag, os.Getpid()%100000), password, s.change)
		r := postJSON(t, b.root+"/api/authSessions/create", map[string]string{"username": u, "password": password})
		if inner, _ := r.body["innerError"].(map[string]any); r.status != 403 || inner["code"] != s.code {
			t.Errorf("%s: %d %s, want 403 %s", s.tag, r.status, r.raw, s.code)
		}
	}
	// A password that must change: a session with changePasswordReason 1 and no token.
	_, mc := dc.TempUser(t, fmt.Sprintf("sichg%d", os.Getpid()%100000), password, set("pwdLastSet", "0"))
	s := postJSON(t, a.root+"/api/authSessions/create", map[string]string{"username": mc, "password": password})
	if s.status != 200 || s.body["changePasswordReason"] != 1.0 {
		t.Fatalf("must-change: %d %s", s.status, s.raw)
	}
	x := postJSON(t, b.root+"/api/auth", map[string]any{"sessionId": s.body["sessionId"]})
	if inner, _ := x.body["innerError"].(map[string]any); x.status != 403 || inner["code"] != "passwordChangeNeeded" {
		t.Errorf("must-change exchange: %d %s", x.status, x.raw)
	}

	// No password, session id or token in any log, decision log or span.
	secrets := []string{password, "wrong-Password-1", sid, sid2, tok, tok2, tok3, tok4, strings.TrimPrefix(tok, "dgt_")}
	for _, in := range []*signInInstance{a, b} {
		dl, _ := os.ReadFile(in.dlog)
		var spans bytes.Buffer
		for _, sp := range in.spans.GetSpans() {
			fmt.Fprintf(&spans, "%s %v %v\n", sp.Name, sp.Attributes, sp.Events)
		}
		for what, text := range map[string]string{"log": in.log.String(), "decision log": string(dl), "spans": spans.String()} {
			for _, sec := range secrets {
				if sec != "" && strings.Contains(text, sec) {
					t.Errorf("the %s holds a secret (%.6s…)", what, sec)
				}
			}
		}
	}
}

func dnsDomainOfBase(dn string) string {
	var labels []string
	for _, rdn := range strings.Split(dn, ",") {
		if k, v, ok := strings.Cut(rdn, "="); ok && strings.EqualFold(strings.TrimSpace(k), "DC") {
			labels = append(labels, v)
		}
	}
	return strings.Join(labels, ".")
}
