package main

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/ldapentry"
	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/test/harness/sambatest"
	goldap "github.com/go-ldap/ldap/v3"
)

// dnProbe are the requested properties of the DN-valued tests: attributes naming
// other objects by DN, by name and by OID (memberOf's), and by SID, security
// descriptor or RID (a computer's creator, the object's ACL, the primary group's
// RID), secrets named by OID (userPKCS12's and unicodePwd's), userPKCS12 by name,
// and one public attribute.
const dnProbe = "&properties=memberOf,manager,directReports,managedBy,member,description,userPKCS12," +
	"1.2.840.113556.1.2.102,2.16.840.1.113730.3.1.216,1.2.840.113556.1.4.90," +
	"mS-DS-CreatorSID,nTSecurityDescriptor,primaryGroupID"

// namedOnlyKeys are the lower-cased keys of dnProbe that only a policy naming them
// returns.
var namedOnlyKeys = []string{"memberof", "manager", "directreports", "managedby", "member", "userpkcs12",
	"1.2.840.113556.1.2.102", "2.16.840.1.113730.3.1.216", "1.2.840.113556.1.4.90",
	"ms-ds-creatorsid", "ntsecuritydescriptor", "primarygroupid"}

// TestDNPropertiesFollowViewOnMemoryUpstream: the help desk, which views the members
// of All Staff but not CN=Domain Users (a group outside its scopes, which answers it
// 404), read Paula Primary's memberOf naming Domain Users. Attributes whose values
// name other objects are returned only to a policy that names them: the directory
// admins' role does, the help desk's does not. Names given by OID and userPKCS12 (a
// private key) are withheld as well. Twice: the second answer comes from the cache.
func TestDNPropertiesFollowViewOnMemoryUpstream(t *testing.T) {
	const paula = "CN=Paula Primary,OU=Finance,OU=Staff,DC=corp,DC=example,DC=com"
	const allStaff = "CN=All Staff,OU=Groups,DC=corp,DC=example,DC=com"
	const domainUsers = "CN=Domain Users,CN=Users,DC=corp,DC=example,DC=com"
	demo, err := os.ReadFile("../../upstream/memory/demo.ldif")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(demo), "dn: "+paula+"\n") || !strings.Contains(string(demo), "memberOf: "+domainUsers+"\n") {
		t.Fatal("the demo changed: no Paula Primary in Domain Users")
	}
	base := startDemoWithAttribute(t, paula, "userPKCS12: PFX-Private-Key-1")
	if r := call(t, "GET", base+"?group="+url.QueryEscape(domainUsers), "demo-helpdesk"); r.status != 404 {
		t.Fatalf("the help desk may view Domain Users (%d): the test needs a group hidden from it", r.status)
	}
	for range 2 {
		r := call(t, "GET", base+"?group="+url.QueryEscape(allStaff)+dnProbe, "demo-helpdesk")
		if r.status != 200 || !strings.Contains(string(r.body), paula) {
			t.Fatalf("the help desk's listing of All Staff: %d %.300s", r.status, r.body)
		}
		for _, leak := range []string{"Domain Users", "PFX-Private-Key-1"} {
			if strings.Contains(string(r.body), leak) {
				t.Errorf("the help desk reads %q", leak)
			}
		}
		read := map[string]string{} // property: the first object the help desk reads it of
		for _, o := range listAs(t, base, "demo-helpdesk", allStaff, dnProbe) {
			for _, k := range namedOnlyKeys {
				if _, ok := o.Properties[k]; ok && read[k] == "" {
					read[k] = o.DN
				}
			}
			if _, ok := o.Properties["description"]; !ok {
				t.Errorf("the help desk lost description of %s: %v", o.DN, o.Properties)
			}
		}
		for _, k := range namedOnlyKeys {
			if read[k] != "" {
				t.Errorf("the help desk reads %s (of %s, and maybe others)", k, read[k])
			}
		}
		var seen bool
		for _, o := range listAs(t, base, adminTok, allStaff, dnProbe) {
			if o.DN == paula {
				seen = slices.Contains(o.Properties["memberof"], domainUsers)
			}
		}
		if !seen {
			t.Errorf("the directory admins (whose role names memberOf) do not read Paula's memberOf")
		}
	}
}

