package main

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/dirgate/dirgate"
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

// subjectReads counts the directory reads the decisions API makes about one
// subject: look-ups of its identifier and memberOf reads of the object it names.
type subjectReads struct {
	dirgate.Directory
	subject atomic.Pointer[string]
	n       atomic.Int64
}

func (d *subjectReads) is(s string) bool {
	p := d.subject.Load()
	return p != nil && strings.EqualFold(s, *p)
}

func (d *subjectReads) Lookup(ctx context.Context, id dirgate.Identifier, props []string) (dirgate.Object, error) {
	if d.is(id.String()) {
		d.n.Add(1)
	}
	return d.Directory.Lookup(ctx, id, props)
}

func (d *subjectReads) MemberOf(ctx context.Context, obj dirgate.Object) ([]dirgate.Object, error) {
	if d.is(obj.DN) {
		d.n.Add(1)
	}
	return d.Directory.MemberOf(ctx, obj)
}

// TestDecisionsRefuseWithoutReadingTheSubject: a caller the policy does not let
// explain is refused before the subject is looked up, so it can neither make the
// gateway read the directory (a fresh look-up, a memberOf read per group) nor time
// whether a subject exists; one who may explain still has it resolved.
func TestDecisionsRefuseWithoutReadingTheSubject(t *testing.T) {
	const mixed = "CN=Mixed Members,OU=Groups,DC=corp,DC=example,DC=com"
	const dana = "CN=Dana Admin,OU=IT,OU=Staff,DC=corp,DC=example,DC=com"
	const nobody = "CN=Nobody Here,OU=IT,OU=Staff,DC=corp,DC=example,DC=com"
	const noGUID = "{0badc0de-0000-4000-8000-000000000001}"
	reads := &subjectReads{}
	m, _ := startDemo(t, func(d dirgate.Directory) dirgate.Directory { reads.Directory = d; return reads })
	api := "http://" + m.Addr() + "/restApi/api/policy/decisions?"
	ask := func(tok, subject string) (int, string, int64) {
		reads.subject.Store(&subject)
		reads.n.Store(0)
		r := call(t, "GET", api+url.Values{"subject": {subject}, "group": {mixed}}.Encode(), tok)
		return r.status, string(r.body), reads.n.Load()
	}
	var first string
	for _, s := range []string{dana, nobody, noGUID} {
		st, body, n := ask("demo-helpdesk", s)
		if st != 403 || n != 0 {
			t.Errorf("help desk on %s: %d %s after %d reads of the subject, want 403 after none", s, st, body, n)
		}
		if first == "" {
			first = body
		} else if body != first {
			t.Errorf("help desk on %s: %s, want the same answer as for %s: %s", s, body, dana, first)
		}
	}
	if st, body, n := ask(adminTok, nobody); st != 404 || n == 0 {
		t.Errorf("admin on an unknown subject: %d %s after %d reads, want 404 after a look-up", st, body, n)
	}
	if st, body, n := ask("demo-helpdesk", dana); st != 403 || n != 0 {
		t.Errorf("help desk after the admin: %d %s after %d reads", st, body, n)
	}
	if st, body, n := ask(adminTok, hugo); st != 200 || n == 0 {
		t.Errorf("admin on a known subject: %d %s after %d reads", st, body, n)
	}
}

