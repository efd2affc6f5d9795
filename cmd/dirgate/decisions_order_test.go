package main

import (
	"net/url"
	"testing"
)

// TestDecisionsAskBeforeRevealing: a caller the policy does not let explain gets
// the same 403 whether the subject or group exists or not (no existence oracle);
// one who may explain learns that it does not (404).
func TestDecisionsAskBeforeRevealing(t *testing.T) {
	root := startDemoWith(t, "--decision-log", "off")
	api := root + "/restApi/api/policy/decisions?"
	const mixed = "CN=Mixed Members,OU=Groups,DC=corp,DC=example,DC=com"
	const nobody = "CN=Nobody Here,OU=IT,OU=Staff,DC=corp,DC=example,DC=com"
	const noGroup = "CN=No Such Group,OU=Groups,DC=corp,DC=example,DC=com"
	const noGUID = "{0badc0de-0000-4000-8000-000000000001}"
	ask := func(tok, subject, group string) (int, string) {
		r := call(t, "GET", api+url.Values{"subject": {subject}, "group": {group}}.Encode(), tok)
		return r.status, string(r.body)
	}
	wantStatus, wantBody := ask("demo-helpdesk", hugo, mixed)
	if wantStatus != 403 {
		t.Fatalf("help desk on a known subject and group: %d %s, want 403", wantStatus, wantBody)
	}
	for _, q := range [][2]string{{nobody, mixed}, {noGUID, mixed}, {hugo, noGroup}, {nobody, noGroup}} {
		if st, body := ask("demo-helpdesk", q[0], q[1]); st != wantStatus || body != wantBody {
			t.Errorf("help desk on %v: %d %s, want the known subject's %d %s", q, st, body, wantStatus, wantBody)
		}
	}
	for _, q := range [][2]string{{nobody, mixed}, {noGUID, mixed}, {hugo, noGroup}} {
		if st, body := ask(adminTok, q[0], q[1]); st != 404 {
			t.Errorf("admin on %v: %d %s, want 404", q, st, body)
		}
	}
	if st, body := ask(adminTok, hugo, mixed); st != 200 {
		t.Errorf("admin on a known subject and group: %d %s", st, body)
	}
}
