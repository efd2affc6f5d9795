package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestLAPSWithheldOnMemoryUpstream reproduces a security review's finding on the memory
// upstream, through the cache and the shared bodies: the help desk, allowed to
// view WS-0001, read its LAPS password with properties=ms-Mcs-AdmPwd. The built-in
// secret list withholds it; the directory admins' role names it.
func TestLAPSWithheldOnMemoryUpstream(t *testing.T) {
	const ws = "CN=WS-0001,OU=Workstations,DC=corp,DC=example,DC=com"
	base := startDemoWithAttribute(t, ws, "ms-Mcs-AdmPwd: Laps-Secret-1")
	const mixed = "CN=Mixed Members,OU=Groups,DC=corp,DC=example,DC=com"
	for _, extra := range []string{"&properties=ms-Mcs-AdmPwd", "&properties=ms-Mcs-AdmPwd,description&sizeLimit=3"} {
		for range 2 { // the second time from the cache
			var seen bool
			for _, o := range listAs(t, base, adminTok, mixed, extra) {
				if o.DN == ws {
					seen = slices.Equal(o.Properties["ms-mcs-admpwd"], []string{"Laps-Secret-1"})
				}
			}
			if !seen && !strings.Contains(extra, "sizeLimit") { // WS-0001 is the admin's fifth
				t.Errorf("%s: the directory admins do not read WS-0001's LAPS password", extra)
			}
			r := call(t, "GET", base+"?group=CN%3DMixed%20Members%2COU%3DGroups%2CDC%3Dcorp%2CDC%3Dexample%2CDC%3Dcom"+extra, "demo-helpdesk")
			if r.status != 200 || !strings.Contains(string(r.body), "WS-0001") {
				t.Fatalf("%s: the help desk's listing: %d %s", extra, r.status, r.body)
			}
			if strings.Contains(string(r.body), "Laps-Secret-1") {
				t.Errorf("%s: the help desk reads the LAPS password: %s", extra, r.body)
			}
		}
	}
}

// startDemoWithAttribute serves the demo directory with line (an LDIF attribute
// line) added to the entry dn, and tokens for the directory admin (adminTok) and
// the help desk (demo-helpdesk), on the memory upstream through the cache; it
// returns the groupMembers URL.
func startDemoWithAttribute(t *testing.T, dn, line string) string {
	t.Helper()
	demo, err := os.ReadFile("../../upstream/memory/demo.ldif")
	if err != nil {
		t.Fatal(err)
	}
	anchor := "dn: " + dn + "\n"
	if !strings.Contains(string(demo), anchor) {
		t.Fatalf("the demo changed: no %s", dn)
	}
	dir := t.TempDir()
	ldif, tokens := filepath.Join(dir, "dir.ldif"), filepath.Join(dir, "tokens.yaml")
	if err := os.WriteFile(ldif, []byte(strings.Replace(string(demo), anchor, anchor+line+"\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokens, []byte("- token: "+adminTok+"\n  subject: CN=Dana Admin,OU=IT,OU=Staff,DC=corp,DC=example,DC=com\n"+
		"- token: demo-helpdesk\n  subject: "+hugo+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := startMain(t, nil, "--memory-ldif", ldif, "--tokens-file", tokens, "--decision-log", "off")
	return "http://" + m.Addr() + "/restApi/api/directoryObjects/groupMembers"
}
