package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	bundled "github.com/dirgate/dirgate/rego"
	"github.com/dirgate/dirgate/upstream/memory"
)

// policyViewingGroups writes the bundled policy plus a role letting trustees view
// the groups under groupsOU, and returns its directory (for --policy-dir). A
// listing's group must be one its caller may view (docs/policy.md, "Objects named
// by a request"): tests whose callers hold no such role list through this one.
func policyViewingGroups(t *testing.T, groupsOU string, trustees ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "policy")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := bundled.WriteWithRoles(dir, map[string]any{"name": "test-view-groups", "trustees": trustees,
		"permissions": []string{"view"}, "scopes": []any{map[string]string{"subtree": groupsOU}},
		"objectTypes": []string{"group"}}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// setEntryAttr replaces the value of attr in the LDIF entry of dn.
func setEntryAttr(t *testing.T, ldif, dn, attr, value string) string {
	t.Helper()
	start := strings.Index(ldif, "\ndn: "+dn+"\n")
	if start < 0 {
		t.Fatalf("no entry %s", dn)
	}
	end := strings.Index(ldif[start+1:], "\n\n")
	if end < 0 {
		end = len(ldif) - start - 1
	}
	entry := ldif[start : start+1+end]
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(attr) + `: .*$`)
	if !re.MatchString(entry) {
		t.Fatalf("%s has no %s", dn, attr)
	}
	return ldif[:start] + re.ReplaceAllLiteralString(entry, attr+": "+value) + ldif[start+1+end:]
}

// unauthenticated checks an answer is the product's 401 for an unknown token.
func unauthenticated(t *testing.T, what string, r response) {
	t.Helper()
	var body map[string]any
	json.Unmarshal(r.body, &body)
	if r.status != 401 || body["code"] != "unauthenticated" || body["message"] != "The provided authentication token is either expired or invalid." {
		t.Errorf("%s: %d %s, want the unauthenticated 401", what, r.status, r.body)
	}
}

// TestAccountStateMemory: on the memory upstream, a tokens-file token whose account
// is disabled, locked out or expired answers 401 and logs the account and the
// reason, never the token; an account disabled in the file while the gateway runs
// loses its token within the change feed's bound, and one enabled again gets it back.
func TestAccountStateMemory(t *testing.T) {
	demo, err := os.ReadFile("../../upstream/memory/demo.ldif")
	if err != nil {
		t.Fatal(err)
	}
	const (
		aaron = "CN=Aaron Anderson,OU=IT,OU=Staff,DC=corp,DC=example,DC=com"
		bella = "CN=Bella Hughes,OU=Sales,OU=Staff,DC=corp,DC=example,DC=com"
		caleb = "CN=Caleb Owens,OU=Finance,OU=Staff,DC=corp,DC=example,DC=com"
		daisy = "CN=Daisy Vargas,OU=HR,OU=Staff,DC=corp,DC=example,DC=com"
	)
	text := setEntryAttr(t, string(demo), aaron, "userAccountControl", "514")
	text = setEntryAttr(t, text, bella, "msDS-User-Account-Control-Computed", "16")
	text = setEntryAttr(t, text, caleb, "accountExpires", "130000000000000000") // 2012-12-14
	d, err := memory.Load("test", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	guid := func(dn string) string {
		o, err := d.Lookup(context.Background(), dirgate.MustParseIdentifier(dn), nil)
		if err != nil {
			t.Fatal(err)
		}
		return o.GUID
	}

	dir := t.TempDir()
	ldif, tokens := filepath.Join(dir, "dir.ldif"), filepath.Join(dir, "tokens.yaml")
	os.WriteFile(ldif, []byte(text), 0o644)
	var tf strings.Builder
	for tok, dn := range map[string]string{"tok-disabled": aaron, "tok-locked": bella, "tok-expired": caleb, "tok-daisy": daisy,
		"tok-group": helpDesk} {
		fmt.Fprintf(&tf, "- token: %s\n  subject: %s\n", tok, dn)
	}
	os.WriteFile(tokens, []byte(tf.String()), 0o600)
	// The accounts may view the group they list: in order, they answer 200.
	policy := policyViewingGroups(t, "OU=Groups,DC=corp,DC=example,DC=com", aaron, bella, caleb, daisy)
	log := &syncBuffer{}
	cfg, err := LoadConfig([]string{"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--log-level", "warn", "--memory-ldif", ldif, "--tokens-file", tokens,
		"--policy-dir", policy, "--decision-log", "off", "--principal-ttl", "1h", "--log-flush", "0"}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	m := NewMain(cfg, io.Discard, log)
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	u := "http://" + m.Addr() + "/restApi/api/directoryObjects/groupMembers?group=" + url.QueryEscape(helpDesk)

	for tok, want := range map[string]struct{ dn, reason string }{
		"tok-disabled": {aaron, dirgate.AccountRefusedDisabled},
		"tok-locked":   {bella, dirgate.AccountRefusedLocked},
		"tok-expired":  {caleb, dirgate.AccountRefusedExpired},
	} {
		unauthenticated(t, tok, call(t, "GET", u, tok))
		line := fmt.Sprintf(`"account":%q,"reason":%q`, guid(want.dn), want.reason)
		if !strings.Contains(log.String(), line) {
			t.Errorf("%s: the log does not say %q:\n%s", tok, line, log.String())
		}
	}
	if strings.Contains(log.String(), "tok-") {
		t.Errorf("the log holds a token:\n%s", log.String())
	}
	// A subject that is not an account (the tokens file allows any object) has no
	// state to refuse.
	if r := call(t, "GET", u, "tok-group"); r.status != 200 {
		t.Errorf("group subject: %d %s", r.status, r.body)
	}
	if r := call(t, "GET", u, "tok-daisy"); r.status != 200 {
		t.Fatalf("an account in order: %d %s", r.status, r.body)
	}

	// The file changes: Daisy disabled, Aaron enabled again. The principal TTL is an
	// hour: only the change feed can bring this within its bound.
	text = setEntryAttr(t, text, daisy, "userAccountControl", "514")
	text = setEntryAttr(t, text, aaron, "userAccountControl", "512")
	tmp := ldif + ".new"
	os.WriteFile(tmp, []byte(text), 0o644)
	if err := os.Rename(tmp, ldif); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(feedBound)
	for {
		daisyNow, aaronNow := call(t, "GET", u, "tok-daisy"), call(t, "GET", u, "tok-disabled")
		if daisyNow.status == 401 && aaronNow.status == 200 {
			unauthenticated(t, "disabled while running", daisyNow)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: Daisy disabled answers %d, Aaron enabled %d", feedBound, daisyNow.status, aaronNow.status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
