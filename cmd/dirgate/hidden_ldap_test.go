package main

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	bundled "github.com/dirgate/dirgate/rego"
	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/test/harness/sambatest"
)

// TestHiddenObjectsAnswerAlikeLDAP is TestHiddenObjectsAnswerAlike on the Samba AD DC
// (bundled policy, plus a role letting the help desk view the groups of OU=Groups,
// as the demo's it-department-groups does by a SID Samba does not have): a caller
// that may not view an object gets the unknown object's answer, byte for byte,
// whether it exists, is a user, is a group outside its view or is a member it may
// not remove; a caller that may view it gets the 400 and 403 that say more.
func TestHiddenObjectsAnswerAlikeLDAP(t *testing.T) {
	dc := sambatest.Env(t)
	dir := t.TempDir()
	policyDir := filepath.Join(dir, "policy")
	if err := os.Mkdir(policyDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := bundled.WriteWithRoles(policyDir, map[string]any{"name": "e2e-helpdesk-groups",
		"trustees": []string{fixture.HelpDeskDN}, "permissions": []string{"view"},
		"scopes": []any{map[string]string{"subtree": fixture.GroupsOU}}, "objectTypes": []string{"group"}}); err != nil {
		t.Fatal(err)
	}
	// A fresh account in no group but Domain Users: no role at all.
	nobody, _ := dc.TempUser(t, fmt.Sprintf("dg-hidden-%d", os.Getpid()%100000), "Hidden-Pw-1x!", nil)
	tokens := filepath.Join(dir, "tokens.yaml")
	if err := os.WriteFile(tokens, []byte("- token: e2e-admin\n  subject: "+fixture.DemoAdminDN+
		"\n- token: e2e-helpdesk\n  subject: "+fixture.DemoHelpdeskDN+"\n- token: e2e-nobody\n  subject: "+nobody+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := startLDAP(t, dc, "--tokens-file", tokens, "--policy-dir", policyDir)
	group := dc.TempGroup(t, "dirgate hidden", fixture.RegularDN)
	unknown := fmt.Sprintf("CN=dirgate unknown %d,OU=Groups,%s", os.Getpid(), dc.BaseDN)
	q := func(g string) string { return "?group=" + url.QueryEscape(g) }
	rm := func(g, m string) string { return q(g) + "&member=" + url.QueryEscape(m) }

	// The objects exist: the administrator is told so.
	for _, tc := range []struct {
		hiddenCase
		status int
	}{
		{hiddenCase{"admin lists the group", "GET", q(group), "", "e2e-admin"}, 200},
		{hiddenCase{"admin names a user as the group", "GET", q(fixture.RegularDN), "", "e2e-admin"}, 400},
		{hiddenCase{"admin removes a foreign security principal that is not a member", "DELETE", rm(group, fixture.AuthenticatedUsersDN), "", "e2e-admin"}, 200},
	} {
		if got := tc.do(t, base); got.status != tc.status {
			t.Fatalf("%s: %d %s, want %d", tc.name, got.status, got.body, tc.status)
		}
	}

	sameAnswers(t, base, []hiddenCase{
		{"unknown group", "GET", q(unknown), "", "e2e-nobody"},
		{"a user as the group", "GET", q(fixture.RegularDN), "", "e2e-nobody"},
		{"a group outside its view", "GET", q(group), "", "e2e-nobody"},
		{"a forbidden removal", "DELETE", rm(group, fixture.RegularDN), "", "e2e-nobody"},
		{"a forbidden addition", "POST", "", addBody(group, fixture.DemoAdminDN), "e2e-nobody"},
	})
	sameAnswers(t, base, []hiddenCase{
		{"removal of an unknown member", "DELETE", rm(group, unknown), "", "e2e-helpdesk"},
		{"forbidden removal of a member it may not view", "DELETE", rm(group, fixture.AuthenticatedUsersDN), "", "e2e-helpdesk"},
	})
	for _, tc := range []struct {
		hiddenCase
		status int
		body   string
	}{
		{hiddenCase{"help desk names a user it views as the group", "GET", q(fixture.RegularDN), "", "e2e-helpdesk"}, 400,
			`{"message":"The group parameter names a user, not a group.","code":"invalid","modelState":{"group":["The group parameter names a user, not a group."]}}`},
		{hiddenCase{"help desk removes a user it views", "DELETE", rm(group, fixture.RegularDN), "", "e2e-helpdesk"}, 403,
			`{"message":"You are not allowed to remove this member from this group.","code":"forbidden"}`},
	} {
		if got := tc.do(t, base); got.status != tc.status || got.body != tc.body {
			t.Errorf("%s: %d %s, want %d %s", tc.name, got.status, got.body, tc.status, tc.body)
		}
	}
}
