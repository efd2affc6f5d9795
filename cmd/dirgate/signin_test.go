package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dirgate/dirgate/test/harness/redistest"
	"github.com/dirgate/dirgate/throttle"
)

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "[::1]:8080": true, "localhost:80": true, "127.1.2.3:0": true,
		":8080": false, "0.0.0.0:8080": false, "[::]:8080": false, "10.0.0.1:8080": false, "example.com:80": false, "bad": false,
	} {
		if got := isLoopback(addr); got != want {
			t.Errorf("isLoopback(%q) = %v", addr, got)
		}
	}
}

// TestPlainHTTPSignInWarns: sign-in on plain HTTP on every interface logs a
// warning at start-up; on loopback it does not. (The server is closed at once: no
// traffic is sent to it.)
func TestPlainHTTPSignInWarns(t *testing.T) {
	for listen, want := range map[string]bool{"0.0.0.0:0": true, "127.0.0.1:0": false} {
		cfg, err := LoadConfig([]string{"--listen", listen, "--metrics-listen", "127.0.0.1:0", "--decision-log", "off", "--demo"}, func(string) string { return "" }, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		var log bytes.Buffer
		m := NewMain(cfg, io.Discard, &log)
		if err := m.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		m.Close()
		if got := strings.Contains(log.String(), "sign-in is served over plain HTTP on a non-loopback address"); got != want {
			t.Errorf("%s: warned %v\n%s", listen, got, log.String())
		}
	}
}

// TestSignedInTokenActsAsItsUser: on the demo directory, a token from signing in
// with a demo account is the same caller under the policy as that account's
// tokens-file token: the same listings, byte for byte, with and without sizeLimit,
// the same refusal of a removal the policy denies, and, for the administrator, the
// same removal allowed.
func TestSignedInTokenActsAsItsUser(t *testing.T) {
	m, base := startDemo(t, nil)
	root := "http://" + m.Addr() + "/restApi"
	const mixed = "CN=Mixed Members,OU=Groups,DC=corp,DC=example,DC=com"
	// A user the help desk views but may not remove.
	const daisy = "CN=Daisy Vargas,OU=HR,OU=Staff,DC=corp,DC=example,DC=com"
	for _, c := range []struct{ user, password, fileToken string }{
		{"hugo.helpdesk@corp.example.com", "Demo-Helpdesk-1", "demo-helpdesk"},
		{"dana.admin@corp.example.com", "Demo-Admin-1", adminTok},
	} {
		_, tok := signIn(t, root, root, c.user, c.password)
		for _, q := range []string{"", "&sizeLimit=2", "&includeIndirect=true", "&properties=mail"} {
			u := base + "?group=" + url.QueryEscape(mixed) + q
			signed, file := call(t, "GET", u, tok), call(t, "GET", u, c.fileToken)
			if signed.status != 200 || file.status != 200 || !bytes.Equal(signed.body, file.body) {
				t.Errorf("%s%s: signed-in token %d %s, tokens-file token %d %s", c.user, q, signed.status, signed.body, file.status, file.body)
			}
		}
		// A removal the help desk may not make is refused alike (the admin's would
		// change the demo group, which the other tests read).
		del := base + "?group=" + url.QueryEscape(mixed) + "&member=" + url.QueryEscape(daisy)
		if c.fileToken != adminTok {
			if a, b := call(t, "DELETE", del, tok), call(t, "DELETE", del, c.fileToken); a.status != 403 || b.status != 403 || !bytes.Equal(a.body, b.body) {
				t.Errorf("%s: removal %d %s, tokens-file token %d %s", c.user, a.status, a.body, b.status, b.body)
			}
		}
	}
	// The help desk's view is not the administrator's: the comparison above could
	// not pass with one token standing for every caller.
	if a, b := call(t, "GET", base+"?group="+url.QueryEscape(mixed), "demo-helpdesk"), call(t, "GET", base+"?group="+url.QueryEscape(mixed), adminTok); bytes.Equal(a.body, b.body) {
		t.Fatal("the two demo callers see the same listing: the test proves nothing")
	}
}

// TestSignInFailuresCountedAcrossReplicas: two demo instances sharing a real Redis
// count an address's failed sign-ins together. With --auth-max-failures 3, three
// wrong passwords sent to A, B and A make the fourth attempt a 429 on B, where only
// one of them failed; and a right password is refused with 429 too while it lasts.
func TestSignInFailuresCountedAcrossReplicas(t *testing.T) {
	srv := redistest.Start(t)
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("a test secret of at least thirty-two bytes\n"), 0o600)
	start := func() string {
		return startDemoWith(t, "--decision-log", "off", "--redis-addr", srv.Addr(), "--secret-file", secret,
			"--auth-max-failures", "3", "--auth-failure-window", "1m") + "/restApi"
	}
	a, b := start(), start()
	wrong := map[string]string{"username": "dana.admin@corp.example.com", "password": "not-Her-Password-1"}
	for i, root := range []string{a, b, a} {
		if r := postJSON(t, root+"/api/authSessions/create", wrong); r.status != 403 {
			t.Fatalf("failure %d: %d %s", i+1, r.status, r.raw)
		}
	}
	right := map[string]string{"username": "dana.admin@corp.example.com", "password": "Demo-Admin-1"}
	for _, root := range []string{b, a} {
		if r := postJSON(t, root+"/api/authSessions/create", right); r.status != 429 {
			t.Fatalf("after three failures on two replicas, %s answered %d %s", root, r.status, r.raw)
		}
	}
}