// TestDecisionsLogOneExplainLine: each request to the decisions API writes one
// explain line to the decision log, whichever step decided (docs/policy.md, "The
// decisions API"): a refusal on the subject as named, an allowed decision on the
// resolved subject, or the decision on an unknown subject as named.
func TestDecisionsLogOneExplainLine(t *testing.T) {
	dlog := filepath.Join(t.TempDir(), "decisions.log")
	root := startDemoWith(t, "--decision-log", dlog, "--log-flush", "0")
	api := root + "/restApi/api/policy/decisions?"
	const mixed = "CN=Mixed Members,OU=Groups,DC=corp,DC=example,DC=com"
	const dana = "CN=Dana Admin,OU=IT,OU=Staff,DC=corp,DC=example,DC=com"
	const nobody = "CN=Nobody Here,OU=IT,OU=Staff,DC=corp,DC=example,DC=com"
	seen := 0
	for _, tc := range []struct {
		tok, subject string
		status       int
		allowed      bool
		resolved     bool // the line's object carries the subject's GUID
	}{
		{"demo-helpdesk", dana, 403, false, false},
		{adminTok, dana, 200, true, true},
		{adminTok, nobody, 404, true, false},
	} {
		if r := call(t, "GET", api+url.Values{"subject": {tc.subject}, "group": {mixed}}.Encode(), tc.tok); r.status != tc.status {
			t.Fatalf("%s on %s: %d %s, want %d", tc.tok, tc.subject, r.status, r.body, tc.status)
		}
		var explain []map[string]any
		lines := decisionLines(t, dlog)
		for _, l := range lines[seen:] {
			if in, _ := l["input"].(map[string]any); in["action"] == "explain" {
				explain = append(explain, l)
			}
		}
		seen = len(lines)
		if len(explain) != 1 {
			t.Fatalf("%s on %s: %d explain lines, want 1: %v", tc.tok, tc.subject, len(explain), explain)
		}
		res, _ := explain[0]["result"].(map[string]any)
		obj, _ := explain[0]["input"].(map[string]any)["object"].(map[string]any)
		if res["allowed"] != tc.allowed || (obj["guid"] != "") != tc.resolved || !strings.EqualFold(fmt.Sprint(obj["dn"]), tc.subject) {
			t.Errorf("%s on %s: line %v, want allowed %v, resolved %v", tc.tok, tc.subject, explain[0], tc.allowed, tc.resolved)
		}
	}
}

// TestDecisionsBothStepsMustAllow: explain is decided on the subject as named, then
// on the resolved subject, and both must allow. A rule that denies by what only the
// resolved subject carries (its display name) still denies; a rule that allows only
// by it (the subject's groups) denies at the first step: fail closed.
func TestDecisionsBothStepsMustAllow(t *testing.T) {
	dir := t.TempDir()
	const module = `package dirgate.authz

allow if input.action == "view"

# The help desk explains anyone but Dana Admin.
allow if {
	input.action == "explain"
	input.subject.dn == "CN=Hugo Helpdesk,OU=IT,OU=Staff,DC=corp,DC=example,DC=com"
	input.object.displayName != "Dana Admin"
}

# Dana Admin explains those who belong to a group.
allow if {
	input.action == "explain"
	input.subject.dn == "CN=Dana Admin,OU=IT,OU=Staff,DC=corp,DC=example,DC=com"
	count(input.object.groups) > 0
}
`
	if err := os.WriteFile(filepath.Join(dir, "authz.rego"), []byte(module), 0o600); err != nil {
		t.Fatal(err)
	}
	root := startDemoWith(t, "--decision-log", "off", "--policy-dir", dir)
	api := root + "/restApi/api/policy/decisions?"
	const mixed = "CN=Mixed Members,OU=Groups,DC=corp,DC=example,DC=com"
	for _, tc := range []struct {
		tok, subject string
		want         int
	}{
		{"demo-helpdesk", "CN=Daisy Vargas,OU=HR,OU=Staff,DC=corp,DC=example,DC=com", 200},
		{"demo-helpdesk", "CN=Dana Admin,OU=IT,OU=Staff,DC=corp,DC=example,DC=com", 404},  // denied on the resolved subject: as if unknown
		{"demo-helpdesk", "CN=Nobody Here,OU=IT,OU=Staff,DC=corp,DC=example,DC=com", 404}, // allowed as named, unknown
		{adminTok, "CN=Daisy Vargas,OU=HR,OU=Staff,DC=corp,DC=example,DC=com", 403},       // groups are unknown as named
	} {
		if r := call(t, "GET", api+url.Values{"subject": {tc.subject}, "group": {mixed}}.Encode(), tc.tok); r.status != tc.want {
			t.Errorf("%s on %s: %d %s, want %d", tc.tok, tc.subject, r.status, r.body, tc.want)
		}
	}
	// A subject the caller may not explain once resolved answers byte for byte as
	// one that does not exist.
	hidden := call(t, "GET", api+url.Values{"subject": {"CN=Dana Admin,OU=IT,OU=Staff,DC=corp,DC=example,DC=com"}, "group": {mixed}}.Encode(), "demo-helpdesk")
	unknown := call(t, "GET", api+url.Values{"subject": {"CN=Nobody Here,OU=IT,OU=Staff,DC=corp,DC=example,DC=com"}, "group": {mixed}}.Encode(), "demo-helpdesk")
	if hidden.status != unknown.status || !bytes.Equal(hidden.body, unknown.body) {
		t.Errorf("a subject refused once resolved: %d %s; an unknown one: %d %s", hidden.status, hidden.body, unknown.status, unknown.body)
	}
}
