package hostile

import (
	"context"
	"strings"
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/test/harness/child"
	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/upstream/memory"
)

// TestProbingHiddenObjects: a caller with some rights (the demo's help desk) probes
// for objects its policy does not let it view, naming each in every spelling the API
// accepts (DN in other cases and with spaces, GUID upper case and in braces, SID),
// as the group of a listing, removal and addition and as the member of a change it
// may not make. Every answer must be exactly the unknown object's: status, body and
// the headers that describe it, as for look-alikes that name nothing
// (docs/api.md, "Objects the caller may not view").
func TestProbingHiddenObjects(t *testing.T) {
	e := demoTarget(t)
	demo, err := memory.Demo()
	if err != nil {
		t.Fatal(err)
	}
	// spellings returns the ways a client can name the object dn.
	spellings := func(dn string) []string {
		o, err := demo.Lookup(context.Background(), dirgate.MustParseIdentifier(dn), nil)
		if err != nil {
			t.Fatal(err)
		}
		s := []string{dn, strings.ToUpper(dn), strings.ToLower(dn), strings.ReplaceAll(dn, ",", ", "),
			o.GUID, strings.ToUpper(o.GUID), "{" + o.GUID + "}"}
		if o.SID != "" {
			s = append(s, o.SID)
		}
		return s
	}
	const (
		contact  = "CN=Acme Support," + fixture.ContactsOU
		lookDN   = "CN=Acme Supp0rt," + fixture.ContactsOU
		lookGUID = "3fe7ef05-067c-46bf-b07a-3d540e3a9357"
		lookSID  = "S-1-5-21-2113472910-3286130475-1853229740-99999"
	)
	hiddenGroups := append(append(spellings(fixture.DomainUsersDN), spellings(contact)...), spellings(fixture.AuthenticatedUsersDN)...)
	hiddenMembers := append(spellings(contact), spellings(fixture.AuthenticatedUsersDN)...)
	unknowns := []string{lookDN, strings.ToUpper(lookDN), lookGUID, "{" + strings.ToUpper(lookGUID) + "}", lookSID}

	type answer struct {
		status            int
		body, ctype, clen string
	}
	ask := func(method, group, member string) answer {
		t.Helper()
		var r child.Result
		switch method {
		case "GET":
			r = client.Do(context.Background(), "GET", child.ListURL(e.p.Base, group, ""), "demo-helpdesk")
		case "DELETE":
			r = client.Do(context.Background(), "DELETE", child.RemoveURL(e.p.Base, group, member), "demo-helpdesk")
		case "POST":
			r = client.Add(context.Background(), e.p.Base, group, member, "demo-helpdesk")
		}
		if r.Err != nil {
			t.Fatalf("%s %s %s: %v", method, group, member, r.Err)
		}
		return answer{r.Status, string(r.Body), r.Header.Get("Content-Type"), r.Header.Get("Content-Length")}
	}
	check := func(what string, want answer, names []string, do func(id string) answer) {
		t.Helper()
		for _, id := range names {
			if got := do(id); got != want {
				t.Errorf("%s %q: %+v\nwant the unknown object's %+v", what, id, got, want)
			}
		}
	}

	// The group of a listing, a removal and an addition.
	for _, method := range []string{"GET", "DELETE", "POST"} {
		do := func(id string) answer { return ask(method, id, fixture.DemoHelpdeskDN) }
		want := do(unknowns[0])
		if want.status != 404 || want.body != `{"message":"The group was not found.","code":"notFound"}` {
			t.Fatalf("%s of an unknown group: %+v", method, want)
		}
		check(method+" group", want, append(unknowns[1:], hiddenGroups...), do)
	}
	// The member of a removal from, and of an addition to, a group the help desk
	// views but may not change that way.
	for _, method := range []string{"DELETE", "POST"} {
		do := func(id string) answer { return ask(method, fixture.MixedDN, id) }
		want := do(unknowns[0])
		if want.status != 404 || !strings.Contains(want.body, `was not found.","code":"notFound"}`) {
			t.Fatalf("%s of an unknown member: %+v", method, want)
		}
		check(method+" member", want, append(unknowns[1:], hiddenMembers...), do)
	}
	// The same objects are there: the administrator is answered about them.
	if r := client.Do(context.Background(), "GET", child.ListURL(e.p.Base, contact, ""), "demo-admin"); r.Status != 400 {
		t.Errorf("the administrator naming the contact as the group: %s, want 400", r)
	}
	if r := client.Do(context.Background(), "GET", child.ListURL(e.p.Base, fixture.DomainUsersDN, ""), "demo-admin"); r.Status != 200 {
		t.Errorf("the administrator listing Domain Users: %s, want 200", r)
	}
}
