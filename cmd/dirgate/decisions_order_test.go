package main

import (
	"context"
	"net/url"
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
