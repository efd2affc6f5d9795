package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/dirgate/dirgate/test/harness/child"
	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/test/harness/redistest"
	"github.com/dirgate/dirgate/test/harness/sambatest"
)

// TestSignInTwoProcesses: two dirgate processes sharing one Redis in front of the
// DC. A token issued through one works on the other and a revocation on either ends
// it on both; with Redis down, a signed-in token is 503 (the client must keep it),
// never 401; and neither process writes a password, session id or token to its
// output.
func TestSignInTwoProcesses(t *testing.T) {
	child.RequireSetting(t, "DIRGATE_SECRET_FILE")
	dc := sambatest.Env(t)
	rds := redistest.Start(t)
	secret := child.WriteFile(t, "secret", "a secret for two processes, 32+ bytes long\n")
	tokens := child.WriteTokens(t, map[string]string{child.NewToken(t, "svc-"): fixture.DemoAdminDN})
	env := map[string]string{"DIRGATE_REDIS_ADDR": rds.Addr(), "DIRGATE_SECRET_FILE": secret, "DIRGATE_LOG_LEVEL": "debug"}
	p1 := child.Start(t, env, child.LDAPArgs(t, dc, dc.URL, tokens)...)
	p2 := child.Start(t, env, child.LDAPArgs(t, dc, dc.URL, tokens)...)
	root := func(p *child.Program) string { return strings.TrimSuffix(p.Base, "/api/directoryObjects/groupMembers") }

	const password = "Two-Processes-1x"
	_, upn := dc.TempUser(t, fmt.Sprintf("si2p%d", os.Getpid()%100000), password, nil)
	c := child.NewClient()
	ctx := context.Background()
	post := func(u, body string) (int, map[string]any) {
		req, _ := http.NewRequestWithContext(ctx, "POST", u, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		r := c.Send(req)
		var m map[string]any
		json.Unmarshal(r.Body, &m)
		return r.Status, m
	}
	signIn := func(on, exchangeOn *child.Program) (string, string) {
		st, s := post(root(on)+"/api/authSessions/create", `{"username":"`+upn+`","password":"`+password+`"}`)
		id, _ := s["sessionId"].(string)
		st2, tk := post(root(exchangeOn)+"/api/auth", `{"sessionId":"`+id+`"}`)
		tok, _ := tk["token"].(string)
		if st != 200 || st2 != 200 || tok == "" {
			t.Fatalf("sign-in: %d %v, exchange %d %v", st, s, st2, tk)
		}
		return id, tok
	}
	list := func(p *child.Program, tok string) int {
		return c.Do(ctx, "GET", child.ListURL(p.Base, fixture.HelpDeskDN, ""), tok).Status
	}

	// The temporary user holds no role: with its token accepted, it is answered about
	// Help Desk as about an unknown group (404); a token not accepted would be 401.
	id, tok := signIn(p1, p2)
	if a, b := list(p1, tok), list(p2, tok); a != 404 || b != 404 {
		t.Fatalf("the token on both processes: %d, %d (want the role-less caller's 404)", a, b)
	}
	if r := c.Do(ctx, "DELETE", root(p2)+"/api/auth?token="+url.QueryEscape(tok), ""); r.Status != 204 {
		t.Fatalf("revoke: %s", r)
	}
	if st := list(p1, tok); st != 401 {
		t.Errorf("revoked on the other process: %d", st)
	}

	_, tok2 := signIn(p2, p1)
	rds.Stop()
	if st := list(p1, tok2); st != 503 {
		t.Errorf("token with Redis down: %d, want 503", st)
	}
	if st, _ := post(root(p2)+"/api/authSessions/create", `{"username":"`+upn+`","password":"`+password+`"}`); st != 503 {
		t.Errorf("sign-in with Redis down: %d, want 503", st)
	}

	for _, p := range []*child.Program{p1, p2} {
		stdout, stderr := p.Output(t)
		out := string(stdout) + string(stderr)
		for _, s := range []string{password, id, tok, tok2} {
			if strings.Contains(out, s) {
				t.Errorf("process %d wrote a secret (%.6s…)", p.Pid, s)
			}
		}
	}
}
