package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/test/harness/sambatest"
	goldap "github.com/go-ldap/ldap/v3"
)

// lapsAttribute is Microsoft's legacy LAPS schema extension's attribute, as its
// Update-AdmPwdADSchema adds it: searchFlags 904 includes CONFIDENTIAL (0x80).
const lapsAttribute = `dn: CN=ms-Mcs-AdmPwd,%[1]s
changetype: add
objectClass: top
objectClass: attributeSchema
cn: ms-Mcs-AdmPwd
attributeID: 1.2.840.113556.1.8000.2554.50051.45980.28112.18903.35903.6685103.1224907.2.1
attributeSyntax: 2.5.5.5
oMSyntax: 19
isSingleValued: TRUE
searchFlags: 904
lDAPDisplayName: ms-Mcs-AdmPwd
adminDisplayName: ms-Mcs-AdmPwd
adminDescription: Stores password of local Administrator account on workstation
systemOnly: FALSE

dn: CN=Computer,%[1]s
changetype: modify
add: mayContain
mayContain: ms-Mcs-AdmPwd
-
`

// addSchemaLocally applies an LDIF to the harness DC's own database with schema
// updates allowed, for Samba, which refuses schema changes over LDAP unless its
// configuration says "dsdb:schema update allowed" (the harness's does not, and the
// shared DC is not reconfigured). The running DC then reloads its schema
// (ensureLAPSSchema).
const addSchemaLocally = `
import sys
from samba.auth import system_session
from samba.param import LoadParm
from samba.samdb import SamDB
lp = LoadParm()
lp.load(sys.argv[1])
lp.set("dsdb:schema update allowed", "true")
db = SamDB(url=sys.argv[2], session_info=system_session(), lp=lp)
db.modify_ldif(sys.stdin.read())
`

