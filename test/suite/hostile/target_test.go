// Package hostile sends dirgate the requests an attacker would: LDAP filter and DN
// injection in every parameter, oversized, repeated and badly encoded parameters,
// header tricks, token guessing, probing for objects the caller may not view, and
// checks that no secret ever reaches a log line or a span. It runs the real binary
// (test/harness/child) against the embedded demo directory, and against the harness
// Samba DC through a fault proxy that counts every byte sent to the directory.
package hostile

import (
	"context"
	"encoding/json"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/ldapentry"
	"github.com/dirgate/dirgate/test/harness/child"
	"github.com/dirgate/dirgate/test/harness/faultproxy"
	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/test/harness/sambatest"
	"github.com/dirgate/dirgate/upstream/memory"
	goldap "github.com/go-ldap/ldap/v3"
)

func TestMain(m *testing.M) { os.Exit(child.Main(m)) }

// target is a running dirgate and what hostile requests need to know about it.
type target struct {
	p     *child.Program
	token string
	// px counts the bytes sent to the DC; nil for the demo, which has no network
	// upstream.
	px *faultproxy.Proxy
	// group is the group removals aim at, member one of its members: a group of the
	// test's own on the DC, so that nothing another test reads can change.
	group, member string
	// Identifiers of real objects, to build <GUID=…> and <SID=…> forms from.
	helpDeskGUID, helpDeskSID, memberGUID string
	// members returns the group's members as the directory holds them.
	members func() []string
}

// demoTarget runs dirgate on the embedded demo directory with its demo tokens.
func demoTarget(t *testing.T, args ...string) *target {
	t.Helper()
	p := child.Start(t, nil, args...)
	demo, err := memory.Demo()
	if err != nil {
		t.Fatal(err)
	}
	id := func(dn string) dirgate.Object {
		o, err := demo.Lookup(context.Background(), dirgate.MustParseIdentifier(dn), nil)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	hd, hugo := id(fixture.HelpDeskDN), id(fixture.DemoHelpdeskDN)
	e := &target{p: p, token: "demo-admin", group: fixture.HelpDeskDN, member: fixture.DemoHelpdeskDN,
		helpDeskGUID: hd.GUID, helpDeskSID: hd.SID, memberGUID: hugo.GUID}
	e.members = func() []string { return listedKeys(t, e, e.group) }
	return e
}

// dcTarget runs dirgate on the harness DC through a fault proxy in pass mode, with a
// removal group of the test's own, and the caller's principal already resolved (it is
// kept for ten minutes), so that a request that must not reach the directory sends
// it no byte at all.
func dcTarget(t *testing.T, args ...string) *target {
	t.Helper()
	dc := sambatest.Env(t)
	child.RequireFixture(t, dc)
	px, ldapURL := child.ProxyDC(t, dc)
	tok := child.NewToken(t, "hostile-")
	group := child.TempGroup(t, dc, "dirgate hostile", fixture.RegularDN, fixture.NeverExpiresDN)
	all := append(child.LDAPArgs(t, dc, ldapURL, child.WriteTokens(t, map[string]string{tok: fixture.DemoAdminDN})),
		"--principal-ttl", "10m", "--auth-max-failures", "10000")
	p := child.Start(t, nil, append(all, args...)...)
	admin := dc.DialAdmin(t)
	read := func(dn string) *goldap.Entry {
		res, err := admin.Search(goldap.NewSearchRequest(dn, goldap.ScopeBaseObject, goldap.NeverDerefAliases, 0, 0, false,
			"(objectClass=*)", []string{"objectGUID", "objectSid"}, nil))
		if err != nil || len(res.Entries) != 1 {
			t.Fatalf("read %s: %v", dn, err)
		}
		return res.Entries[0]
	}
	sid, err := ldapentry.SIDFromBytes(read(fixture.HelpDeskDN).GetRawAttributeValue("objectSid"))
	if err != nil {
		t.Fatal(err)
	}
	e := &target{p: p, token: tok, px: px, group: group, member: fixture.RegularDN,
		helpDeskGUID: ldapentry.GUIDFromBytes(read(fixture.HelpDeskDN).GetRawAttributeValue("objectGUID")), helpDeskSID: sid,
		memberGUID: ldapentry.GUIDFromBytes(read(fixture.RegularDN).GetRawAttributeValue("objectGUID"))}
	e.members = func() []string { return child.Members(t, dc, group) }
	// Resolve the principal now, so that it is not read during the cases.
	if r := e.get(t, child.ListURL(p.Base, fixture.HelpDeskDN, "")); r.Status != 200 {
		t.Fatalf("warm-up listing: %s", r)
	}
	return e
}

var client = child.NewClient()

func (e *target) get(t *testing.T, u string) child.Result {
	t.Helper()
	return client.Do(context.Background(), "GET", u, e.token)
}

// listedKeys lists group through the API and returns its members' DN keys, sorted.
func listedKeys(t *testing.T, e *target, group string) []string {
	t.Helper()
	r := e.get(t, child.ListURL(e.p.Base, group, ""))
	if r.Status != 200 {
		t.Fatalf("list %s: %s", group, r)
	}
	return dnKeys(t, r.Body)
}

// dnKeys returns the sorted DN keys of a listing body.
func dnKeys(t *testing.T, body []byte) []string {
	t.Helper()
	var objs []dirgate.Object
	if err := json.Unmarshal(body, &objs); err != nil {
		t.Fatalf("not a listing: %v: %.200s", err, body)
	}
	out := make([]string, len(objs))
	for i, o := range objs {
		d, err := dirgate.ParseDN(o.DN)
		if err != nil {
			t.Fatalf("listed DN %q: %v", o.DN, err)
		}
		out[i] = d.Key()
	}
	sort.Strings(out)
	return out
}

// targets runs f against the demo and against the DC (which skips without one on a
// developer machine and fails under CI).
func targets(t *testing.T, f func(t *testing.T, e *target), args ...string) {
	t.Run("demo", func(t *testing.T) { f(t, demoTarget(t, args...)) })
	t.Run("dc", func(t *testing.T) { f(t, dcTarget(t, args...)) })
}

func sameKeys(a, b []string) bool { return strings.Join(a, "\n") == strings.Join(b, "\n") }
