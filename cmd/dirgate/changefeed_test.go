package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/ldapentry"
	"github.com/dirgate/dirgate/test/harness/redistest"
	"github.com/dirgate/dirgate/test/harness/sambatest"
	goldap "github.com/go-ldap/ldap/v3"
)

// The change feed against the real DC and Redis: two instances share Redis; every
// change is made with LDAP directly (never through dirgate) after the listing was
// cached on both, and each must show on both within feedBound. The test makes its
// own OU and objects and removes them, since other runs share the DC.

// feedBound is how long a test waits for a change to show. The documented bound with
// default settings is a few seconds (docs/cache.md); the margin is for a shared,
// loaded machine. It is a deadline, not a measurement (docs/benchmarks.md measures).
const feedBound = 30 * time.Second

// feedFixture is the test's own corner of the directory.
type feedFixture struct {
	dc    sambatest.DC
	adm   *goldap.Conn
	ou    string
	guids map[string]string // cn -> GUID
}

func (f *feedFixture) dn(cn string) string { return "CN=" + cn + "," + f.ou }

func (f *feedFixture) add(t testing.TB, dn string, attrs map[string][]string) {
	t.Helper()
	a := goldap.NewAddRequest(dn, nil)
	for k, v := range attrs {
		a.Attribute(k, v)
	}
	if err := f.adm.Add(a); err != nil {
		t.Fatalf("add %s: %v", dn, err)
	}
}

func (f *feedFixture) modify(t testing.TB, dn string, op func(*goldap.ModifyRequest)) {
	t.Helper()
	m := goldap.NewModifyRequest(dn, nil)
	op(m)
	if err := f.adm.Modify(m); err != nil {
		t.Fatalf("modify %s: %v", dn, err)
	}
}

// deleteTree removes dn and everything below it, deepest first.
func deleteTree(c *goldap.Conn, dn string) {
	res, err := c.Search(goldap.NewSearchRequest(dn, goldap.ScopeWholeSubtree, goldap.NeverDerefAliases, 0, 0, false, "(objectClass=*)", []string{"1.1"}, nil))
	if err != nil {
		return
	}
	dns := make([]string, 0, len(res.Entries))
	for _, e := range res.Entries {
		dns = append(dns, e.DN)
	}
	// Longer DNs lie deeper.
	for i := range dns {
		for j := i + 1; j < len(dns); j++ {
			if len(dns[j]) > len(dns[i]) {
				dns[i], dns[j] = dns[j], dns[i]
			}
		}
	}
	for _, d := range dns {
		_ = c.Del(goldap.NewDelRequest(d, nil))
	}
}