// TestDNPropertiesOnSamba: on the DC, the schema's attributes naming objects (by DN,
// SID or security descriptor) are read with its confidential ones, and the help
// desk, which views a user of OU=Staff and a computer of OU=Workstations, no longer
// reads the user's memberOf naming a group of CN=Users, its manager
// (CN=Administrator), its primaryGroupID (the RID of Domain Users), nor the
// computer's mS-DS-CreatorSID (CN=Administrator, who joined it) or
// nTSecurityDescriptor, objects it may not view; nor userPKCS12,
// by name or by OID. The directory admins' role names memberOf, manager,
// primaryGroupID and mS-DS-CreatorSID and reads them.
func TestDNPropertiesOnSamba(t *testing.T) {
	dc := sambatest.Env(t)
	admin := dc.DialAdmin(t)
	suffix := fmt.Sprintf("%d", time.Now().UnixNano()%1e9)
	user := "CN=DN Probe " + suffix + "," + fixture.ITOU
	hiddenGroup := "CN=dn-hidden-" + suffix + ",CN=Users," + dc.BaseDN
	const pfx = "PFX-Private-Key-2"
	add := goldap.NewAddRequest(user, nil)
	add.Attribute("objectClass", []string{"top", "person", "organizationalPerson", "user"})
	add.Attribute("sAMAccountName", []string{"dnprobe" + suffix})
	add.Attribute("userAccountControl", []string{"514"})
	add.Attribute("manager", []string{dc.AdminDN})
	add.Attribute("userPKCS12", []string{pfx})
	if err := admin.Add(add); err != nil {
		t.Fatalf("create %s: %v", user, err)
	}
	t.Cleanup(func() {
		c := dc.DialAdmin(t)
		for _, dn := range []string{hiddenGroup, user} {
			if err := c.Del(goldap.NewDelRequest(dn, nil)); err != nil {
				t.Errorf("delete %s: %v", dn, err)
			}
		}
	})
	hidden := goldap.NewAddRequest(hiddenGroup, nil)
	hidden.Attribute("objectClass", []string{"top", "group"})
	hidden.Attribute("member", []string{user})
	if err := admin.Add(hidden); err != nil {
		t.Fatalf("create %s: %v", hiddenGroup, err)
	}
	computer, creatorSID := joinedComputer(t, dc, suffix)
	group := dc.TempGroup(t, "dn-probe-"+suffix, user, computer)

	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.yaml")
	os.WriteFile(tokens, []byte("- token: e2e-admin\n  subject: "+fixture.DemoAdminDN+"\n- token: e2e-helpdesk\n  subject: "+fixture.DemoHelpdeskDN+"\n"), 0o600)
	m := startMain(t, nil, "--upstream", "ldap",
		"--ldap-url", dc.URL, "--ldap-bind-dn", dc.BindDN, "--ldap-password-file", writeSecret(t, dc.Password), "--ldap-base-dn", dc.BaseDN,
		"--ldap-ca-file", dc.CAFile, "--tokens-file", tokens, "--policy-dir", policyViewingGroups(t, fixture.GroupsOU, fixture.HelpDeskDN),
		"--decision-log", "off")

	schema, ok := m.schema.(interface{ DNAttributes() map[string]bool })
	if !ok {
		t.Fatalf("the LDAP upstream reads no DN-valued attributes: %T", m.schema)
	}
	dn := schema.DNAttributes()
	for _, a := range []string{"member", "memberof", "manager", "directreports", "managedby", "msds-revealedusers", "msds-revealedlist",
		"ms-ds-creatorsid", "tokengroups", "ntsecuritydescriptor", "msds-allowedtoactonbehalfofotheridentity", "msds-groupmsamembership"} {
		if !dn[a] || !m.schema.NamedOnlyProperties()[a] {
			t.Errorf("%s is not among the schema's attributes naming objects", a)
		}
	}
	for _, a := range []string{"distinguishedname", "objectcategory", "objectsid", "sidhistory"} {
		if dn[a] {
			t.Errorf("%s is among the attributes naming objects \"*\" leaves out", a)
		}
	}
	t.Logf("the schema has %d attributes naming objects that \"*\" leaves out", len(dn))

	base := "http://" + m.Addr() + "/restApi/api/directoryObjects/groupMembers"
	if r := call(t, "GET", base+"?group="+url.QueryEscape(hiddenGroup), "e2e-helpdesk"); r.status != 404 {
		t.Fatalf("the help desk may view %s (%d): the test needs a group hidden from it", hiddenGroup, r.status)
	}
	for range 2 { // the second time from the cache
		r := call(t, "GET", base+"?group="+url.QueryEscape(group)+dnProbe, "e2e-helpdesk")
		if r.status != 200 || !strings.Contains(string(r.body), "DN Probe") || !strings.Contains(string(r.body), computer) {
			t.Fatalf("the help desk's listing: %d %.300s", r.status, r.body)
		}
		for _, leak := range []string{"dn-hidden-", "CN=Administrator", pfx} {
			if strings.Contains(string(r.body), leak) {
				t.Errorf("the help desk reads %q", leak)
			}
		}
		for _, o := range listAs(t, base, "e2e-helpdesk", group, dnProbe) {
			for _, k := range namedOnlyKeys {
				if v, ok := o.Properties[k]; ok {
					t.Errorf("the help desk reads %s of %s: %q", k, o.DN, v)
				}
			}
		}
		byDN := map[string]dirgate.Object{}
		for _, o := range listAs(t, base, "e2e-admin", group, dnProbe) {
			byDN[o.DN] = o
		}
		u, c := byDN[user], byDN[computer]
		if !slices.Contains(u.Properties["memberof"], hiddenGroup) || !slices.Equal(u.Properties["manager"], []string{dc.AdminDN}) ||
			!slices.Equal(u.Properties["primarygroupid"], []string{"513"}) || !slices.Equal(c.Properties["primarygroupid"], []string{"515"}) {
			t.Errorf("the directory admins (whose role names memberOf, manager and primaryGroupID) read %+v", byDN)
		}
		if v := c.Properties["ms-ds-creatorsid"]; len(v) != 1 || v[0] != creatorSID.str && v[0] != creatorSID.b64 {
			t.Errorf("the directory admins (whose role names mS-DS-CreatorSID) read %q of the computer, want %s", v, creatorSID.str)
		}
		for _, k := range []string{"userpkcs12", "ntsecuritydescriptor"} {
			if v, ok := u.Properties[k]; ok {
				t.Errorf("the directory admins, whose role does not name it, read %s: %q", k, v)
			}
		}
	}
}

