package hostile

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/dirgate/dirgate/proxy"
	"github.com/dirgate/dirgate/test/harness/fixture"
)

// addCase is one attacker's POST: its body, how it is sent, and the answer allowed.
type addCase struct {
	name        string
	contentType string // application/json when empty; "-" sends none
	body        func(e *target) string
	chunked     bool // sent without a length
	want        []int
	// param is the modelState name of a 400 ("" for none); body errors name "body".
	param  string
	noLDAP bool
}

// jsonAdd is the body {"group": group, "newMember": member}, encoded by
// encoding/json so that every byte of the values arrives as given.
func jsonAdd(group, member func(e *target) string) func(*target) string {
	return func(e *target) string {
		b, _ := json.Marshal(map[string]string{"group": group(e), "newMember": member(e)})
		return string(b)
	}
}

func addCases() []addCase {
	grp := func(e *target) string { return e.group }
	mbr := func(e *target) string { return fixture.DemoHelpdeskDN } // not in the removal group
	lit := func(s string) func(*target) string { return func(*target) string { return s } }
	raw := func(s string) func(*target) string { return func(*target) string { return s } }
	pad := func(n int) func(*target) string {
		return func(e *target) string {
			head := jsonAdd(grp, mbr)(e)
			return head[:len(head)-1] + `,"pad":"` + strings.Repeat("x", n-len(head)-9) + `"}`
		}
	}
	cases := []addCase{
		// Size: refused before it is read (a declared length) or while it is read.
		{name: "body over the bound", body: pad(proxy.MaxBodyLength + 1), want: []int{413}, noLDAP: true},
		{name: "body over the bound, chunked", body: pad(proxy.MaxBodyLength + 1), chunked: true, want: []int{413}, noLDAP: true},
		// Within what net/http drains after a refusal (256 KiB), so that the answer is
		// read rather than cut off by a reset.
		{name: "body of 200 KiB, chunked", body: pad(200 << 10), chunked: true, want: []int{413}, noLDAP: true},
		// Type: JSON only.
		{name: "form body", contentType: "application/x-www-form-urlencoded", body: lit("group=x&newMember=y"), want: []int{415}, noLDAP: true},
		{name: "text/plain JSON", contentType: "text/plain", body: jsonAdd(grp, mbr), want: []int{415}, noLDAP: true},
		{name: "no content type", contentType: "-", body: jsonAdd(grp, mbr), want: []int{415}, noLDAP: true},
		{name: "JSON in latin1", contentType: "application/json; charset=latin1", body: jsonAdd(grp, mbr), want: []int{415}, noLDAP: true},
		// Shape.
		{name: "malformed JSON", body: raw(`{"group":`), want: bad, param: "body", noLDAP: true},
		{name: "array", body: raw(`[]`), want: bad, param: "body", noLDAP: true},
		{name: "raw NUL in a string", body: raw("{\"group\":\"CN=a\x00b\",\"newMember\":\"CN=c\"}"), want: bad, param: "body", noLDAP: true},
		{name: "invalid UTF-8", body: raw("{\"group\":\"CN=\xff\",\"newMember\":\"CN=c\"}"), want: bad, param: "body", noLDAP: true},
		{name: "two group fields", body: func(e *target) string {
			return `{"group":` + q(e.group) + `,"Group":"*","newMember":` + q(fixture.DemoHelpdeskDN) + `}`
		}, want: bad, param: "group", noLDAP: true},
		{name: "newMember missing", body: func(e *target) string { return `{"group":` + q(e.group) + `}` }, want: bad, param: "newMember", noLDAP: true},
		{name: "newMember a number", body: func(e *target) string { return `{"group":` + q(e.group) + `,"newMember":1}` }, want: bad, param: "newMember", noLDAP: true},
		{name: "lone surrogate", body: func(e *target) string { return `{"group":` + q(e.group) + `,"newMember":"CN=\ud800,DC=x"}` },
			want: bad, param: "newMember", noLDAP: true},
		{name: "NUL escape", body: func(e *target) string { return `{"group":` + q(e.group) + `,"newMember":"CN=a\u0000,DC=x"}` },
			want: bad, param: "newMember", noLDAP: true},
		// Valid DNs that name nothing reach the directory and find nothing.
		{name: "newMember DN wildcard", body: jsonAdd(grp, lit("CN=*,"+fixture.ITOU)), want: gone},
		{name: "newMember DN with filter in value", body: jsonAdd(grp, lit("CN=Rita Regular)(cn=*,"+fixture.ITOU)), want: badOrGone},
		// Outside the base DN: never asked.
		{name: "group with evil suffix", body: jsonAdd(func(e *target) string { return e.group + ",DC=evil" }, mbr), want: gone, noLDAP: true},
	}
	// Injection in either field: refused as the query's parameters are.
	for _, field := range []string{"group", "newMember"} {
		for _, v := range []struct{ name, value string }{
			{"star", "*"}, {"parens", ")("}, {"filter break-out", "*)(member=*"}, {"or-filter", "(|(objectClass=*))"},
			{"escaped NUL text", `\00`}, {"CRLF", fixture.ITOU + "\r\nX: 1"}, {"over 2048 bytes", "CN=" + strings.Repeat("x", 2046)},
		} {
			value := lit(v.value)
			body := jsonAdd(grp, value)
			if field == "group" {
				body = jsonAdd(value, mbr)
			}
			cases = append(cases, addCase{name: field + " " + v.name, body: body, want: bad, param: field, noLDAP: true})
		}
	}
	return append(cases,
		addCase{name: "newMember <GUID=…>", body: jsonAdd(grp, func(e *target) string { return "<GUID=" + e.memberGUID + ">" }), want: bad, param: "newMember", noLDAP: true},
		addCase{name: "newMember DN with escaped NUL", body: jsonAdd(grp, func(e *target) string { return nulAlias(fixture.DemoHelpdeskDN) }), want: bad, param: "newMember", noLDAP: true},
		addCase{name: "group DN with escaped NUL", body: jsonAdd(func(e *target) string { return nulAlias(e.group) }, mbr), want: bad, param: "group", noLDAP: true},
	)
}

func q(s string) string { b, _ := json.Marshal(s); return string(b) }

// TestHostileAdditions sends every case to the demo and to the DC: an allowed status
// in the error shape, the right modelState, no byte to the directory for what must
// be refused before it, and the group's members unchanged afterwards.
func TestHostileAdditions(t *testing.T) {
	targets(t, func(t *testing.T, e *target) {
		before := e.members()
		for _, tc := range addCases() {
			t.Run(tc.name, func(t *testing.T) { runAddCase(t, e, tc) })
		}
		if after := e.members(); !sameKeys(after, before) {
			t.Errorf("hostile additions changed the group: %v, before %v", after, before)
		}
	})
}

func runAddCase(t *testing.T, e *target, tc addCase) {
	t.Helper()
	sent := e.sentUp()
	var body io.Reader = strings.NewReader(tc.body(e))
	if tc.chunked {
		body = io.MultiReader(body)
	}
	req, err := http.NewRequestWithContext(context.Background(), "POST", e.p.Base, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Adm-Authorization", e.token)
	switch tc.contentType {
	case "":
		req.Header.Set("Content-Type", "application/json")
	case "-":
	default:
		req.Header.Set("Content-Type", tc.contentType)
	}
	judge(t, e, client.Send(req), sent, tc.want, tc.param, tc.noLDAP, nil)
}
