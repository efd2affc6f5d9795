package hostile

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dirgate/dirgate/test/child"
	"github.com/dirgate/dirgate/test/fixture"
)

// decisionsCases attack the decisions API's subject parameter (the explored
// principal is looked up in the directory) the way getCases attack group.
func decisionsCases() []hostileCase {
	q := func(subject string) func(*target) string {
		return func(*target) string { return "group=" + enc(fixture.MixedDN) + "&subject=" + enc(subject) }
	}
	return []hostileCase{
		{name: "subject star", query: q("*"), want: bad, param: "subject", noLDAP: true},
		{name: "subject parens", query: q(")("), want: bad, param: "subject", noLDAP: true},
		{name: "subject or-filter", query: q("(|(objectClass=*))"), want: bad, param: "subject", noLDAP: true},
		{name: "subject filter break-out", query: q("*)(member=*"), want: bad, param: "subject", noLDAP: true},
		{name: "subject NUL byte", query: func(*target) string { return "group=x&subject=%00" }, want: bad, param: "subject", noLDAP: true},
		{name: "subject escaped NUL in DN", query: q(`CN=Dana Admin\00,` + fixture.ITOU), want: bad, param: "subject", noLDAP: true},
		{name: "subject SID wildcard", query: q("S-1-5-21-*"), want: bad, param: "subject", noLDAP: true},
		{name: "subject too long", query: q(strings.Repeat("a", 5000)), want: bad, param: "subject", noLDAP: true},
		{name: "subject repeated", query: func(*target) string { return "group=x&subject=a&SUBJECT=b" }, want: bad, param: "subject", noLDAP: true},
		{name: "subject DN wildcard", query: q("CN=*," + fixture.ITOU), want: gone},
		{name: "subject DN prefix wildcard", query: q("CN=Dana*," + fixture.ITOU), want: gone},
		{name: "subject escaped star", query: q(`CN=Dana Admin\2a,` + fixture.ITOU), want: gone},
		{name: "group star", query: func(*target) string { return "subject=" + enc(fixture.DemoAdminDN) + "&group=*" }, want: bad, param: "group", noLDAP: true},
		// The real principal: every member of the group is decided.
		{name: "subject real", query: q(fixture.DemoHelpdeskDN), want: []int{200}, ok: func(t *testing.T, e *target, r child.Result) {
			var ex struct {
				Subject struct{ DN string } `json:"subject"`
				Objects []struct {
					DN string `json:"dn"`
				} `json:"objects"`
			}
			if err := json.Unmarshal(r.Body, &ex); err != nil || !strings.EqualFold(ex.Subject.DN, fixture.DemoHelpdeskDN) || len(ex.Objects) == 0 {
				t.Errorf("decisions: %v %.300s", err, r.Body)
			}
		}},
	}
}

// TestHostileDecisions sends the decisions API's hostile cases to the demo and to
// the DC, judged like the listing's.
func TestHostileDecisions(t *testing.T) {
	targets(t, func(t *testing.T, e *target) {
		base := strings.Replace(e.p.Base, "/api/directoryObjects/groupMembers", "/api/policy/decisions", 1)
		for _, tc := range decisionsCases() {
			t.Run(tc.name, func(t *testing.T) {
				sent := e.sentUp()
				r := tokenDo(e, "GET", base+"?"+tc.query(e))
				judge(t, e, r, sent, tc.want, tc.param, tc.noLDAP, tc.ok)
			})
		}
	})
}

// TestSlowDecisionsBody: a POST to the decisions API that sends its headers and
// then stalls its body is answered within the 10 s body deadline (docs/api.md,
// docs/policy.md), not held until the server's one-minute backstop.
func TestSlowDecisionsBody(t *testing.T) {
	e := demoTarget(t)
	u, _ := url.Parse(strings.Replace(e.p.Base, "/api/directoryObjects/groupMembers", "/api/policy/decisions", 1) +
		"?group=" + enc(fixture.MixedDN) + "&subject=" + enc(fixture.DemoHelpdeskDN))
	start := time.Now()
	r := rawSend(t, e.p.Addr, "POST "+u.RequestURI()+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAdm-Authorization: "+e.token+
		"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"module\": \"package dirgate.authz")
	took := time.Since(start)
	if r.Err != nil {
		t.Fatalf("no answer to a stalled draft after %v: %v", took, r.Err)
	}
	if r.Status != 400 || took > 20*time.Second {
		t.Errorf("stalled draft: %d after %v, want 400 after about 10 s: %.200s", r.Status, took, r.Body)
	}
	if _, err := child.CheckError(r); err != nil {
		t.Error(err)
	}
	t.Logf("a stalled draft was answered %d after %v", r.Status, took.Round(time.Millisecond))
}
