package main

import (
	"context"
	"io"
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
	demo, err := os.ReadFile("../../upstream/memory/demo.ldif")
	if err != nil {
		t.Fatal(err)
	}
	const ws = "CN=WS-0001,OU=Workstations,DC=corp,DC=example,DC=com"
	anchor := "dn: " + ws + "\n"
	if !strings.Contains(string(demo), anchor) {
		t.Fatal("the demo changed: no WS-0001")
	}
	dir := t.TempDir()
	ldif, tokens := filepath.Join(dir, "dir.ldif"), filepath.Join(dir, "tokens.yaml")
	os.WriteFile(ldif, []byte(strings.Replace(string(demo), anchor, anchor+"ms-Mcs-AdmPwd: Laps-Secret-1\n", 1)), 0o644)
	os.WriteFile(tokens, []byte("- token: "+adminTok+"\n  subject: CN=Dana Admin,OU=IT,OU=Staff,DC=corp,DC=example,DC=com\n"+
		"- token: demo-helpdesk\n  subject: "+hugo+"\n"), 0o600)
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
