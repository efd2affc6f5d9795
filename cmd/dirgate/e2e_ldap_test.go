package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/test/fixture"
	"github.com/dirgate/dirgate/test/sambatest"
	goldap "github.com/go-ldap/ldap/v3"
)

// startLDAP runs the real program against the harness's Samba AD DC, with a tokens
// file whose one token acts as the fixture's administrator.
func startLDAP(t *testing.T, dc sambatest.DC, extra ...string) string {
	t.Helper()
	dir := t.TempDir()
	pw := filepath.Join(dir, "password")
	tokens := filepath.Join(dir, "tokens.yaml")
	os.WriteFile(pw, []byte(dc.Password), 0o600)
	os.WriteFile(tokens, []byte("- token: e2e-admin\n  subject: "+fixture.DemoAdminDN+"\n"), 0o600)
	cfg, err := LoadConfig(append([]string{"--listen", "127.0.0.1:0", "--log-level", "error", "--upstream", "ldap",
		"--ldap-url", dc.URL, "--ldap-bind-dn", dc.BindDN, "--ldap-password-file", pw, "--ldap-base-dn", dc.BaseDN,
		"--ldap-ca-file", dc.CAFile, "--tokens-file", tokens}, extra...), func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	m := NewMain(cfg, io.Discard, io.Discard)
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return "http://" + m.Addr() + "/restApi/api/directoryObjects/groupMembers"
}

// ldapsearchDNs runs the ldapsearch CLI, as an operator would, and returns the DNs it
// prints: the values of attr when attr is set, otherwise the entries' own DNs.
func ldapsearchDNs(t *testing.T, dc sambatest.DC, base, scope, filter, attr string) []string {
	t.Helper()
	pw := filepath.Join(t.TempDir(), "pw")
	os.WriteFile(pw, []byte(dc.AdminPassword), 0o600)
	args := []string{"-LLL", "-o", "ldif-wrap=no", "-E", "pr=1000/noprompt", "-H", dc.URL, "-D", dc.AdminDN, "-y", pw,
		"-b", base, "-s", scope, filter}
	if attr != "" {
		args = append(args, attr)
	} else {
		args = append(args, "1.1")
	}
	cmd := exec.Command("ldapsearch", args...)
	cmd.Env = append(os.Environ(), "LDAPTLS_CACERT="+dc.CAFile)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ldapsearch %v: %v", args, err)
	}
	key := "dn"
	if attr != "" {
		key = attr
	}
	var dns []string
	for _, line := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(line, key+": "):
			dns = append(dns, strings.TrimPrefix(line, key+": "))
		case strings.HasPrefix(line, key+":: "):
			b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(line, key+":: "))
			if err != nil {
				t.Fatal(err)
			}
			dns = append(dns, string(b))
		}
	}
	return dns
}

func keys(t *testing.T, dns []string) []string {
	out := make([]string, 0, len(dns))
	for _, s := range dns {
		d, err := dirgate.ParseDN(s)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		out = append(out, d.Key())
	}
	sort.Strings(out)
	return out
}

func sameSet(t *testing.T, what string, got, want []string) {
	t.Helper()
	g, w := keys(t, got), keys(t, want)
	if strings.Join(g, "\n") != strings.Join(w, "\n") {
		t.Fatalf("%s: dirgate listed %d objects, ldapsearch %d; they differ", what, len(g), len(w))
	}
}

func TestEndToEndLDAP(t *testing.T) {
	dc := sambatest.Env(t)
	if dc.FixtureDir == "" {
		t.Fatal("the DC was started without the project fixture (test/samba/dc.sh seeds it when present)")
	}
	base := startLDAP(t, dc)

	// Direct listing of a group beyond AD's 1,500-value range equals its member values.
	got := listAs(t, base, "e2e-admin", fixture.AllStaffDN, "")
	sameSet(t, "All Staff, direct", dns(got), ldapsearchDNs(t, dc, fixture.AllStaffDN, "base", "(objectClass=*)", "member"))

	// Indirect listing equals the in-chain matching rule's answer (minus the group
	// itself, which the rule returns when a cycle leads back to it).
	got = listAs(t, base, "e2e-admin", fixture.ITDepartmentDN, "&includeIndirect=true")
	chain := ldapsearchDNs(t, dc, dc.BaseDN, "sub", "(memberOf:1.2.840.113556.1.4.1941:="+goldap.EscapeFilter(fixture.ITDepartmentDN)+")", "")
	var want []string
	for _, d := range chain {
		if !strings.EqualFold(d, fixture.ITDepartmentDN) {
			want = append(want, d)
		}
	}
	sameSet(t, "IT Department, indirect", dns(got), want)

	// The in-chain option gives the same listing as the breadth-first expansion.
	inChain := startLDAP(t, dc, "--ldap-in-chain")
	sameSet(t, "IT Department, indirect, in-chain", dns(listAs(t, inChain, "e2e-admin", fixture.ITDepartmentDN, "&includeIndirect=true")), dns(got))

	// sizeLimit applies over LDAP too (Samba ignores the protocol's size limit).
	if first := listAs(t, base, "e2e-admin", fixture.AllStaffDN, "&sizeLimit=3"); len(first) != 3 {
		t.Fatalf("sizeLimit=3 gave %d objects", len(first))
	}

	// The same group by GUID and SID lists the same objects as by DN.
	group := listAs(t, base, "e2e-admin", fixture.ITSupportDN, "")
	var itSupport dirgate.Object
	for _, o := range listAs(t, base, "e2e-admin", fixture.ITDepartmentDN, "&properties=objectSid") {
		if strings.EqualFold(o.DN, fixture.ITSupportDN) {
			itSupport = o
		}
	}
	if itSupport.GUID == "" || len(itSupport.Properties["objectsid"]) != 1 {
		t.Fatalf("IT Support not listed in IT Department with its SID")
	}
	for _, form := range []string{strings.ToUpper(itSupport.GUID), itSupport.Properties["objectsid"][0]} {
		sameSet(t, "IT Support by "+form, dns(listAs(t, base, "e2e-admin", form, "")), dns(group))
	}

	// Removal over HTTP changes the directory; a second removal changes nothing.
	admin := dc.DialAdmin(t)
	groupDN := fmt.Sprintf("CN=dirgate e2e %d,OU=Groups,%s", os.Getpid(), dc.BaseDN)
	add := goldap.NewAddRequest(groupDN, nil)
	add.Attribute("objectClass", []string{"top", "group"})
	add.Attribute("member", []string{fixture.RegularDN, fixture.NeverExpiresDN})
	if err := admin.Add(add); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Del(goldap.NewDelRequest(groupDN, nil)) })
	del := base + "?group=" + url.QueryEscape(groupDN) + "&member=" + url.QueryEscape(fixture.RegularDN)
	for i, wantNoChanges := range []bool{false, true} {
		r := call(t, "DELETE", del, "e2e-admin")
		var res dirgate.OperationResult
		if err := json.Unmarshal(r.body, &res); err != nil || r.status != 200 || res.ResultType != 0 || res.NoChanges != wantNoChanges {
			t.Fatalf("DELETE #%d: %d %s", i+1, r.status, r.body)
		}
	}
	sameSet(t, "after removal", ldapsearchDNs(t, dc, groupDN, "base", "(objectClass=*)", "member"), []string{fixture.NeverExpiresDN})
}