// ensureLAPSSchema adds the legacy LAPS attribute to the DC's schema unless it is
// there: over LDAP as the administrator (AD, or a Samba configured to allow schema
// updates), or else in the harness DC's database (DIRGATE_TEST_SAMBA_DIR).
func ensureLAPSSchema(t *testing.T, dc sambatest.DC) {
	t.Helper()
	admin := dc.DialAdmin(t)
	schemaNC := "CN=Schema,CN=Configuration," + dc.BaseDN
	res, err := admin.Search(goldap.NewSearchRequest(schemaNC, goldap.ScopeSingleLevel, goldap.NeverDerefAliases, 0, 0, false,
		"(lDAPDisplayName=ms-Mcs-AdmPwd)", []string{"searchFlags"}, nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Entries) > 0 {
		return
	}
	ldif := fmt.Sprintf(lapsAttribute, schemaNC)
	cmd := exec.Command("ldapmodify", "-H", dc.URL, "-D", dc.AdminDN, "-y", writeSecret(t, dc.AdminPassword))
	cmd.Env = append(os.Environ(), "LDAPTLS_CACERT="+dc.CAFile)
	cmd.Stdin = strings.NewReader(ldif)
	out, err := cmd.CombinedOutput()
	if err == nil {
		return
	}
	dir := os.Getenv("DIRGATE_TEST_SAMBA_DIR")
	if !strings.Contains(string(out), "Unwilling") && !strings.Contains(string(out), "(53)") || dir == "" {
		t.Fatalf("add the LAPS schema attribute: %v: %s", err, out)
	}
	t.Logf("the DC refuses schema updates over LDAP (%s); adding it to the harness DC's database", strings.TrimSpace(string(out)))
	py := exec.Command("/usr/bin/python3", "-c", addSchemaLocally, filepath.Join(dir, "dc/etc/smb.conf"), filepath.Join(dir, "dc/private/sam.ldb"))
	py.Stdin = strings.NewReader(ldif)
	if out, err := py.CombinedOutput(); err != nil {
		t.Fatalf("add the LAPS schema attribute locally: %v: %s", err, out)
	}
	// Samba was measured to use the new attribute at its next request (it checks the
	// schema's sequence number); it is also told to reload its schema on the rootDSE
	// (allowed to the administrator whether or not schema updates are), so that a DC
	// that would notice later uses it at once.
	reload := goldap.NewModifyRequest("", nil)
	reload.Add("schemaUpdateNow", []string{"1"})
	if err := admin.Modify(reload); err != nil {
		t.Fatalf("reload the DC's schema: %v", err)
	}
}

func writeSecret(t *testing.T, s string) string {
	p := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLAPSWithheldOnSamba reproduces a security review's finding on the DC: the help desk,
// allowed by the bundled policy to view a computer of OU=Workstations, read its LAPS
// password with properties=ms-Mcs-AdmPwd. The schema marks it confidential and the
// built-in list names it: only the directory admins' role, which names it, reads it.
func TestLAPSWithheldOnSamba(t *testing.T) {
	dc := sambatest.Env(t)
	ensureLAPSSchema(t, dc)
	admin := dc.DialAdmin(t)
	name := fmt.Sprintf("LAPS%d", time.Now().UnixNano()%1e9)
	computer := "CN=" + name + "," + fixture.WorkstationsOU
	secret := "Laps-" + name
	_ = admin.Del(goldap.NewDelRequest(computer, nil))
	add := goldap.NewAddRequest(computer, nil)
	add.Attribute("objectClass", []string{"top", "computer"})
	add.Attribute("sAMAccountName", []string{name + "$"})
	add.Attribute("userAccountControl", []string{"4096"})
	var err error
	for try := 0; try < 50; try++ { // the DC reloads its schema when it notices the change
		add.Attributes = slices.DeleteFunc(add.Attributes, func(a goldap.Attribute) bool { return a.Type == "ms-Mcs-AdmPwd" })
		add.Attribute("ms-Mcs-AdmPwd", []string{secret})
		if err = admin.Add(add); err == nil || !goldap.IsErrorWithCode(err, goldap.LDAPResultObjectClassViolation) &&
			!goldap.IsErrorWithCode(err, goldap.LDAPResultUndefinedAttributeType) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("create %s: %v", computer, err)
	}
	t.Cleanup(func() {
		c := dc.DialAdmin(t)
		if err := c.Del(goldap.NewDelRequest(computer, nil)); err != nil {
			t.Errorf("delete %s: %v", computer, err)
		}
	})
	group := dc.TempGroup(t, "laps-"+name, computer)

	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.yaml")
	os.WriteFile(tokens, []byte("- token: e2e-admin\n  subject: "+fixture.DemoAdminDN+"\n- token: e2e-helpdesk\n  subject: "+fixture.DemoHelpdeskDN+"\n"), 0o600)
	dlog := filepath.Join(dir, "decisions.log")
	// The help desk views the groups of OU=Groups, as the demo's it-department-groups
	// lets it by a SID Samba does not have: it may list the test's group.
	policy := policyViewingGroups(t, fixture.GroupsOU, fixture.HelpDeskDN)
	cfg, err := LoadConfig([]string{"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--log-level", "error", "--upstream", "ldap",
		"--ldap-url", dc.URL, "--ldap-bind-dn", dc.BindDN, "--ldap-password-file", writeSecret(t, dc.Password), "--ldap-base-dn", dc.BaseDN,
		"--ldap-ca-file", dc.CAFile, "--tokens-file", tokens, "--policy-dir", policy, "--decision-log", dlog, "--log-flush", "0"},
		func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	m := NewMain(cfg, io.Discard, io.Discard)
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if m.schema == nil || !m.schema.NamedOnlyProperties()["ms-mcs-admpwd"] {
		t.Errorf("the schema's confidential attributes do not include ms-mcs-admpwd: %v", m.schema)
	}
	base := "http://" + m.Addr() + "/restApi/api/directoryObjects/groupMembers"
	const props = "&properties=ms-Mcs-AdmPwd,description"
	for range 2 { // the second time from the cache
		objs := listAs(t, base, "e2e-admin", group, props)
		if len(objs) != 1 || !slices.Equal(objs[0].Properties["ms-mcs-admpwd"], []string{secret}) {
			t.Fatalf("the directory admins (whose role names ms-Mcs-AdmPwd) read %+v, want the password", objs)
		}
		objs = listAs(t, base, "e2e-helpdesk", group, props)
		if len(objs) != 1 {
			t.Fatalf("the help desk does not view the computer: %+v", objs)
		}
		if v, ok := objs[0].Properties["ms-mcs-admpwd"]; ok {
			t.Errorf("the help desk reads the LAPS password: %v", v)
		}
		if _, ok := objs[0].Properties["description"]; !ok {
			t.Errorf("the help desk lost description: %v", objs[0].Properties)
		}
	}
	b, err := os.ReadFile(dlog)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"withheldProperties":["ms-mcs-admpwd"]`) {
		t.Errorf("no decision line names the withheld property:\n%s", b)
	}
}
