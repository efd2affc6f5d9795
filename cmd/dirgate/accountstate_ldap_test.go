package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/ldapentry"
	"github.com/dirgate/dirgate/test/harness/sambatest"
	goldap "github.com/go-ldap/ldap/v3"
)

// startAccountState runs an LDAP instance with tokensFile, logging warnings at once.
func startAccountState(t *testing.T, dc sambatest.DC, tokensFile string, extra ...string) (root string, log *syncBuffer) {
	t.Helper()
	pw := filepath.Join(t.TempDir(), "password")
	os.WriteFile(pw, []byte(dc.Password), 0o600)
	log = &syncBuffer{}
	cfg, err := LoadConfig(append([]string{"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--log-level", "warn", "--log-flush", "0", "--upstream", "ldap",
		"--ldap-url", dc.URL, "--ldap-bind-dn", dc.BindDN, "--ldap-password-file", pw, "--ldap-base-dn", dc.BaseDN,
		"--ldap-ca-file", dc.CAFile, "--tokens-file", tokensFile, "--decision-log", "off"}, extra...),
		func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	m := NewMain(cfg, io.Discard, log)
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return "http://" + m.Addr() + "/restApi", log
}

// TestAccountStateLDAP: against the real DC, accounts this test creates lose their
// tokens (tokens file and signed in alike) once disabled, locked out or expired:
// within DIRGATE_PRINCIPAL_TTL without the change feed (instance A: 2 s), and
// through the change feed with a principal TTL of an hour (instance B).
func TestAccountStateLDAP(t *testing.T) {
	dc := sambatest.Env(t)
	const password = "E2e-Acct-State-1x"
	pid := os.Getpid() % 100000
	type account struct {
		tag, dn, upn, guid, token, reason string
		change                            func(admin *goldap.Conn, dn string)
	}
	set := func(attr, v string) func(*goldap.Conn, string) {
		return func(c *goldap.Conn, dn string) {
			m := goldap.NewModifyRequest(dn, nil)
			m.Replace(attr, []string{v})
			if err := c.Modify(m); err != nil {
				t.Fatalf("modify %s: %v", dn, err)
			}
		}
	}
	lock := func(_ *goldap.Conn, dn string) {
		for range 3 { // the harness domain's lockout threshold
			c, err := goldap.DialURL(dc.URL, goldap.DialWithTLSConfig(dc.TLSConfig()))
			if err != nil {
				t.Fatal(err)
			}
			_ = c.Bind(dn, "wrong-password")
			c.Close()
		}
	}
	accounts := []*account{
		{tag: "dis", reason: dirgate.AccountRefusedDisabled, change: set("userAccountControl", "514")},
		{tag: "lck", reason: dirgate.AccountRefusedLocked, change: lock},
		{tag: "exp", reason: dirgate.AccountRefusedExpired, change: set("accountExpires", "132223104000000000")}, // 2020-01-01
		{tag: "sig", reason: dirgate.AccountRefusedDisabled, change: set("userAccountControl", "514")},           // signed in
	}
	admin := dc.DialAdmin(t)
	var tf strings.Builder
	for _, a := range accounts {
		a.dn, a.upn = dc.TempUser(t, fmt.Sprintf("acst%s%d", a.tag, pid), password, nil)
		res, err := admin.Search(goldap.NewSearchRequest(a.dn, goldap.ScopeBaseObject, goldap.NeverDerefAliases, 0, 0, false,
			"(objectClass=*)", []string{"objectGUID"}, nil))
		if err != nil || len(res.Entries) != 1 {
			t.Fatalf("read %s: %v", a.dn, err)
		}
		a.guid = ldapentry.GUIDFromBytes(res.Entries[0].GetRawAttributeValue("objectGUID"))
		if a.tag != "sig" {
			a.token = "acct-state-" + a.tag
			fmt.Fprintf(&tf, "- token: %s\n  subject: %s\n", a.token, a.dn)
		}
	}
	tokens := filepath.Join(t.TempDir(), "tokens.yaml")
	os.WriteFile(tokens, []byte(tf.String()), 0o600)
	// The accounts may view the group they list (Help Desk): in order, they answer 200.
	var trustees []string
	for _, a := range accounts {
		trustees = append(trustees, a.dn)
	}
	policy := policyViewingGroups(t, "OU=Groups,"+dc.BaseDN, trustees...)
	const ttl = 2 * time.Second
	rootA, logA := startAccountState(t, dc, tokens, "--policy-dir", policy, "--changefeed=false", "--principal-ttl", ttl.String())
	rootB, logB := startAccountState(t, dc, tokens, "--policy-dir", policy, "--principal-ttl", "1h")

	// Before: every token works on both instances; the signed-in account holds one
	// token per instance (sessions are per instance without Redis).
	sigToken := map[string]string{}
	for _, root := range []string{rootA, rootB} {
		_, sigToken[root] = signIn(t, root, root, accounts[3].upn, password)
	}
	for _, root := range []string{rootA, rootB} {
		for _, a := range accounts {
			tok := a.token
			if tok == "" {
				tok = sigToken[root]
			}
			if st := listStatus(t, root, tok); st != 200 {
				t.Fatalf("%s before the change: %d", a.tag, st)
			}
		}
	}

	for _, a := range accounts {
		a.change(admin, a.dn)
	}
	changed := time.Now()
	// Both instances polled together, each token until its first 401.
	bounds := map[string]time.Duration{
		rootA: ttl + 5*time.Second, // a refresh, plus the directory reads on a loaded machine
		rootB: feedBound,           // the principal TTL is an hour: only the feed can do it
	}
	refusedAfter := map[string]time.Duration{}
	for pending := true; pending; {
		pending = false
		for _, root := range []string{rootA, rootB} {
			for _, a := range accounts {
				tok := a.token
				if tok == "" {
					tok = sigToken[root]
				}
				key := root + " " + a.tag
				if _, done := refusedAfter[key]; done {
					continue
				}
				r := call(t, "GET", root+"/api/directoryObjects/groupMembers?group=CN%3DHelp%20Desk%2COU%3DGroups%2C"+
					strings.ReplaceAll(dc.BaseDN, ",", "%2C"), tok)
				if r.status == 401 {
					unauthenticated(t, a.tag, r)
					refusedAfter[key] = time.Since(changed)
					continue
				}
				if time.Since(changed) > bounds[root] {
					t.Fatalf("%s on %s: still %d %.80s %s after the change", a.tag, root, r.status, r.body, time.Since(changed).Round(time.Millisecond))
				}
				pending = true
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, root := range []string{rootA, rootB} {
		var last time.Duration
		for _, a := range accounts {
			last = max(last, refusedAfter[root+" "+a.tag])
		}
		t.Logf("%s: the last token refused %s after the changes", map[string]string{rootA: "TTL 2s, no feed", rootB: "feed, TTL 1h"}[root],
			last.Round(time.Millisecond))
	}
	for _, log := range []*syncBuffer{logA, logB} {
		l := log.String()
		for _, a := range accounts {
			if want := fmt.Sprintf(`"account":%q,"reason":%q`, a.guid, a.reason); !strings.Contains(l, want) {
				t.Errorf("the log does not say %s", want)
			}
		}
		for _, tok := range append([]string{sigToken[rootA], sigToken[rootB]}, "acct-state-") {
			if strings.Contains(l, tok) {
				t.Errorf("the log holds a token (%.8s…)", tok)
			}
		}
	}
}