// sidForms is a SID as a string and as base64 of its binary form: a property of SID
// syntax that dirgate does not render as a SID comes as the latter.
type sidForms struct{ str, b64 string }

// joinedComputer makes a computer of OU=Workstations as one joined to the domain by
// the Administrator (CN=Users, which the help desk may not view): the DC records the
// joiner's SID in mS-DS-CreatorSID (a user joining by the machine account quota
// leaves the same trace; Samba 4.17 refuses that join over LDAP, so the
// administrator writes the attribute). It returns the computer's DN and the joiner's
// SID, and deletes the computer when the test ends.
func joinedComputer(t *testing.T, dc sambatest.DC, suffix string) (string, sidForms) {
	t.Helper()
	admin := dc.DialAdmin(t)
	e, err := admin.Search(goldap.NewSearchRequest(dc.AdminDN, goldap.ScopeBaseObject, goldap.NeverDerefAliases, 0, 0, false,
		"(objectClass=*)", []string{"objectSid"}, nil))
	if err != nil || len(e.Entries) != 1 {
		t.Fatalf("read the objectSid of %s: %v", dc.AdminDN, err)
	}
	raw := e.Entries[0].GetRawAttributeValue("objectSid")
	sid, err := ldapentry.SIDFromBytes(raw)
	if err != nil {
		t.Fatalf("objectSid of %s: %v", dc.AdminDN, err)
	}
	name := "DNPC" + suffix[len(suffix)-6:]
	computer := "CN=" + name + "," + fixture.WorkstationsOU
	_ = admin.Del(goldap.NewDelRequest(computer, nil))
	add := goldap.NewAddRequest(computer, nil)
	add.Attribute("objectClass", []string{"top", "computer"})
	add.Attribute("sAMAccountName", []string{name + "$"})
	add.Attribute("userAccountControl", []string{"4096"})
	add.Attribute("mS-DS-CreatorSID", []string{string(raw)})
	if err := admin.Add(add); err != nil {
		t.Fatalf("create %s: %v", computer, err)
	}
	t.Cleanup(func() {
		c := dc.DialAdmin(t)
		if err := c.Del(goldap.NewDelRequest(computer, nil)); err != nil {
			t.Errorf("delete %s: %v", computer, err)
		}
	})
	return computer, sidForms{sid, base64.StdEncoding.EncodeToString(raw)}
}