func newFeedFixture(t testing.TB) *feedFixture {
	t.Helper()
	dc := sambatest.Env(t)
	f := &feedFixture{dc: dc, adm: dc.DialAdmin(t), guids: map[string]string{}}
	f.ou = fmt.Sprintf("OU=dirgate-feed-%d-%d,%s", os.Getpid(), time.Now().UnixNano()%1e9, dc.BaseDN)
	f.add(t, f.ou, map[string][]string{"objectClass": {"organizationalUnit"}})
	t.Cleanup(func() { deleteTree(dc.DialAdmin(t), f.ou) })
	f.add(t, "OU=moved,"+f.ou, map[string][]string{"objectClass": {"organizationalUnit"}})
	tag := fmt.Sprintf("%d", time.Now().UnixNano()%1e9)
	for _, u := range []string{"u1", "u2", "u3", "u4", "u5", "caller", "locked"} {
		f.add(t, f.dn(u), map[string][]string{"objectClass": {"user"}, "sAMAccountName": {"fd" + tag + u}, "userAccountControl": {"544"}})
	}
	// g holds u1; c1 > c2 > c3 > c4 > c5 > u2; rights holds the caller.
	f.add(t, f.dn("c5"), map[string][]string{"objectClass": {"group"}, "member": {f.dn("u2"), f.dn("locked")}})
	for i := 4; i >= 1; i-- {
		f.add(t, f.dn(fmt.Sprintf("c%d", i)), map[string][]string{"objectClass": {"group"}, "member": {f.dn(fmt.Sprintf("c%d", i+1))}})
	}
	f.add(t, f.dn("g"), map[string][]string{"objectClass": {"group"}, "member": {f.dn("u1"), f.dn("u5")}})
	f.add(t, f.dn("rights"), map[string][]string{"objectClass": {"group"}, "member": {f.dn("caller")}})
	res, err := f.adm.Search(goldap.NewSearchRequest(f.ou, goldap.ScopeWholeSubtree, goldap.NeverDerefAliases, 0, 0, false, "(objectClass=*)", []string{"objectGUID", "cn"}, nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range res.Entries {
		f.guids[e.GetAttributeValue("cn")] = ldapentry.GUIDFromBytes(e.GetRawAttributeValue("objectGUID"))
	}
	return f
}

// startFeedInstance runs the program bound as bindDN, with a tokens file and a
// policy that lets "feed-admin" (the DC's administrator) view everything and
// "feed-caller" view the OU only through the group "rights".
func startFeedInstance(t testing.TB, f *feedFixture, bindDN, bindPassword string, extra ...string) (*Main, string) {
	t.Helper()
	return startFeedInstanceWith(t, f, nil, bindDN, bindPassword, extra...)
}

// startFeedInstanceWith is startFeedInstance with hook called on the program before
// it runs (to set its test hooks).
func startFeedInstanceWith(t testing.TB, f *feedFixture, hook func(*Main), bindDN, bindPassword string, extra ...string) (*Main, string) {
	t.Helper()
	dir := t.TempDir()
	pw := filepath.Join(dir, "password")
	os.WriteFile(pw, []byte(bindPassword), 0o600)
	tokens := filepath.Join(dir, "tokens.yaml")
	os.WriteFile(tokens, []byte("- token: feed-admin\n  subject: "+f.dc.AdminDN+"\n- token: feed-caller\n  subject: "+f.guids["caller"]+"\n"), 0o600)
	pol := filepath.Join(dir, "policy")
	os.MkdirAll(pol, 0o755)
	rego, err := os.ReadFile("../../rego/authz.rego")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(pol, "authz.rego"), rego, 0o644)
	data, _ := json.Marshal(map[string]any{"dirgate": map[string]any{"roles": []any{
		map[string]any{"name": "admin", "trustees": []string{f.dc.AdminDN}, "permissions": []string{"view"}, "scopes": []any{map[string]any{"all": true}}},
		map[string]any{"name": "rights", "trustees": []string{f.guids["rights"]}, "permissions": []string{"view"}, "scopes": []any{map[string]any{"subtree": f.ou}}},
	}}})
	os.WriteFile(filepath.Join(pol, "data.json"), data, 0o644)
	cfg, err := LoadConfig(append([]string{"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--log-level", "error", "--upstream", "ldap",
		"--ldap-url", f.dc.URL, "--ldap-bind-dn", bindDN, "--ldap-password-file", pw, "--ldap-base-dn", f.dc.BaseDN,
		"--ldap-ca-file", f.dc.CAFile, "--tokens-file", tokens, "--policy-dir", pol, "--decision-log", "off"}, extra...),
		func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	m := NewMain(cfg, io.Discard, io.Discard)
	if hook != nil {
		hook(m)
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m, "http://" + m.Addr() + "/restApi/api/directoryObjects/groupMembers"
}

// listing is one answer: its objects and how the cache served it.
func listing(t *testing.T, base, token, group, extra string) ([]dirgate.Object, string, int) {
	t.Helper()
	r := call(t, "GET", base+"?group="+url.QueryEscape(group)+extra, token)
	if r.status != http.StatusOK {
		return nil, r.header.Get("X-Dirgate-Cache"), r.status
	}
	var objs []dirgate.Object
	if err := json.Unmarshal(r.body, &objs); err != nil {
		t.Fatal(err)
	}
	return objs, r.header.Get("X-Dirgate-Cache"), r.status
}

// primed lists on every instance until the answer comes from the cache, so that a
// later change has a cached listing to invalidate.
func primed(t *testing.T, bases []string, token, group, extra string) {
	t.Helper()
	for _, b := range bases {
		for i := 0; ; i++ {
			if _, st, _ := listing(t, b, token, group, extra); st == "hit" {
				break
			}
			if i == 20 {
				t.Fatalf("%s on %s is never served from the cache", group, b)
			}
		}
	}
}

// eventually waits until ok holds on every instance, within feedBound.
func eventually(t *testing.T, what string, bases []string, ok func(base string) (bool, string)) {
	t.Helper()
	for _, b := range bases {
		deadline := time.Now().Add(feedBound)
		for {
			good, state := ok(b)
			if good {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not seen by %s within %s; last answer: %s", what, b, feedBound, state)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

func findDN(objs []dirgate.Object, guid string) (dirgate.Object, bool) {
	for _, o := range objs {
		if o.GUID == guid {
			return o, true
		}
	}
	return dirgate.Object{}, false
}

// has waits until group's listing (with extra) does or does not contain guid, and
// the object, when present, satisfies check.
func (f *feedFixture) has(t *testing.T, what string, bases []string, group, extra, guid string, want bool, check func(dirgate.Object) bool) {
	t.Helper()
	eventually(t, what, bases, func(b string) (bool, string) {
		objs, st, code := listing(t, b, "feed-admin", group, extra)
		if code != http.StatusOK {
			return false, fmt.Sprintf("status %d", code)
		}
		o, found := findDN(objs, guid)
		if found != want || found && check != nil && !check(o) {
			return false, fmt.Sprintf("%s, %d objects, member present %v %+v", st, len(objs), found, o.AccountStatus)
		}
		return true, ""
	})
}

func utf16Password(pw string) string {
	u := utf16.Encode([]rune(`"` + pw + `"`))
	b := make([]byte, 2*len(u))
	for i, c := range u {
		b[2*i], b[2*i+1] = byte(c), byte(c>>8)
	}
	return string(b)
}

// TestChangeFeedLDAP runs bound as the service account, which cannot read deleted
// objects: no deletion anywhere on the shared DC invalidates everything here, so each
// change below shows only through the exact invalidation it causes.
func TestChangeFeedLDAP(t *testing.T) {
	f := newFeedFixture(t)
	rs := redistest.Start(t)
	ma, a := startFeedInstance(t, f, f.dc.BindDN, f.dc.Password, withRedis(t, rs.Addr())...)
	mb, b := startFeedInstance(t, f, f.dc.BindDN, f.dc.Password, withRedis(t, rs.Addr())...)
	both := []string{a, b}
	g, c1 := f.dn("g"), f.dn("c1")
	const nested = "&includeIndirect=true"

	t.Run("member added", func(t *testing.T) {
		primed(t, both, "feed-admin", g, "")
		f.modify(t, g, func(m *goldap.ModifyRequest) { m.Add("member", []string{f.dn("u3")}) })
		f.has(t, "u3 added to g", both, g, "", f.guids["u3"], true, nil)
	})
	t.Run("member removed", func(t *testing.T) {
		primed(t, both, "feed-admin", g, "")
		f.modify(t, g, func(m *goldap.ModifyRequest) { m.Delete("member", []string{f.dn("u1")}) })
		f.has(t, "u1 removed from g", both, g, "", f.guids["u1"], false, nil)
	})
	t.Run("member added five levels down", func(t *testing.T) {
		primed(t, both, "feed-admin", c1, nested)
		f.modify(t, f.dn("c5"), func(m *goldap.ModifyRequest) { m.Add("member", []string{f.dn("u4")}) })
		f.has(t, "u4 added to c5, listed under c1", both, c1, nested, f.guids["u4"], true, nil)
	})
	t.Run("account disabled", func(t *testing.T) {
		primed(t, both, "feed-admin", c1, nested)
		f.modify(t, f.dn("u2"), func(m *goldap.ModifyRequest) { m.Replace("userAccountControl", []string{"546"}) })
		f.has(t, "u2 disabled", both, c1, nested, f.guids["u2"], true, func(o dirgate.Object) bool {
			return o.AccountStatus != nil && o.AccountStatus.IsDisabled
		})
	})
	t.Run("renamed", func(t *testing.T) {
		primed(t, both, "feed-admin", g, "")
		if err := f.adm.ModifyDN(goldap.NewModifyDNRequest(f.dn("u3"), "CN=u3-renamed", true, "")); err != nil {
			t.Fatal(err)
		}
		f.has(t, "u3 renamed", both, g, "", f.guids["u3"], true, func(o dirgate.Object) bool {
			return strings.HasPrefix(o.DN, "CN=u3-renamed,")
		})
	})
	t.Run("moved to another OU", func(t *testing.T) {
		primed(t, both, "feed-admin", g, "")
		if err := f.adm.ModifyDN(goldap.NewModifyDNRequest(f.dn("u5"), "CN=u5", true, "OU=moved,"+f.ou)); err != nil {
			t.Fatal(err)
		}
		f.has(t, "u5 moved", both, g, "", f.guids["u5"], true, func(o dirgate.Object) bool {
			return strings.EqualFold(o.DN, "CN=u5,OU=moved,"+f.ou)
		})
	})
	t.Run("group renamed: its old DN no longer resolves", func(t *testing.T) {
		primed(t, both, "feed-admin", f.dn("c3"), "")
		if err := f.adm.ModifyDN(goldap.NewModifyDNRequest(f.dn("c3"), "CN=c3-renamed", true, "")); err != nil {
			t.Fatal(err)
		}
		eventually(t, "c3's old DN", both, func(b string) (bool, string) {
			_, st, code := listing(t, b, "feed-admin", f.dn("c3"), "")
			return code == http.StatusNotFound, fmt.Sprintf("%d %s", code, st)
		})
		f.has(t, "c3 renamed, listed under c1", both, c1, nested, f.guids["c3"], true, func(o dirgate.Object) bool {
			return strings.HasPrefix(o.DN, "CN=c3-renamed,")
		})
	})
	t.Run("locked by bad passwords", func(t *testing.T) {
		pso := fmt.Sprintf("CN=dirgate-feed-%s,CN=Password Settings Container,CN=System,%s", f.guids["locked"][:8], f.dc.BaseDN)
		f.add(t, pso, map[string][]string{"objectClass": {"msDS-PasswordSettings"},
			"msDS-PasswordSettingsPrecedence": {"9"}, "msDS-PasswordReversibleEncryptionEnabled": {"FALSE"},
			"msDS-PasswordHistoryLength": {"0"}, "msDS-PasswordComplexityEnabled": {"FALSE"}, "msDS-MinimumPasswordLength": {"1"},
			"msDS-MinimumPasswordAge": {"0"}, "msDS-MaximumPasswordAge": {"-9223372036854775808"}, "msDS-LockoutThreshold": {"2"},
			"msDS-LockoutObservationWindow": {"-6000000000"}, "msDS-LockoutDuration": {"-6000000000"},
			"msDS-PSOAppliesTo": {f.dn("locked")}})
		t.Cleanup(func() { f.dc.DialAdmin(t).Del(goldap.NewDelRequest(pso, nil)) })
		f.modify(t, f.dn("locked"), func(m *goldap.ModifyRequest) {
			m.Replace("unicodePwd", []string{utf16Password("Feed-Passw0rd!1")})
			m.Replace("userAccountControl", []string{"512"})
		})
		primed(t, both, "feed-admin", c1, nested)
		for range 3 {
			c, err := goldap.DialURL(f.dc.URL, goldap.DialWithTLSConfig(f.dc.TLSConfig()))
			if err != nil {
				t.Fatal(err)
			}
			_ = c.Bind(f.dn("locked"), "wrong")
			c.Close()
		}
		f.has(t, "locked", both, c1, nested, f.guids["locked"], true, func(o dirgate.Object) bool {
			return o.AccountStatus != nil && o.AccountStatus.IsLocked
		})
	})
	t.Run("caller removed from the group that grants its rights", func(t *testing.T) {
		for _, b := range both {
			if objs, _, code := listing(t, b, "feed-caller", g, ""); code != http.StatusOK || len(objs) == 0 {
				t.Fatalf("the caller sees nothing before: %d, %d objects", code, len(objs))
			}
		}
		f.modify(t, f.dn("rights"), func(m *goldap.ModifyRequest) { m.Delete("member", []string{f.dn("caller")}) })
		eventually(t, "caller's rights", both, func(b string) (bool, string) {
			objs, _, code := listing(t, b, "feed-caller", g, "")
			return code != http.StatusOK || len(objs) == 0, fmt.Sprintf("%d, %d objects", code, len(objs))
		})
	})
	t.Run("forced resync", func(t *testing.T) {
		primed(t, both, "feed-admin", g, "")
		leader := ma
		if !ma.feed.Leader() {
			leader = mb
		}
		leader.feed.Resync()
		eventually(t, "resync counted", []string{metricsURL(leader)}, func(u string) (bool, string) {
			r := call(t, "GET", u, "")
			return strings.Contains(string(r.body), `dirgate_changefeed_resyncs_total{reason="forced"} 1`), "not counted"
		})
		if _, st, _ := listing(t, a, "feed-admin", g, ""); st != "miss" {
			t.Fatalf("after a resync the listing was a %s", st)
		}
	})
	t.Run("readiness and metrics", func(t *testing.T) {
		for _, m := range []*Main{ma, mb} {
			root := "http://" + m.Addr()
			r := call(t, "GET", root+"/readyz", "")
			if r.status != http.StatusOK || !strings.Contains(string(r.body), `"changefeed":"deletions are not visible`) {
				t.Fatalf("/readyz: %d %s", r.status, r.body)
			}
			lead := "0"
			if m.feed.Leader() {
				lead = "1"
			}
			r = call(t, "GET", metricsURL(m), "")
			for _, want := range []string{"dirgate_changefeed_leader " + lead, "dirgate_changefeed_lag_seconds"} {
				if !strings.Contains(string(r.body), want) {
					t.Errorf("/metrics lacks %s", want)
				}
			}
			if lead == "1" && !strings.Contains(string(r.body), `dirgate_changefeed_changes_total{kind="group"}`) {
				t.Errorf("the leader's /metrics lacks the changes it read")
			}
		}
		if ma.feed.Leader() == mb.feed.Leader() {
			t.Fatal("not exactly one reader")
		}
	})
	t.Run("reader killed: the other takes over, nothing missed", func(t *testing.T) {
		leader, other, otherBase := ma, mb, b
		if !ma.feed.Leader() {
			leader, other, otherBase = mb, ma, a
		}
		primed(t, []string{otherBase}, "feed-admin", g, "")
		leader.Close()
		// Changed while nobody reads: the next reader continues from the stored position.
		f.modify(t, g, func(m *goldap.ModifyRequest) { m.Add("member", []string{f.dn("u1")}) })
		f.has(t, "u1 added back after the reader died", []string{otherBase}, g, "", f.guids["u1"], true, nil)
		if !other.feed.Leader() {
			t.Fatal("the surviving instance did not take the lease")
		}
	})
}

// TestChangeFeedOffLDAP: with the feed off, a change made in the directory shows
// once the cache TTL has passed, as documented.
func TestChangeFeedOffLDAP(t *testing.T) {
	f := newFeedFixture(t)
	m, base := startFeedInstance(t, f, f.dc.BindDN, f.dc.Password, "--changefeed=false", "--cache-ttl", "5s", "--cache-ttl-jitter", "0")
	if m.feed != nil {
		t.Fatal("--changefeed=false started a feed")
	}
	g := f.dn("g")
	primed(t, []string{base}, "feed-admin", g, "")
	f.modify(t, g, func(m *goldap.ModifyRequest) { m.Add("member", []string{f.dn("u3")}) })
	// Still the cached answer right after the change (and this is what the feed fixes)...
	if objs, st, _ := listing(t, base, "feed-admin", g, ""); st != "hit" {
		t.Fatalf("expected the cached listing, got %s", st)
	} else if _, found := findDN(objs, f.guids["u3"]); found {
		t.Fatal("the change showed at once without a feed: the test proves nothing")
	}
	// ...and the new one after the TTL.
	f.has(t, "u3 added, after the TTL", []string{base}, g, "", f.guids["u3"], true, nil)
}

// TestChangeFeedDeletionsLDAP runs bound as the administrator, who may read deleted
// objects (docs/operations.md): a deleted member leaves the cached listings of both
// instances.
func TestChangeFeedDeletionsLDAP(t *testing.T) {
	f := newFeedFixture(t)
	rs := redistest.Start(t)
	_, a := startFeedInstance(t, f, f.dc.AdminDN, f.dc.AdminPassword, withRedis(t, rs.Addr())...)
	_, b := startFeedInstance(t, f, f.dc.AdminDN, f.dc.AdminPassword, withRedis(t, rs.Addr())...)
	both := []string{a, b}
	c1 := f.dn("c1")
	const nested = "&includeIndirect=true"
	primed(t, both, "feed-admin", c1, nested)
	if err := f.adm.Del(goldap.NewDelRequest(f.dn("u2"), nil)); err != nil {
		t.Fatal(err)
	}
	f.has(t, "u2 deleted", both, c1, nested, f.guids["u2"], false, nil)
	// A deleted group: its old name no longer resolves.
	primed(t, both, "feed-admin", f.dn("g"), "")
	if err := f.adm.Del(goldap.NewDelRequest(f.dn("g"), nil)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "g deleted", both, func(b string) (bool, string) {
		_, st, code := listing(t, b, "feed-admin", f.dn("g"), "")
		return code == http.StatusNotFound, fmt.Sprintf("%d %s", code, st)
	})
}

// TestChangeFeedMemoryLDIF: the memory upstream watches its LDIF file; an edit shows
// in cached listings without a restart.
func TestChangeFeedMemoryLDIF(t *testing.T) {
	demo, err := os.ReadFile("../../upstream/memory/demo.ldif")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ldif, tokens := filepath.Join(dir, "dir.ldif"), filepath.Join(dir, "tokens.yaml")
	os.WriteFile(ldif, demo, 0o644)
	os.WriteFile(tokens, []byte("- token: "+adminTok+"\n  subject: CN=Dana Admin,OU=IT,OU=Staff,DC=corp,DC=example,DC=com\n"), 0o600)
	cfg, err := LoadConfig([]string{"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--log-level", "error", "--memory-ldif", ldif, "--tokens-file", tokens,
		"--decision-log", "off"}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	m := NewMain(cfg, io.Discard, io.Discard)
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	base := "http://" + m.Addr() + "/restApi/api/directoryObjects/groupMembers"
	primed(t, []string{base}, adminTok, helpDesk, "")
	hugoLine := "member: " + hugo + "\n"
	if !strings.Contains(string(demo), hugoLine) {
		t.Fatal("the demo changed: Hugo is no longer a member of Help Desk")
	}
	tmp := ldif + ".new"
	os.WriteFile(tmp, []byte(strings.Replace(string(demo), hugoLine, "", 1)), 0o644)
	if err := os.Rename(tmp, ldif); err != nil {
		t.Fatal(err)
	}
	eventually(t, "Hugo removed from Help Desk in the file", []string{base}, func(b string) (bool, string) {
		objs, st, code := listing(t, b, adminTok, helpDesk, "")
		for _, o := range objs {
			if strings.EqualFold(o.DN, hugo) {
				return false, st
			}
		}
		return code == http.StatusOK, fmt.Sprintf("%d %s", code, st)
	})
}