// TestExchangeUnknownSessionWithReplica: with Redis and a replica confirming
// deletions (DIRGATE_REDIS_WAIT_REPLICAS's default, 1), POST …/api/auth with a
// session id Redis does not hold, never issued or expired, answers 401, not 503, and
// DELETE …/api/authSessions of it 204.
func TestExchangeUnknownSessionWithReplica(t *testing.T) {
	primary := redistest.Start(t)
	redistest.StartReplica(t, primary).WaitLinkUp(t, 10*time.Second)
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("a test secret of at least thirty-two bytes\n"), 0o600)
	root := startDemoWith(t, "--decision-log", "off", "--redis-addr", primary.Addr(), "--secret-file", secret,
		"--session-ttl", "300ms") + "/restApi"
	s := postJSON(t, root+"/api/authSessions/create", map[string]string{"username": "dana.admin@corp.example.com", "password": "Demo-Admin-1"})
	expired, _ := s.body["sessionId"].(string)
	if s.status != 200 || expired == "" {
		t.Fatalf("create session: %d %s", s.status, s.raw)
	}
	time.Sleep(500 * time.Millisecond) // Redis drops the session's key with its lifetime
	for name, id := range map[string]string{"unknown": strings.Repeat("A", 43), "expired": expired} {
		if r := postJSON(t, root+"/api/auth", map[string]string{"sessionId": id}); r.status != 401 {
			t.Errorf("%s session id: %d %s, want 401", name, r.status, r.raw)
		}
		if r := call(t, "DELETE", root+"/api/authSessions?id="+url.QueryEscape(id), ""); r.status != 204 {
			t.Errorf("ending the %s session: %d %s, want 204", name, r.status, r.body)
		}
	}
}

// TestSignInSprayCountedAcrossReplicas: two demo instances sharing a real Redis
// bound an address's failed sign-ins across all names together. With
// --auth-max-failures 2 an address may fail 5 × 2 checks a window, whatever the
// names: ten unknown names sent to A and B in turn make an eleventh name a 429 on
// both, and the right password of a real account too.
func TestSignInSprayCountedAcrossReplicas(t *testing.T) {
	srv := redistest.Start(t)
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("a test secret of at least thirty-two bytes\n"), 0o600)
	start := func() string {
		return startDemoWith(t, "--decision-log", "off", "--redis-addr", srv.Addr(), "--secret-file", secret,
			"--auth-max-failures", "2", "--auth-failure-window", "1m") + "/restApi"
	}
	a, b := start(), start()
	budget := throttle.ClientSignInFailuresFactor * 2
	for i := range budget {
		root := []string{a, b}[i%2]
		name := map[string]string{"username": fmt.Sprintf("sprayed%d@corp.example.com", i), "password": "Winter2026!"}
		if r := postJSON(t, root+"/api/authSessions/create", name); r.status != 403 {
			t.Fatalf("name %d: %d %s", i+1, r.status, r.raw)
		}
	}
	for _, root := range []string{a, b} {
		fresh := map[string]string{"username": "not.tried@corp.example.com", "password": "Winter2026!"}
		if r := postJSON(t, root+"/api/authSessions/create", fresh); r.status != 429 {
			t.Errorf("%s after %d names on two replicas: %d %s, want 429", root, budget, r.status, r.raw)
		}
		right := map[string]string{"username": "dana.admin@corp.example.com", "password": "Demo-Admin-1"}
		if r := postJSON(t, root+"/api/authSessions/create", right); r.status != 429 {
			t.Errorf("%s: a right password from the spraying address: %d %s, want 429", root, r.status, r.raw)
		}
	}
}
