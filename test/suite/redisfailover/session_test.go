package redisfailover

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/dirgate/dirgate/test/harness/child"
	"github.com/dirgate/dirgate/test/harness/fixture"
)

// account creates a user of the test's own, with no role, and returns its UPN.
func account(t *testing.T, d *deployment, name string) string {
	t.Helper()
	_, upn := d.dc.TempUser(t, fmt.Sprintf("rf%s%d", name[:1], os.Getpid()%100000), accountPassword, nil)
	return upn
}

const accountPassword = "Redis-Failover-1x"

// post sends a JSON body and returns the status and the decoded answer.
func post(d *deployment, u, body string) (int, map[string]any) {
	req, _ := http.NewRequestWithContext(context.Background(), "POST", u, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	r := d.c.Send(req)
	var m map[string]any
	_ = json.Unmarshal(r.Body, &m)
	return r.Status, m
}

// createSession signs upn in on p (docs/auth.md, "Signing in") and returns the
// session id.
func createSession(t *testing.T, d *deployment, p *child.Program, upn string) string {
	t.Helper()
	st, s := post(d, root(p)+"/api/authSessions/create", `{"username":"`+upn+`","password":"`+accountPassword+`"}`)
	session, _ := s["sessionId"].(string)
	if st != 200 || session == "" {
		t.Fatalf("sign-in on %s: %d %v", p.Addr, st, s)
	}
	return session
}

// exchange exchanges a session for a token on p: the status, and the token on 200.
func exchange(d *deployment, p *child.Program, session string) (int, string) {
	st, tk := post(d, root(p)+"/api/auth", `{"sessionId":"`+session+`"}`)
	token, _ := tk["token"].(string)
	return st, token
}

// tokenStatus lists a fixture group with the signed-in token: the user holds no
// role, so an accepted token is answered as about an unknown group (404), a refused
// one 401, and 503 when the instance cannot read Redis.
func tokenStatus(ctx context.Context, d *deployment, p *child.Program, token string) int {
	r := d.c.Do(ctx, "GET", child.ListURL(p.Base, fixture.HelpDeskDN, ""), token)
	if r.Err != nil {
		return 0
	}
	return r.Status
}
