package main

import (
	"net/url"
	"os"
	"path/filepath"
	"testing"
)

// hiddenCase is one request and the answer it must give.
type hiddenCase struct {
	name, method, query, body, token string
}

// answer is what a client can compare between two answers: the status, the body
// byte for byte, and the headers that describe it.
type answer struct {
	status            int
	body, ctype, clen string
}

func (tc hiddenCase) do(t *testing.T, base string) answer {
	t.Helper()
	var r response
	if tc.method == "POST" {
		r = post(t, base, tc.token, "application/json", tc.body)
	} else {
		r = call(t, tc.method, base+tc.query, tc.token)
	}
	return answer{r.status, string(r.body), r.header.Get("Content-Type"), r.header.Get("Content-Length")}
}

// sameAnswers checks that every case answers exactly as the first one does.
func sameAnswers(t *testing.T, base string, cases []hiddenCase) answer {
	t.Helper()
	want := cases[0].do(t, base)
	if want.status != 404 {
		t.Fatalf("%s: %d %s, want the unknown object's 404", cases[0].name, want.status, want.body)
	}
	for _, tc := range cases[1:] {
		if got := tc.do(t, base); got != want {
			t.Errorf("%s: %+v\nwant exactly the answer about an unknown object: %+v", tc.name, got, want)
		}
	}
	return want
}

// TestHiddenObjectsAnswerAlike: through the real program (memory demo, bundled
// policy, HTTP), a caller learns nothing about an object its policy does not let it
// view. For it, an unknown group, a user named as the group, a group outside its
// view and a forbidden change all answer the unknown group's (or member's) 404, status
// and body byte for byte; a caller that may view the object gets the 400s and 403s
// that say more (docs/api.md, "Objects the caller may not view").
func TestHiddenObjectsAnswerAlike(t *testing.T) {
	const (
		nobodyDN = "CN=Bella Hughes,OU=Sales,OU=Staff,DC=corp,DC=example,DC=com" // no role at all
		hugoDN   = "CN=Hugo Helpdesk,OU=IT,OU=Staff,DC=corp,DC=example,DC=com"
		danaDN   = "CN=Dana Admin,OU=IT,OU=Staff,DC=corp,DC=example,DC=com"
		unknown  = "CN=Nobody Here,OU=Groups,DC=corp,DC=example,DC=com"
		mixed    = "CN=Mixed Members,OU=Groups,DC=corp,DC=example,DC=com"
		finance  = "CN=Finance Team,OU=Groups,DC=corp,DC=example,DC=com"
		domUsers = "CN=Domain Users,CN=Users,DC=corp,DC=example,DC=com" // outside the help desk's view
		user     = "CN=Daisy Vargas,OU=HR,OU=Staff,DC=corp,DC=example,DC=com"
		contact  = "CN=Acme Support,OU=Contacts,DC=corp,DC=example,DC=com"
	)
	tokens := filepath.Join(t.TempDir(), "tokens.yaml")
	if err := os.WriteFile(tokens, []byte("- token: t-nobody\n  subject: "+nobodyDN+"\n- token: t-helpdesk\n  subject: "+hugoDN+
		"\n- token: t-admin\n  subject: "+danaDN+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := "http://" + startMain(t, nil, "--tokens-file", tokens).Addr() + "/restApi/api/directoryObjects/groupMembers"
	q := func(group string) string { return "?group=" + url.QueryEscape(group) }
	rm := func(group, member string) string { return q(group) + "&member=" + url.QueryEscape(member) }

	// A caller without any role: every group is unknown to it, whatever it names and
	// whatever it asks.
	t.Run("no role", func(t *testing.T) {
		sameAnswers(t, base, []hiddenCase{
			{"unknown group", "GET", q(unknown), "", "t-nobody"},
			{"a user as the group", "GET", q(user), "", "t-nobody"},
			{"a contact as the group", "GET", q(contact), "", "t-nobody"},
			{"a group", "GET", q(mixed), "", "t-nobody"},
			{"a group by GUID", "GET", q("0e99ba17-0652-48de-8e18-833b987c5f05"), "", "t-nobody"},
			{"a removal from a group", "DELETE", rm(mixed, user), "", "t-nobody"},
			{"a removal from an unknown group", "DELETE", rm(unknown, user), "", "t-nobody"},
			{"an addition to a group", "POST", "", addBody(mixed, user), "t-nobody"},
		})
	})

	// The help desk views users of OU=Staff and groups of OU=Groups, not contacts,
	// foreign security principals, or groups elsewhere.
	t.Run("help desk, groups", func(t *testing.T) {
		sameAnswers(t, base, []hiddenCase{
			{"unknown group", "GET", q(unknown), "", "t-helpdesk"},
			{"a contact as the group", "GET", q(contact), "", "t-helpdesk"},
			{"a foreign security principal as the group", "GET", q("S-1-5-11"), "", "t-helpdesk"},
			{"a group outside its view", "GET", q(domUsers), "", "t-helpdesk"},
			{"a removal from a group outside its view", "DELETE", rm(domUsers, user), "", "t-helpdesk"},
			{"an addition to a group outside its view", "POST", "", addBody(domUsers, user), "t-helpdesk"},
		})
	})
	t.Run("help desk, members", func(t *testing.T) {
		got := sameAnswers(t, base, []hiddenCase{
			{"removal of an unknown member", "DELETE", rm(mixed, unknown), "", "t-helpdesk"},
			{"forbidden removal of a contact", "DELETE", rm(mixed, contact), "", "t-helpdesk"},
			{"forbidden removal of a foreign security principal", "DELETE", rm(mixed, "S-1-5-11"), "", "t-helpdesk"},
		})
		if got.body != `{"message":"The member was not found.","code":"notFound"}` {
			t.Errorf("unknown member: %s", got.body)
		}
		sameAnswers(t, base, []hiddenCase{
			{"addition of an unknown member", "POST", "", addBody(finance, unknown), "t-helpdesk"},
			{"forbidden addition of a contact", "POST", "", addBody(finance, contact), "t-helpdesk"},
		})
	})

	// What the caller may view is answered as before.
	for _, tc := range []struct {
		hiddenCase
		status int
		body   string
	}{
		{hiddenCase{"help desk names a user it views as the group", "GET", q(user), "", "t-helpdesk"}, 400,
			`{"message":"The group parameter names a user, not a group.","code":"invalid","modelState":{"group":["The group parameter names a user, not a group."]}}`},
		{hiddenCase{"help desk removes a user it views", "DELETE", rm(mixed, user), "", "t-helpdesk"}, 403,
			`{"message":"You are not allowed to remove this member from this group.","code":"forbidden"}`},
		{hiddenCase{"help desk adds a user it views", "POST", "", addBody(finance, user), "t-helpdesk"}, 403,
			`{"message":"You are not allowed to add this member to this group.","code":"forbidden"}`},
		{hiddenCase{"admin names a contact as the group", "GET", q(contact), "", "t-admin"}, 400,
			`{"message":"The group parameter names a contact, not a group.","code":"invalid","modelState":{"group":["The group parameter names a contact, not a group."]}}`},
	} {
		if got := tc.do(t, base); got.status != tc.status || got.body != tc.body {
			t.Errorf("%s: %d %s, want %d %s", tc.name, got.status, got.body, tc.status, tc.body)
		}
	}
	// The admin lists the group the help desk may not.
	if got := (hiddenCase{"admin lists Domain Users", "GET", q(domUsers), "", "t-admin"}).do(t, base); got.status != 200 {
		t.Errorf("admin lists Domain Users: %d %s", got.status, got.body)
	}
}
