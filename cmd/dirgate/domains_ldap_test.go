package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/ldapentry"
	bundled "github.com/dirgate/dirgate/rego"
	"github.com/dirgate/dirgate/test/harness/redistest"
	"github.com/dirgate/dirgate/test/harness/sambatest"
	goldap "github.com/go-ldap/ldap/v3"
)

// openForest opens the directory dirgate serves for the harness's forest
// (test/harness/samba/forest.sh): CORP the home domain of the ldap-* settings,
// FABRIKAM the one further domain of ldap-domains-file, wired as the program wires
// them (openDirectory). extra are further settings; "--home-alone" leaves
// ldap-domains-file out, serving CORP alone.
func openForest(t testing.TB, f sambatest.Forest, extra ...string) dirgate.Directory {
	t.Helper()
	d, _ := openForestMain(t, f, extra...)
	return d
}

// openForestMain is openForest, also returning the program whose directory it is.
func openForestMain(t testing.TB, f sambatest.Forest, extra ...string) (dirgate.Directory, *Main) {
	t.Helper()
	cfg, err := LoadConfig(forestArgs(t, f, extra...), func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	m := NewMain(cfg, io.Discard, io.Discard)
	m.ready = &readiness{}
	d, err := m.openDirectory(context.Background())
	t.Cleanup(func() {
		for i := len(m.closers) - 1; i >= 0; i-- {
			m.closers[i]()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return d, m
}

// forestArgs are the settings of dirgate in front of the forest: CORP the home
// domain, FABRIKAM in ldap-domains-file, then extra ("--home-alone" leaves the file
// out).
func forestArgs(t testing.TB, f sambatest.Forest, extra ...string) []string {
	t.Helper()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	corpPW, fabPW := write("corp-password", f.Corp.Password), write("fabrikam-password", f.Fabrikam.Password)
	domainsFile := write("domains.yaml", "domains:\n  - base-dn: "+f.Fabrikam.BaseDN+"\n    url: "+f.Fabrikam.URL+
		"\n    bind-dn: "+f.Fabrikam.BindDN+"\n    password-file: "+fabPW+"\n    ca-file: "+f.Fabrikam.CAFile+"\n    pool-size: 3\n")
	args := []string{"--upstream", "ldap", "--tokens-file", write("tokens.yaml", "[]\n"),
		"--ldap-url", f.Corp.URL, "--ldap-bind-dn", f.Corp.BindDN, "--ldap-password-file", corpPW,
		"--ldap-base-dn", f.Corp.BaseDN, "--ldap-ca-file", f.Corp.CAFile}
	if !slices.Contains(extra, "--home-alone") {
		args = append(args, "--ldap-domains-file", domainsFile)
	}
	return append(args, slices.DeleteFunc(slices.Clone(extra), func(s string) bool { return s == "--home-alone" })...)
}

// held is an object as its own domain's DC holds it.
type held struct {
	guid, sam, domain string
}

// readHeld reads dn from the DC of the domain whose base DN holds it, as that
// domain's service account.
func readHeld(t testing.TB, f sambatest.Forest, dn string) held {
	t.Helper()
	d := f.Corp
	if strings.HasSuffix(strings.ToLower(dn), strings.ToLower(f.Fabrikam.BaseDN)) {
		d = f.Fabrikam
	}
	conn := d.DC().DialService(t)
	res, err := conn.Search(goldap.NewSearchRequest(dn, goldap.ScopeBaseObject, goldap.NeverDerefAliases, 0, 0, false,
		"(objectClass=*)", []string{"objectGUID", "sAMAccountName"}, nil))
	if err != nil {
		t.Fatalf("%s's DC: read %s: %v", d.NetBIOS, dn, err)
	}
	e := res.Entries[0]
	return held{guid: ldapentry.GUIDFromBytes(e.GetRawAttributeValue("objectGUID")), sam: e.GetAttributeValue("sAMAccountName"),
		domain: d.DNSName()}
}

// TestDomainsForestLDAP lists groups of both domains through the router against
// the harness's two DCs, and holds every object listed against what its own
// domain's DC holds: DN, GUID, domainName and sAMAccountName. CORP's Local group
// holds FABRIKAM's User through a foreign security principal; FABRIKAM's Local
// holds CORP's Global group so, and so CORP's users through it.
func TestDomainsForestLDAP(t *testing.T) {
	f := sambatest.ForestFromEnv(t)
	ctx := context.Background()
	c, fb := f.Corp, f.Fabrikam
	tests := []struct {
		name     string
		group    string
		indirect bool
		want     []string // DNs
	}{
		{"CORP's Local, direct", c.LocalDN, false, []string{c.UniversalDN, fb.UserDN}},
		{"CORP's Local, indirect", c.LocalDN, true, []string{c.UniversalDN, c.GlobalDN, c.UserDN, c.User2DN, fb.UserDN}},
		{"FABRIKAM's Local, direct", fb.LocalDN, false, []string{fb.UniversalDN, c.GlobalDN}},
		{"FABRIKAM's Local, indirect", fb.LocalDN, true, []string{fb.UniversalDN, fb.GlobalDN, fb.UserDN, fb.User2DN, c.GlobalDN, c.UserDN, c.User2DN}},
	}
	for _, mode := range []struct {
		name  string
		extra []string
	}{{"breadth first", nil}, {"in chain", []string{"--ldap-in-chain"}}} {
		t.Run(mode.name, func(t *testing.T) {
			dir := openForest(t, f, mode.extra...)
			svc := &dirgate.MemberService{Dir: dir}
			if t, ok := dir.(dirgate.TransitiveLister); ok && len(mode.extra) > 0 {
				svc.Transitive = t
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					objs, err := svc.List(ctx, dirgate.Principal{}, mustID(t, tt.group),
						dirgate.ListOptions{IncludeIndirect: tt.indirect, Properties: []string{"samaccountname"}})
					if err != nil {
						t.Fatal(err)
					}
					var got []string
					for _, o := range objs {
						got = append(got, o.DN)
						h := readHeld(t, f, o.DN)
						if o.GUID != h.guid || o.DomainName != h.domain || !slices.Equal(o.Properties["samaccountname"], []string{h.sam}) {
							t.Errorf("%s listed as GUID %s, domainName %s, sAMAccountName %q; its DC holds %s, %s, %q",
								o.DN, o.GUID, o.DomainName, o.Properties["samaccountname"], h.guid, h.domain, h.sam)
						}
						if o.ObjectType == dirgate.TypeForeignPrincipal {
							t.Errorf("%s: a foreign security principal listed although its domain is configured", o.DN)
						}
					}
					if g, w := keys(t, got), keys(t, tt.want); !slices.Equal(g, w) {
						t.Errorf("listed %q\nwant %q", g, w)
					}
				})
			}
		})
	}
}

// TestDomainsForestLDAPResolve: an object of FABRIKAM is found by DN, SID and
// GUID through the router, as FABRIKAM's DC holds it.
func TestDomainsForestLDAPResolve(t *testing.T) {
	f := sambatest.ForestFromEnv(t)
	dir, m := openForestMain(t, f)
	// FABRIKAM's DCs are reported on /readyz beside CORP's.
	for _, check := range []string{"upstream", "upstream fabrikam.example.net"} {
		if c := m.ready.checks[check]; c == nil || c(context.Background()) != nil {
			t.Errorf("readiness check %q: missing or failing", check)
		}
	}
	h := readHeld(t, f, f.Fabrikam.UserDN)
	byDN, err := dir.Lookup(context.Background(), mustID(t, f.Fabrikam.UserDN), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{f.Fabrikam.UserDN, byDN.SID, h.guid} {
		o, err := dir.Lookup(context.Background(), mustID(t, id), nil)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if o.GUID != h.guid || o.DomainName != "fabrikam.example.net" || !strings.HasPrefix(o.SID, f.Fabrikam.SID+"-") {
			t.Errorf("%s: %s %s %s %s", id, o.DN, o.GUID, o.DomainName, o.SID)
		}
	}
}

func mustID(t testing.TB, s string) dirgate.Identifier {
	t.Helper()
	id, err := dirgate.ParseIdentifier(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// BenchmarkDomainsForestListing measures a nested listing read from the DCs (no
// cache) through the router: CORP's Local group, whose FSP stands for FABRIKAM's
// User, beside a CORP group of the same shape and size served by CORP alone (CORP's
// Universal and a CORP user in place of the FSP: five objects, three levels), and
// CORP's Local served by CORP alone (the FSP listed as such). Each iteration is
// timed on its own; median-ms is their median (docs/directory.md, "Several domains:
// how dirgate serves them").
func BenchmarkDomainsForestListing(b *testing.B) {
	f := sambatest.ForestFromEnv(b)
	c := f.Corp
	user, _ := c.DC().TempUser(b, "dgbench-user", "Bench-Pass-1-x", nil)
	admin := c.DC().DialAdmin(b)
	group := "CN=dgbench-local," + c.OU
	_ = admin.Del(goldap.NewDelRequest(group, nil)) // left over by a killed run
	add := goldap.NewAddRequest(group, nil)
	add.Attribute("objectClass", []string{"top", "group"})
	add.Attribute("sAMAccountName", []string{"dgbench-local"})
	add.Attribute("groupType", []string{"-2147483644"}) // domain local, security
	add.Attribute("member", []string{c.UniversalDN, user})
	if err := admin.Add(add); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { admin.Del(goldap.NewDelRequest(group, nil)) })
	router, alone := openForest(b, f), openForest(b, f, "--home-alone")
	opts := dirgate.ListOptions{IncludeIndirect: true, Properties: []string{"samaccountname"}}
	for _, bc := range []struct {
		name  string
		dir   dirgate.Directory
		group string
	}{
		{"router CORP Local", router, c.LocalDN},
		{"CORP alone same-size group", alone, group},
		{"CORP alone CORP Local", alone, c.LocalDN},
	} {
		b.Run(bc.name, func(b *testing.B) {
			svc := &dirgate.MemberService{Dir: bc.dir}
			id := mustID(b, bc.group)
			var times []time.Duration
			n := 0
			for b.Loop() {
				start := time.Now()
				objs, err := svc.List(context.Background(), dirgate.Principal{}, id, opts)
				times = append(times, time.Since(start))
				if err != nil {
					b.Fatal(err)
				}
				n = len(objs)
			}
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "median-ms")
			b.ReportMetric(float64(n), "objects")
		})
	}
}

// BenchmarkDomainsForestPrincipal resolves a caller's principal (its account and
// every group it belongs to, as on a token's refresh) through the router and with
// CORP alone: CORP's User is in three CORP groups, and through CORP's Global in
// FABRIKAM's Local, which the router finds with one search of FABRIKAM per group
// (each group's GUID checked against the other domain once, then remembered).
func BenchmarkDomainsForestPrincipal(b *testing.B) {
	f := sambatest.ForestFromEnv(b)
	router, alone := openForest(b, f), openForest(b, f, "--home-alone")
	for _, bc := range []struct {
		name string
		dir  dirgate.Directory
		user string
	}{
		{"router CORP User", router, f.Corp.UserDN},
		{"CORP alone CORP User", alone, f.Corp.UserDN},
		{"router FABRIKAM User", router, f.Fabrikam.UserDN},
	} {
		b.Run(bc.name, func(b *testing.B) {
			svc := &dirgate.MemberService{Dir: bc.dir}
			id := mustID(b, bc.user)
			var times []time.Duration
			n := 0
			for b.Loop() {
				start := time.Now()
				p, err := svc.Principal(context.Background(), id)
				times = append(times, time.Since(start))
				if err != nil {
					b.Fatal(err)
				}
				n = len(p.Groups)
			}
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "median-ms")
			b.ReportMetric(float64(n), "groups")
		})
	}
}

// TestDomainsForestLDAPChanges: FABRIKAM's User, listed in CORP's Local in place of
// its FSP and named by its own GUID, is removed and added back through the FSP that
// CORP holds for it. FABRIKAM's User2, for which CORP holds no FSP, is no member to
// remove; added to CORP's domain-local group, CORP's DC creates an FSP for it, and
// the listing shows User2 as FABRIKAM holds it; removed again, the FSP stays, as
// the DC leaves it. Added to CORP's global or universal group, it is refused as AD
// refuses it (Samba would accept it) and no FSP is made. The forest is left as the
// TestDomainsForestTwoForests: CORP and FABRIKAM read each their own forest of one
// domain from their crossRefs, so the program keeps its in-chain setting and
// writes across them go through FSPs (TestDomainsForestLDAPChanges).
func TestDomainsForestTwoForests(t *testing.T) {
	f := sambatest.ForestFromEnv(t)
	_, m := openForestMain(t, f)
	if m.forestOfSeveral {
		t.Errorf("a forest of several domains read from two forests of one domain each")
	}
}

// harness seeded it.
func TestDomainsForestLDAPChanges(t *testing.T) {
	f := sambatest.ForestFromEnv(t)
	c, fb := f.Corp, f.Fabrikam
	ctx := context.Background()
	svc := &dirgate.MemberService{Dir: openForest(t, f)}
	admin := c.DC().DialAdmin(t)
	members := func(group string) []string {
		res, err := admin.Search(goldap.NewSearchRequest(group, goldap.ScopeBaseObject, goldap.NeverDerefAliases, 0, 0, false,
			"(objectClass=*)", []string{"member"}, nil))
		if err != nil {
			t.Fatal(err)
		}
		return keys(t, res.Entries[0].GetAttributeValues("member"))
	}
	seed := members(c.LocalDN)
	user2 := readHeld(t, f, fb.User2DN)
	user2SID := sidOf(t, f, fb.User2DN)
	user2FSP := "CN=" + user2SID + ",CN=ForeignSecurityPrincipals," + c.BaseDN
	t.Cleanup(func() { restoreForestSeed(t, f, admin, user2FSP) })
	if want := keys(t, []string{c.UniversalDN, c.FSPDN}); !slices.Equal(seed, want) {
		t.Fatalf("CORP's Local holds %q before the test, want %q", seed, want)
	}
	if fspGUID(t, admin, user2SID) != "" {
		t.Fatalf("CORP holds an FSP for FABRIKAM's User2 before the test")
	}
	user := readHeld(t, f, fb.UserDN)
	res, err := svc.Remove(ctx, dirgate.Principal{}, mustID(t, c.LocalDN), mustID(t, user.guid))
	if err != nil || res.NoChanges || res.ResultType != dirgate.ResultSucceeded {
		t.Fatalf("remove FABRIKAM's User from CORP's Local: %+v, %v", res, err)
	}
	if got, want := members(c.LocalDN), keys(t, []string{c.UniversalDN}); !slices.Equal(got, want) {
		t.Fatalf("after the removal CORP's Local holds %q, want %q", got, want)
	}
	res, err = svc.Remove(ctx, dirgate.Principal{}, mustID(t, c.LocalDN), mustID(t, user.guid))
	if err != nil || !res.NoChanges {
		t.Fatalf("remove again: %+v, %v, want no changes", res, err)
	}
	res, err = svc.Add(ctx, dirgate.Principal{}, mustID(t, c.LocalDN), mustID(t, fb.UserDN))
	if err != nil || res.NoChanges || res.ResultType != dirgate.ResultSucceeded {
		t.Fatalf("add FABRIKAM's User back: %+v, %v", res, err)
	}
	if got := members(c.LocalDN); !slices.Equal(got, seed) {
		t.Fatalf("after the addition CORP's Local holds %q, want %q", got, seed)
	}
	res, err = svc.Add(ctx, dirgate.Principal{}, mustID(t, c.LocalDN), mustID(t, fb.UserDN))
	if err != nil || !res.NoChanges {
		t.Fatalf("add FABRIKAM's User again: %+v, %v, want no changes", res, err)
	}
	// FABRIKAM's User2, for which CORP holds no FSP: its removal answers as any
	// non-member's, so that it does not tell whether it is in some group of CORP.
	res, err = svc.Remove(ctx, dirgate.Principal{}, mustID(t, c.LocalDN), mustID(t, fb.User2DN))
	if err != nil || !res.NoChanges {
		t.Fatalf("remove FABRIKAM's User2, which CORP holds no FSP for: %+v, %v, want no changes", res, err)
	}
	// CORP's global and universal groups may not hold a member of another domain
	// (AD's rule; Samba's DC would take it): refused, with or without an FSP, and
	// nothing written.
	for _, g := range []string{c.GlobalDN, c.UniversalDN} {
		before := members(g)
		for _, m := range []string{fb.User2DN, fb.UserDN} {
			_, err := svc.Add(ctx, dirgate.Principal{}, mustID(t, g), mustID(t, m))
			if dirgate.ErrorCode(err) != dirgate.EINVALID || dirgate.ErrorMessage(err) != dirgate.RefusedAddition {
				t.Errorf("add %s to %s: %v, want the directory's refusal of an addition", m, g, err)
			}
		}
		if got := members(g); !slices.Equal(got, before) {
			t.Errorf("after the refusals %s holds %q, want %q", g, got, before)
		}
	}
	if fspGUID(t, admin, user2SID) != "" {
		t.Fatalf("a refused addition made an FSP for FABRIKAM's User2")
	}
	// Into CORP's domain-local group: CORP's DC makes the FSP.
	res, err = svc.Add(ctx, dirgate.Principal{}, mustID(t, c.LocalDN), mustID(t, user2.guid))
	if err != nil || res.NoChanges || res.ResultType != dirgate.ResultSucceeded {
		t.Fatalf("add FABRIKAM's User2 to CORP's Local: %+v, %v", res, err)
	}
	if fspGUID(t, admin, user2SID) == "" {
		t.Fatalf("CORP's DC holds no FSP for FABRIKAM's User2 after its addition")
	}
	if got, want := members(c.LocalDN), keys(t, []string{c.UniversalDN, c.FSPDN, user2FSP}); !slices.Equal(got, want) {
		t.Fatalf("after the addition CORP's Local holds %q, want %q", got, want)
	}
	objs, err := svc.List(ctx, dirgate.Principal{}, mustID(t, c.LocalDN), dirgate.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, o := range objs {
		listed = append(listed, o.DN)
		if o.DN == fb.User2DN && (o.GUID != user2.guid || o.DomainName != "fabrikam.example.net") {
			t.Errorf("FABRIKAM's User2 listed as %s %s, its DC holds %s", o.GUID, o.DomainName, user2.guid)
		}
	}
	if g, w := keys(t, listed), keys(t, []string{c.UniversalDN, fb.UserDN, fb.User2DN}); !slices.Equal(g, w) {
		t.Fatalf("CORP's Local lists %q\nwant %q", g, w)
	}
	res, err = svc.Remove(ctx, dirgate.Principal{}, mustID(t, c.LocalDN), mustID(t, fb.User2DN))
	if err != nil || res.NoChanges || res.ResultType != dirgate.ResultSucceeded {
		t.Fatalf("remove FABRIKAM's User2 again: %+v, %v", res, err)
	}
	if got := members(c.LocalDN); !slices.Equal(got, seed) {
		t.Fatalf("after the removal CORP's Local holds %q, want %q", got, seed)
	}
	if fspGUID(t, admin, user2SID) == "" {
		t.Error("the DC deleted the FSP of FABRIKAM's User2 with its last membership")
	}
}

// sidOf reads the SID of dn from its own domain's DC.
func sidOf(t testing.TB, f sambatest.Forest, dn string) string {
	t.Helper()
	d := f.Corp
	if strings.HasSuffix(strings.ToLower(dn), strings.ToLower(f.Fabrikam.BaseDN)) {
		d = f.Fabrikam
	}
	res, err := d.DC().DialService(t).Search(goldap.NewSearchRequest(dn, goldap.ScopeBaseObject, goldap.NeverDerefAliases, 0, 0, false,
		"(objectClass=*)", []string{"objectSid"}, nil))
	if err != nil {
		t.Fatal(err)
	}
	sid, err := ldapentry.SIDFromBytes(res.Entries[0].GetRawAttributeValue("objectSid"))
	if err != nil {
		t.Fatal(err)
	}
	return sid
}

// fspGUID returns the GUID of the FSP CORP's DC holds for sid ("" for none).
func fspGUID(t testing.TB, admin *goldap.Conn, sid string) string {
	t.Helper()
	res, err := admin.Search(goldap.NewSearchRequest("<SID="+sid+">", goldap.ScopeBaseObject, goldap.NeverDerefAliases, 0, 0, false,
		"(objectClass=foreignSecurityPrincipal)", []string{"objectGUID"}, nil))
	if goldap.IsErrorWithCode(err, goldap.LDAPResultNoSuchObject) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Entries) == 0 {
		return ""
	}
	return ldapentry.GUIDFromBytes(res.Entries[0].GetRawAttributeValue("objectGUID"))
}

// restoreForestSeed puts CORP's groups back as the harness seeded them, and deletes
// the FSP a test made (fsp), whatever happened: other tests share the forest.
func restoreForestSeed(t testing.TB, f sambatest.Forest, admin *goldap.Conn, fsp string) {
	t.Helper()
	c := f.Corp
	for group, want := range map[string][]string{
		c.LocalDN: {c.UniversalDN, c.FSPDN}, c.GlobalDN: {c.UserDN, c.User2DN}, c.UniversalDN: {c.GlobalDN},
	} {
		m := goldap.NewModifyRequest(group, nil)
		m.Replace("member", want)
		if err := admin.Modify(m); err != nil {
			t.Errorf("restore %s: %v", group, err)
		}
	}
	if err := admin.Del(goldap.NewDelRequest(fsp, nil)); err != nil && !goldap.IsErrorWithCode(err, goldap.LDAPResultNoSuchObject) {
		t.Errorf("delete %s: %v", fsp, err)
	}
}

// TestDomainsForestLDAPSignIn: each domain's User signs in by UPN and as
// DOMAIN\user through the router, bound in its own domain, the subject the
// account its own DC holds.
func TestDomainsForestLDAPSignIn(t *testing.T) {
	f := sambatest.ForestFromEnv(t)
	_, m := openForestMain(t, f)
	for _, d := range []sambatest.ForestDomain{f.Corp, f.Fabrikam} {
		want := readHeld(t, f, d.UserDN)
		for _, n := range []string{d.UserUPN(), d.NetBIOS + `\` + d.UserName} {
			name, err := dirgate.ParseSignInName(n)
			if err != nil {
				t.Fatal(err)
			}
			id, err := m.checker.CheckPassword(context.Background(), name, d.UserPassword)
			if err != nil {
				t.Fatalf("%s: %v", n, err)
			}
			if id.Canonical() != want.guid {
				t.Errorf("%s signed in as %s, want %s (%s)", n, id, want.guid, d.UserDN)
			}
		}
	}
}

// TestDomainsForestEndToEnd runs the program in front of the forest, with the
// cache, the policy and sign-in: FABRIKAM's User signs in by its UPN, and a role
// granted to FABRIKAM's Global group (its own domain's) lets it list CORP's Local
// group, nested, where it appears itself in place of its FSP with FABRIKAM's
// domainName; the second listing is the cache's.
func TestDomainsForestEndToEnd(t *testing.T) {
	f := sambatest.ForestFromEnv(t)
	m, root, token := startForestSignedIn(t, f, map[string]any{"name": "fabrikam-global-views-all", "trustees": []string{f.Fabrikam.GlobalDN},
		"permissions": []string{"view"}, "scopes": []any{map[string]bool{"all": true}}, "properties": []string{"*"}})
	u := root + "/api/directoryObjects/groupMembers?includeIndirect=true&properties=sAMAccountName&group=" + url.QueryEscape(f.Corp.LocalDN)
	for i, wantCache := range []string{"miss", "hit"} {
		r := call(t, "GET", u, token)
		if r.status != 200 {
			t.Fatalf("listing %d: %d %s", i, r.status, r.body)
		}
		if got := r.header.Get("X-Dirgate-Cache"); got != wantCache {
			t.Errorf("listing %d: X-Dirgate-Cache %q, want %q", i, got, wantCache)
		}
		var objs []dirgate.Object
		if err := json.Unmarshal(r.body, &objs); err != nil {
			t.Fatal(err)
		}
		var dns []string
		for _, o := range objs {
			dns = append(dns, o.DN)
			h := readHeld(t, f, o.DN)
			if o.GUID != h.guid || o.DomainName != h.domain || !slices.Equal(o.Properties["samaccountname"], []string{h.sam}) {
				t.Errorf("%s listed as %s %s %q; its DC holds %s %s %q", o.DN, o.GUID, o.DomainName, o.Properties["samaccountname"], h.guid, h.domain, h.sam)
			}
		}
		c := f.Corp
		if g, w := keys(t, dns), keys(t, []string{c.UniversalDN, c.GlobalDN, c.UserDN, c.User2DN, f.Fabrikam.UserDN}); !slices.Equal(g, w) {
			t.Errorf("listing %d: %q\nwant %q", i, g, w)
		}
	}
	// FABRIKAM's calls and DC show on /metrics beside CORP's.
	metrics := string(call(t, "GET", metricsURL(m), "").body)
	for _, want := range []string{`dirgate_upstream_duration_seconds_count{operation="lookup",outcome="ok",upstream="ldap:fabrikam.example.net"}`,
		`dirgate_upstream_duration_seconds_count{operation="members",outcome="ok",upstream="ldap"}`,
		`dirgate_ldap_server_up{server="` + f.Fabrikam.URL + `"} 1`, `dirgate_ldap_server_up{server="` + f.Corp.URL + `"} 1`,
		`dirgate_upstream_breaker_state{server="` + f.Fabrikam.URL + `",upstream="ldap:fabrikam.example.net"} 0`,
		`dirgate_ldap_overlaid_members_total{domain="fabrikam.example.net"} 0`, `dirgate_ldap_overlaid_members_total{domain="corp.example.com"} 0`,
		// FABRIKAM's own pool size (the file's pool-size), CORP's the default.
		`dirgate_ldap_pool_size{server="` + f.Fabrikam.URL + `"} 3`, `dirgate_ldap_pool_size{server="` + f.Corp.URL + `"} 4`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestDomainsForestEndToEndHomeOnlyRole: a role that views only CORP's OU hides
// FABRIKAM's objects. FABRIKAM's User, which a listing of CORP's Local shows in
// place of CORP's FSP, is not listed (nor the FSP, outside the OU), and looked up
// by its GUID it answers exactly as a GUID no domain holds.
func TestDomainsForestEndToEndHomeOnlyRole(t *testing.T) {
	f := sambatest.ForestFromEnv(t)
	c := f.Corp
	_, root, token := startForestSignedIn(t, f, map[string]any{"name": "fabrikam-global-views-corp-ou", "trustees": []string{f.Fabrikam.GlobalDN},
		"permissions": []string{"view"}, "scopes": []any{map[string]string{"subtree": c.OU}}, "properties": []string{"*"}})
	members := root + "/api/directoryObjects/groupMembers?group="
	for _, indirect := range []string{"false", "true"} {
		r := call(t, "GET", members+url.QueryEscape(c.LocalDN)+"&includeIndirect="+indirect, token)
		if r.status != 200 {
			t.Fatalf("listing (indirect %s): %d %s", indirect, r.status, r.body)
		}
		var objs []dirgate.Object
		if err := json.Unmarshal(r.body, &objs); err != nil {
			t.Fatal(err)
		}
		var dns []string
		for _, o := range objs {
			dns = append(dns, o.DN)
		}
		want := []string{c.UniversalDN}
		if indirect == "true" {
			want = append(want, c.GlobalDN, c.UserDN, c.User2DN)
		}
		if g, w := keys(t, dns), keys(t, want); !slices.Equal(g, w) {
			t.Errorf("listing (indirect %s): %q\nwant %q", indirect, g, w)
		}
	}
	user := readHeld(t, f, f.Fabrikam.UserDN)
	hidden := call(t, "GET", members+url.QueryEscape(user.guid), token)
	unknown := call(t, "GET", members+"00000000-0000-4000-8000-00000000dead", token)
	if hidden.status != 404 || hidden.status != unknown.status || !bytes.Equal(hidden.body, unknown.body) {
		t.Errorf("FABRIKAM's User by GUID: %d %s; a GUID no domain holds: %d %s", hidden.status, hidden.body, unknown.status, unknown.body)
	}
}

// TestDomainsForestEndToEndAddAcrossDomains runs the program in front of the forest,
// with the cache: FABRIKAM's User, allowed to view, add and remove everywhere, adds
// FABRIKAM's User2, for which CORP holds no FSP, to CORP's domain-local group.
// CORP's DC makes the FSP; the next listing of the group, cached before the
// addition, shows User2 as FABRIKAM holds it; the removal takes it out again. The
// same addition to CORP's global group is refused as AD refuses it: 400, nothing
// written, no FSP made.
func TestDomainsForestEndToEndAddAcrossDomains(t *testing.T) {
	f := sambatest.ForestFromEnv(t)
	c, fb := f.Corp, f.Fabrikam
	admin := c.DC().DialAdmin(t)
	user2SID := sidOf(t, f, fb.User2DN)
	t.Cleanup(func() { restoreForestSeed(t, f, admin, "CN="+user2SID+",CN=ForeignSecurityPrincipals,"+c.BaseDN) })
	if fspGUID(t, admin, user2SID) != "" {
		t.Fatalf("CORP holds an FSP for FABRIKAM's User2 before the test")
	}
	_, root, token := startForestSignedIn(t, f, map[string]any{"name": "fabrikam-global-changes-all", "trustees": []string{fb.GlobalDN},
		"permissions": []string{"view", "add", "remove"}, "scopes": []any{map[string]bool{"all": true}}, "properties": []string{"*"}})
	base := root + "/api/directoryObjects/groupMembers"
	listing := func(wantCache string) []string {
		t.Helper()
		r := call(t, "GET", base+"?group="+url.QueryEscape(c.LocalDN), token)
		if r.status != 200 {
			t.Fatalf("listing: %d %s", r.status, r.body)
		}
		if got := r.header.Get("X-Dirgate-Cache"); got != wantCache {
			t.Errorf("listing: X-Dirgate-Cache %q, want %q", got, wantCache)
		}
		var objs []dirgate.Object
		if err := json.Unmarshal(r.body, &objs); err != nil {
			t.Fatal(err)
		}
		var dns []string
		for _, o := range objs {
			dns = append(dns, o.DN)
			if h := readHeld(t, f, o.DN); o.GUID != h.guid || o.DomainName != h.domain {
				t.Errorf("%s listed as %s %s; its DC holds %s %s", o.DN, o.GUID, o.DomainName, h.guid, h.domain)
			}
		}
		return keys(t, dns)
	}
	seed := keys(t, []string{c.UniversalDN, fb.UserDN})
	listing("miss")
	if got := listing("hit"); !slices.Equal(got, seed) {
		t.Fatalf("CORP's Local lists %q before the addition, want %q", got, seed)
	}
	// Refused in CORP's global group: the answer of any addition the directory refuses.
	r := post(t, base, token, "application/json", addBody(c.GlobalDN, fb.User2DN))
	var refusal struct{ Message, Code string }
	if err := json.Unmarshal(r.body, &refusal); err != nil || r.status != 400 || refusal.Message != dirgate.RefusedAddition {
		t.Fatalf("add FABRIKAM's User2 to CORP's Global: %d %s, want 400 %q", r.status, r.body, dirgate.RefusedAddition)
	}
	if fspGUID(t, admin, user2SID) != "" {
		t.Fatal("the refused addition made an FSP for FABRIKAM's User2")
	}
	r = post(t, base, token, "application/json", addBody(c.LocalDN, fb.User2DN))
	var res dirgate.OperationResult
	if err := json.Unmarshal(r.body, &res); err != nil || r.status != 200 || res.ResultType != dirgate.ResultSucceeded || res.NoChanges {
		t.Fatalf("add FABRIKAM's User2 to CORP's Local: %d %s", r.status, r.body)
	}
	if fspGUID(t, admin, user2SID) == "" {
		t.Fatal("CORP's DC holds no FSP for FABRIKAM's User2 after its addition")
	}
	if got, want := listing("miss"), keys(t, []string{c.UniversalDN, fb.UserDN, fb.User2DN}); !slices.Equal(got, want) {
		t.Fatalf("CORP's Local lists %q after the addition, want %q", got, want)
	}
	r = call(t, "DELETE", base+"?group="+url.QueryEscape(c.LocalDN)+"&member="+url.QueryEscape(fb.User2DN), token)
	res = dirgate.OperationResult{}
	if err := json.Unmarshal(r.body, &res); err != nil || r.status != 200 || res.NoChanges {
		t.Fatalf("remove FABRIKAM's User2 from CORP's Local: %d %s", r.status, r.body)
	}
	if got := listing("miss"); !slices.Equal(got, seed) {
		t.Fatalf("CORP's Local lists %q after the removal, want %q", got, seed)
	}
}

// startForestSignedIn runs the program in front of the forest with the bundled
// policy holding role and the extra settings, and signs FABRIKAM's User in: the
// program, its API root and the token.
func startForestSignedIn(t *testing.T, f sambatest.Forest, role map[string]any, extra ...string) (*Main, string, string) {
	t.Helper()
	policy := filepath.Join(t.TempDir(), "policy")
	if err := os.Mkdir(policy, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := bundled.WriteWithRoles(policy, role); err != nil {
		t.Fatal(err)
	}
	m := startMain(t, nil, append(append(forestArgs(t, f), "--policy-dir", policy, "--decision-log", "off"), extra...)...)
	root := "http://" + m.Addr() + "/restApi"
	_, token := signIn(t, root, root, f.Fabrikam.UserUPN(), f.Fabrikam.UserPassword)
	return m, root, token
}

// TestDomainsForestEndToEndChangeFeed: each domain's changes reach the cached
// listings that show its objects, in either domain, on every instance of a
// deployment sharing Redis. FABRIKAM's User is listed in FABRIKAM's Global (its own
// domain's group) and in CORP's Local (through CORP's foreign security principal);
// a description set on FABRIKAM's DC, outside dirgate, reaches both cached listings
// through FABRIKAM's change feed, the second because CORP is asked which of its
// groups hold the user's FSP. Each domain's feed has one reader.
func TestDomainsForestEndToEndChangeFeed(t *testing.T) {
	f := sambatest.ForestFromEnv(t)
	rs := redistest.Start(t)
	role := map[string]any{"name": "fabrikam-global-views-all", "trustees": []string{f.Fabrikam.GlobalDN},
		"permissions": []string{"view"}, "scopes": []any{map[string]bool{"all": true}}, "properties": []string{"*"}}
	type instance struct {
		m           *Main
		root, token string
	}
	var instances []instance
	for range 2 {
		m, root, token := startForestSignedIn(t, f, role, withRedis(t, rs.Addr())...)
		instances = append(instances, instance{m, root, token})
	}
	admin := f.Fabrikam.DC().DialAdmin(t)
	setDescription := func(v []string) {
		t.Helper()
		mod := goldap.NewModifyRequest(f.Fabrikam.UserDN, nil)
		mod.Replace("description", v)
		if err := admin.Modify(mod); err != nil {
			t.Fatalf("FABRIKAM's DC: set the description of %s: %v", f.Fabrikam.UserDN, err)
		}
	}
	t.Cleanup(func() { setDescription(nil) })
	listings := map[string]string{"CORP's Local": f.Corp.LocalDN, "FABRIKAM's Global": f.Fabrikam.GlobalDN}
	// description lists group on in and returns the description FABRIKAM's User
	// carries in the listing, and the listing's cache status.
	description := func(in instance, group string) (string, string) {
		t.Helper()
		objs, cache, status := listing(t, in.root+"/api/directoryObjects/groupMembers", in.token, group, "&properties=description")
		if status != 200 {
			t.Fatalf("listing %s: %d", group, status)
		}
		for _, o := range objs {
			if strings.EqualFold(o.DN, f.Fabrikam.UserDN) {
				return strings.Join(o.Properties["description"], "|"), cache
			}
		}
		t.Fatalf("listing %s does not show %s: %v", group, f.Fabrikam.UserDN, objs)
		return "", ""
	}
	setDescription([]string{"before"})
	time.Sleep(2 * time.Second) // past the feeds' next reads
	for i, in := range instances {
		for name, dn := range listings {
			description(in, dn)
			if got, status := description(in, dn); got != "before" || status != "hit" {
				t.Fatalf("instance %d, %s: description %q (cache %s), want %q from the cache", i, name, got, status, "before")
			}
		}
	}
	setDescription([]string{"after"})
	deadline := time.Now().Add(20 * time.Second)
	for i, in := range instances {
		for name, dn := range listings {
			for {
				got, _ := description(in, dn)
				if got == "after" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("instance %d, %s still shows FABRIKAM's User's description %q 20 s after the change, want %q", i, name, got, "after")
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
	}
	// One reader per domain in the deployment.
	for _, domain := range []string{"corp.example.com", "fabrikam.example.net"} {
		readers := 0
		for _, in := range instances {
			if strings.Contains(string(call(t, "GET", metricsURL(in.m), "").body), `dirgate_changefeed_leader{domain="`+domain+`"} 1`) {
				readers++
			}
		}
		if readers != 1 {
			t.Errorf("%s's change feed: %d readers, want 1", domain, readers)
		}
	}
}

// TestDomainsForestLDAPPrincipal: a principal's groups reach across the trust, as a
// Windows resource domain's token does. FABRIKAM's User is in CORP's Local through
// CORP's foreign security principal; CORP's User is in FABRIKAM's Local through
// its group CORP's Global, which FABRIKAM holds as a foreign security principal.
func TestDomainsForestLDAPPrincipal(t *testing.T) {
	f := sambatest.ForestFromEnv(t)
	c, fb := f.Corp, f.Fabrikam
	svc := &dirgate.MemberService{Dir: openForest(t, f)}
	for _, tc := range []struct {
		user string
		want []string
	}{
		{fb.UserDN, []string{fb.GlobalDN, fb.UniversalDN, fb.LocalDN, c.LocalDN}},
		{c.UserDN, []string{c.GlobalDN, c.UniversalDN, c.LocalDN, fb.LocalDN}},
	} {
		p, err := svc.Principal(context.Background(), mustID(t, tc.user))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, g := range p.Groups {
			if strings.Contains(strings.ToLower(g.DN), "ou=dirgate-forest,") { // the domains' built-in groups aside
				got = append(got, g.DN)
			}
		}
		if g, w := keys(t, got), keys(t, tc.want); !slices.Equal(g, w) {
			t.Errorf("%s's groups %q\nwant %q", tc.user, g, w)
		}
	}
}

// TestDomainsForestEndToEndForeignTrustee: a role granted to CORP's domain-local
// group applies to FABRIKAM's User, whom the group holds through a foreign
// security principal: signed in as that user, it lists CORP's Global.
func TestDomainsForestEndToEndForeignTrustee(t *testing.T) {
	f := sambatest.ForestFromEnv(t)
	_, root, token := startForestSignedIn(t, f, map[string]any{"name": "corp-local-views-all", "trustees": []string{f.Corp.LocalDN},
		"permissions": []string{"view"}, "scopes": []any{map[string]bool{"all": true}}})
	objs, _, status := listing(t, root+"/api/directoryObjects/groupMembers", token, f.Corp.GlobalDN, "")
	if status != 200 {
		t.Fatalf("listing CORP's Global as FABRIKAM's User: %d", status)
	}
	var dns []string
	for _, o := range objs {
		dns = append(dns, o.DN)
	}
	if g, w := keys(t, dns), keys(t, []string{f.Corp.UserDN, f.Corp.User2DN}); !slices.Equal(g, w) {
		t.Errorf("CORP's Global as FABRIKAM's User, trustee CORP's Local: %q, want %q", g, w)
	}
}

// TestDomainsForestOneDomainDown stops FABRIKAM's DC under the program. CORP's
// listings, look-ups and sign-ins go on; a listing of CORP's Local, which holds
// FABRIKAM's User, read meanwhile lists CORP's FSP in its place and is not cached
// (one cached before is served as it was); /readyz reports the domain. Once the DC
// is back, that listing shows FABRIKAM's User again.
func TestDomainsForestOneDomainDown(t *testing.T) {
	f := sambatest.ForestFromEnv(t)
	c := f.Corp
	_, root, _ := startForestSignedIn(t, f, map[string]any{"name": "corp-global-views-all", "trustees": []string{c.GlobalDN},
		"permissions": []string{"view"}, "scopes": []any{map[string]bool{"all": true}}})
	_, token := signIn(t, root, root, c.UserUPN(), c.UserPassword)
	// list lists group; query picks a cache entry of its own (properties).
	list := func(group, query string) ([]dirgate.Object, string) {
		t.Helper()
		objs, cache, status := listing(t, root+"/api/directoryObjects/groupMembers", token, group, query)
		if status != 200 {
			t.Fatalf("listing %s: %d", group, status)
		}
		return objs, cache
	}
	listsFabrikamUser := func(objs []dirgate.Object) bool {
		return slices.ContainsFunc(objs, func(o dirgate.Object) bool { return strings.EqualFold(o.DN, f.Fabrikam.UserDN) })
	}
	if objs, _ := list(c.LocalDN, ""); !listsFabrikamUser(objs) {
		t.Fatalf("CORP's Local before the outage: %v, want FABRIKAM's User", objs)
	}
	const uncached = "&properties=description" // not listed before the outage

	f.StopDC(t, 2)
	var dns []string
	objs, _ := list(c.GlobalDN, uncached)
	for _, o := range objs {
		dns = append(dns, o.DN)
	}
	if g, w := keys(t, dns), keys(t, []string{c.UserDN, c.User2DN}); !slices.Equal(g, w) {
		t.Errorf("CORP's Global with FABRIKAM down: %q, want %q", g, w)
	}
	for i := range 2 {
		objs, cache := list(c.LocalDN, uncached)
		fsp := slices.IndexFunc(objs, func(o dirgate.Object) bool { return strings.EqualFold(o.DN, c.FSPDN) })
		if fsp < 0 || objs[fsp].ObjectType != dirgate.TypeForeignPrincipal || listsFabrikamUser(objs) || cache == "hit" {
			t.Errorf("CORP's Local with FABRIKAM down, listing %d (cache %s): %v, want CORP's FSP %s in place of FABRIKAM's User, not from the cache",
				i, cache, objs, c.FSPDN)
		}
	}
	if r := call(t, "GET", root+"/api/directoryObjects/groupMembers?group="+url.QueryEscape(c.LocalDN)+uncached, token); r.header.Get("X-Dirgate-Unresolved") != "1" {
		t.Errorf("CORP's Local with FABRIKAM down: X-Dirgate-Unresolved %q, want 1 (CORP's FSP)", r.header.Get("X-Dirgate-Unresolved"))
	}
	if r := call(t, "GET", root+"/api/directoryObjects/groupMembers?group="+url.QueryEscape(c.GlobalDN)+uncached, token); r.header.Get("X-Dirgate-Unresolved") != "" {
		t.Errorf("CORP's Global with FABRIKAM down: X-Dirgate-Unresolved %q, want none", r.header.Get("X-Dirgate-Unresolved"))
	}
	user := readHeld(t, f, c.UserDN)
	if r := call(t, "GET", root+"/api/directoryObjects/groupMembers?group="+user.guid, token); r.status != 400 {
		t.Errorf("CORP's User by GUID with FABRIKAM down: %d %s, want 400 (not a group): its domain answers", r.status, r.body)
	}
	if _, again := signIn(t, root, root, c.UserUPN(), c.UserPassword); again == "" {
		t.Error("CORP's User could not sign in with FABRIKAM down")
	}
	if got := readyChecks(t, strings.TrimSuffix(root, "/restApi"))["upstream fabrikam.example.net"]; got == "ok" {
		t.Errorf("/readyz upstream fabrikam.example.net %q with FABRIKAM down", got)
	}

	if objs, cache := list(c.LocalDN, ""); !listsFabrikamUser(objs) || cache != "hit" {
		t.Errorf("CORP's Local as cached before the outage: %v (cache %s), want FABRIKAM's User from the cache", objs, cache)
	}

	f.StartDC(t, 2)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if objs, _ := list(c.LocalDN, uncached); listsFabrikamUser(objs) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("CORP's Local does not show FABRIKAM's User 30 s after its DC is back")
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// TestDomainsForestConformance holds every listing of the seeded groups of both
// domains, direct and nested, with properties, against what the domains' own DCs
// hold, read as the service accounts without dirgate: a group's member values in its
// own domain, each foreign security principal of the other domain's SID read from
// that domain's DC by its SID, nesting followed across domains, each object once
// and never the listed group. Each listed object's DN, GUID, objectType,
// domainName and properties must be the ones its own DC holds.
func TestDomainsForestConformance(t *testing.T) {
	f := sambatest.ForestFromEnv(t)
	svc := &dirgate.MemberService{Dir: openForest(t, f)}
	o := newForestOracle(t, f)
	props, err := dirgate.NormalizeProperties([]string{"sAMAccountName", "description", "objectSid", "objectGUID", "whenCreated", "cn"})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []sambatest.ForestDomain{f.Corp, f.Fabrikam} {
		for _, group := range []string{d.GlobalDN, d.UniversalDN, d.LocalDN} {
			for _, indirect := range []bool{false, true} {
				want := o.members(t, group, indirect)
				got, err := svc.List(context.Background(), dirgate.Principal{}, mustID(t, group), dirgate.ListOptions{IncludeIndirect: indirect, Properties: props})
				if err != nil {
					t.Fatalf("%s (indirect %v): %v", group, indirect, err)
				}
				var gotDNs, wantDNs []string
				for _, obj := range got {
					gotDNs = append(gotDNs, obj.DN)
				}
				for _, w := range want {
					wantDNs = append(wantDNs, w.dn)
				}
				if g, w := keys(t, gotDNs), keys(t, wantDNs); !slices.Equal(g, w) {
					t.Errorf("%s (indirect %v) lists %q\nits DCs hold %q", group, indirect, g, w)
					continue
				}
				for _, obj := range got {
					o.check(t, group, obj, want)
				}
			}
		}
	}
}

// forestOracle reads the forest's DCs directly.
type forestOracle struct {
	f     sambatest.Forest
	conns map[string]*goldap.Conn // by base DN, lower case
}

// heldObject is an object as its own domain's DC holds it.
type heldObject struct {
	dn, guid, sid, sam, cn, created, domain string
	description, classes, member            []string
}

func newForestOracle(t *testing.T, f sambatest.Forest) *forestOracle {
	return &forestOracle{f: f, conns: map[string]*goldap.Conn{
		strings.ToLower(f.Corp.BaseDN): f.Corp.DC().DialService(t), strings.ToLower(f.Fabrikam.BaseDN): f.Fabrikam.DC().DialService(t),
	}}
}

// domainOf is the forest domain whose base DN holds dn.
func (o *forestOracle) domainOf(dn string) sambatest.ForestDomain {
	if strings.HasSuffix(strings.ToLower(dn), strings.ToLower(o.f.Fabrikam.BaseDN)) {
		return o.f.Fabrikam
	}
	return o.f.Corp
}

// read reads base (a DN or <SID=…>) from the DC of d.
func (o *forestOracle) read(t *testing.T, d sambatest.ForestDomain, base string) heldObject {
	t.Helper()
	res, err := o.conns[strings.ToLower(d.BaseDN)].Search(goldap.NewSearchRequest(base, goldap.ScopeBaseObject, goldap.NeverDerefAliases, 0, 0, false,
		"(objectClass=*)", []string{"distinguishedName", "objectGUID", "objectSid", "sAMAccountName", "cn", "whenCreated", "description", "objectClass", "member"}, nil))
	if err != nil || len(res.Entries) != 1 {
		t.Fatalf("%s's DC: read %s: %v", d.NetBIOS, base, err)
	}
	e := res.Entries[0]
	sid, _ := ldapentry.SIDFromBytes(e.GetRawAttributeValue("objectSid"))
	return heldObject{dn: e.GetAttributeValue("distinguishedName"), guid: ldapentry.GUIDFromBytes(e.GetRawAttributeValue("objectGUID")),
		sid: sid, sam: e.GetAttributeValue("sAMAccountName"), cn: e.GetAttributeValue("cn"), created: e.GetAttributeValue("whenCreated"),
		domain: d.DNSName(), description: e.GetAttributeValues("description"), classes: e.GetAttributeValues("objectClass"),
		member: e.GetAttributeValues("member")}
}

// resolve is a member value as the object it stands for: an FSP of the other
// domain's SID is that domain's object.
func (o *forestOracle) resolve(t *testing.T, dn string) heldObject {
	t.Helper()
	d := o.domainOf(dn)
	h := o.read(t, d, dn)
	if slices.Contains(h.classes, "foreignSecurityPrincipal") {
		for _, other := range []sambatest.ForestDomain{o.f.Corp, o.f.Fabrikam} {
			if other.BaseDN != d.BaseDN && strings.HasPrefix(h.sid, other.SID+"-") {
				return o.read(t, other, "<SID="+h.sid+">")
			}
		}
	}
	return h
}

// members lists group as its DCs hold it: direct members, or every object below
// it, each once, never the group itself.
func (o *forestOracle) members(t *testing.T, group string, indirect bool) []heldObject {
	t.Helper()
	top := o.read(t, o.domainOf(group), group)
	seen := map[string]bool{top.guid: true}
	var out []heldObject
	queue := []heldObject{top}
	for len(queue) > 0 {
		g := queue[0]
		queue = queue[1:]
		for _, m := range g.member {
			h := o.resolve(t, m)
			if seen[h.guid] {
				continue
			}
			seen[h.guid] = true
			out = append(out, h)
			if indirect && slices.Contains(h.classes, "group") {
				queue = append(queue, h)
			}
		}
	}
	return out
}

// check holds obj, listed in group, against the held object of its DN.
func (o *forestOracle) check(t *testing.T, group string, obj dirgate.Object, want []heldObject) {
	t.Helper()
	i := slices.IndexFunc(want, func(h heldObject) bool { return strings.EqualFold(h.dn, obj.DN) })
	w := want[i]
	typ := dirgate.TypeUser
	if slices.Contains(w.classes, "group") {
		typ = dirgate.TypeGroup
	}
	created, err := time.Parse("20060102150405.0Z", w.created)
	if err != nil {
		t.Fatalf("%s: whenCreated %q: %v", w.dn, w.created, err)
	}
	gotCreated, err := time.Parse(time.RFC3339, strings.Join(obj.Properties["whencreated"], ""))
	description := w.description
	if description == nil {
		description = []string{}
	}
	P := obj.Properties
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"guid", obj.GUID, w.guid}, {"objectType", obj.ObjectType, typ}, {"domainName", strings.ToLower(obj.DomainName), w.domain},
		{"samaccountname", P["samaccountname"], []string{w.sam}}, {"cn", P["cn"], []string{w.cn}},
		{"description", P["description"], description}, {"objectsid", P["objectsid"], []string{w.sid}},
		{"objectguid", P["objectguid"], []string{w.guid}}, {"whencreated", err == nil && gotCreated.Equal(created), true},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s, in %s: %s %v, its DC holds %v", obj.DN, group, c.name, c.got, c.want)
		}
	}
}
