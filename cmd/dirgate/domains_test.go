package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dirgate/dirgate/upstream/ldap"
)

// homeLDAP is a home domain's settings as LoadConfig leaves them.
func homeLDAP() ldap.Config {
	return ldap.Config{URL: "ldaps://dc1.corp.example.com", BindDN: "CN=svc,DC=corp,DC=example,DC=com", PasswordFile: "corp-pw",
		BaseDN: "DC=corp,DC=example,DC=com", CAFile: "corp-ca.pem", PoolSize: 6, RequestTimeout: 7 * time.Second, UseInChain: true}
}

// TestParseDomains: a further domain takes its DCs, base DN, service account and
// CAs from the file and every other setting from the home domain.
func TestParseDomains(t *testing.T) {
	cfgs, err := parseDomains([]byte(`
domains:
  - base-dn: DC=fabrikam,DC=example,DC=net
    url: ldaps://dc1.fabrikam.example.net ldaps://dc2.fabrikam.example.net
    bind-dn: CN=svc,CN=Users,DC=fabrikam,DC=example,DC=net
    password-file: /run/secrets/fabrikam
    ca-file: /etc/dirgate/fabrikam-ca.pem
  # discovered in DNS, a disjoint namespace given both ways
  - base-dn: DC=tailspin,DC=example,DC=org
    domain: tailspin.example.org
    domain-suffixes: [dcs.example.org, other.example.org]
    site: hq
    bind-dn: CN=svc,DC=tailspin,DC=example,DC=org
    password-file: /run/secrets/tailspin
    ca-file: /etc/dirgate/tailspin-ca.pem
  - base-dn: DC=contoso,DC=example,DC=org
    domain: contoso.example.org
    domain-suffixes: dcs.contoso.example, x.example
    bind-dn: CN=svc,DC=contoso,DC=example,DC=org
    password-file: /run/secrets/contoso
    ca-file: /etc/dirgate/contoso-ca.pem
    # a domain across a slow link: its own pool and timeouts
    pool-size: 2
    dial-timeout: 4s
    attempt-timeout: 3s
    timeout: 20s
`), homeLDAP())
	if err != nil {
		t.Fatal(err)
	}
	if len(cfgs) != 3 {
		t.Fatalf("%d domains, want 3", len(cfgs))
	}
	f, ts, c := cfgs[0], cfgs[1], cfgs[2]
	if f.URL != "ldaps://dc1.fabrikam.example.net ldaps://dc2.fabrikam.example.net" || f.Domain != "" ||
		f.BindDN != "CN=svc,CN=Users,DC=fabrikam,DC=example,DC=net" || f.PasswordFile != "/run/secrets/fabrikam" ||
		f.BaseDN != "DC=fabrikam,DC=example,DC=net" || f.CAFile != "/etc/dirgate/fabrikam-ca.pem" {
		t.Errorf("FABRIKAM: %+v", f)
	}
	// The home domain's other settings carry over; its DCs and account do not.
	if f.PoolSize != 6 || f.RequestTimeout != 7*time.Second || !f.UseInChain {
		t.Errorf("FABRIKAM did not take the home domain's other settings: %+v", f)
	}
	if ts.URL != "" || ts.Domain != "tailspin.example.org" || ts.Site != "hq" ||
		!slices.Equal(ts.DomainSuffixes, []string{"dcs.example.org", "other.example.org"}) {
		t.Errorf("TAILSPIN: %+v", ts)
	}
	if !slices.Equal(c.DomainSuffixes, []string{"dcs.contoso.example", "x.example"}) || c.Site != "" {
		t.Errorf("CONTOSO: %+v", c)
	}
	if c.PoolSize != 2 || c.DialTimeout != 4*time.Second || c.AttemptTimeout != 3*time.Second || c.RequestTimeout != 20*time.Second {
		t.Errorf("CONTOSO's own pool and timeouts: %+v", c)
	}
}

// TestParseDomainsRefuses: every problem is reported, each naming the domain
// (by position and line) and its key.
func TestParseDomainsRefuses(t *testing.T) {
	const ok = `    url: ldaps://dc1.fabrikam.example.net
    bind-dn: CN=svc,DC=fabrikam,DC=example,DC=net
    password-file: pw
`
	tests := []struct {
		name string
		file string
		want []string // substrings, each of one error, in order
	}{
		{"empty file", ``, []string{"holds no domains"}},
		{"no domains key", "other: 1\n", []string{`line 1: unknown key "other" (the only key is domains)`}},
		{"not a list", "domains: fabrikam\n", []string{"line 1: domains: want a list of domains"}},
		{"empty list", "domains: []\n", []string{"domains: lists no domain"}},
		{"not YAML", "domains: [\n", []string{"yaml:"}},
		// A typo is not a missing setting, silently.
		{"unknown key", "domains:\n  - base-dn: DC=fabrikam,DC=example,DC=net\n    bind_dn: x\n" + ok,
			[]string{`domains[0] (line 2): line 3: unknown key "bind_dn" (a domain's keys are base-dn, url, domain, domain-suffixes, site, bind-dn, password-file, ca-file, pool-size, dial-timeout, attempt-timeout, timeout)`}},
		{"pool size not a number", "domains:\n  - base-dn: DC=fabrikam,DC=example,DC=net\n    pool-size: four\n" + ok,
			[]string{"domains[0] (line 2): line 3: pool-size: want a whole number"}},
		{"timeout not a duration", "domains:\n  - base-dn: DC=fabrikam,DC=example,DC=net\n    timeout: 20\n" + ok,
			[]string{"domains[0] (line 2): line 3: timeout: want a duration such as 1.5s"}},
		{"pool size out of bounds", "domains:\n  - base-dn: DC=fabrikam,DC=example,DC=net\n    pool-size: 1000\n" + ok,
			[]string{"domains[0] (line 2): pool-size: "}},
		{"key twice", "domains:\n  - base-dn: DC=fabrikam,DC=example,DC=net\n    base-dn: DC=x\n" + ok,
			[]string{`domains[0] (line 2): line 3: base-dn: given twice`}},
		{"domains twice", "domains:\n  - base-dn: DC=fabrikam,DC=example,DC=net\n" + ok + "domains: []\n", []string{"line 6: domains: given twice"}},
		{"not a string", "domains:\n  - base-dn: [DC=fabrikam]\n" + ok, []string{"domains[0] (line 2): line 2: base-dn: want a string"}},
		{"a number", "domains:\n  - base-dn: DC=fabrikam,DC=example,DC=net\n    site: 7\n" + ok, []string{"line 3: site: want a string"}},
		{"not a mapping", "domains:\n  - fabrikam\n", []string{"domains[0] (line 2): want a mapping of base-dn, url"}},
		// Each missing field named by its key; no home domain's value fills it.
		{"missing fields", "domains:\n  - site: hq\n", []string{
			"domains[0] (line 2): base-dn: is required", "domains[0] (line 2): bind-dn: is required",
			"domains[0] (line 2): password-file: is required", "domains[0] (line 2): site: is only used with domain",
			"domains[0] (line 2): url: is required with the ldap upstream, unless domain is set"}},
		{"bad URL", "domains:\n  - base-dn: DC=fabrikam,DC=example,DC=net\n    url: http://dc1\n    bind-dn: CN=svc,DC=fabrikam\n    password-file: pw\n",
			[]string{"domains[0] (line 2): url: "}},
		{"domain without CA file", "domains:\n  - base-dn: DC=fabrikam,DC=example,DC=net\n    domain: fabrikam.example.net\n    bind-dn: CN=svc,DC=fabrikam\n    password-file: pw\n",
			[]string{"domains[0] (line 2): ca-file: is required with domain"}},
		// Each domain is served once.
		{"the home domain again", "domains:\n  - base-dn: dc=CORP,DC=example,DC=com\n" + ok,
			[]string{"domains[0] (line 2): base-dn: dc=CORP,DC=example,DC=com is the base DN of the home domain (ldap-base-dn (DIRGATE_LDAP_BASE_DN))"}},
		{"twice", "domains:\n  - base-dn: DC=fabrikam,DC=example,DC=net\n" + ok + "  - base-dn: dc=Fabrikam,dc=example,dc=net\n" + ok,
			[]string{"domains[1] (line 6): base-dn: dc=Fabrikam,dc=example,dc=net is the base DN of domains[0] (line 2)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseDomains([]byte(tt.file), homeLDAP())
			if err == nil {
				t.Fatalf("accepted, want %q", tt.want)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tt.want) {
				t.Fatalf("errors:\n%s\nwant %d", err, len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.Contains(lines[i], w) {
					t.Errorf("error %d: %q, want it to contain %q", i, lines[i], w)
				}
			}
		})
	}
}

// TestParseDomainsNestedBaseDNs: a child domain of the home domain's forest, whose
// base DN lies below the home domain's, is served beside it, and so is a parent
// domain listed after its child.
func TestParseDomainsNestedBaseDNs(t *testing.T) {
	const ok = `    url: ldaps://dc1.example.com
    bind-dn: CN=svc,DC=example,DC=com
    password-file: pw
`
	cfgs, err := parseDomains([]byte("domains:\n  - base-dn: DC=emea,DC=corp,DC=example,DC=com\n"+ok+
		"  - base-dn: DC=paris,DC=fr,DC=example,DC=net\n"+ok+"  - base-dn: DC=fr,DC=example,DC=net\n"+ok), homeLDAP())
	if err != nil {
		t.Fatal(err)
	}
	var bases []string
	for _, c := range cfgs {
		bases = append(bases, c.BaseDN)
	}
	if w := []string{"DC=emea,DC=corp,DC=example,DC=com", "DC=paris,DC=fr,DC=example,DC=net", "DC=fr,DC=example,DC=net"}; !slices.Equal(bases, w) {
		t.Errorf("base DNs %q, want %q", bases, w)
	}
}

// TestConfigDomainsFile: the setting is checked with the rest of the
// configuration, its errors naming it and the file.
func TestConfigDomainsFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "domains.yaml")
	os.WriteFile(good, []byte("domains:\n  - base-dn: DC=fabrikam,DC=example,DC=net\n    url: ldaps://dc1.fabrikam.example.net\n    bind-dn: CN=svc,DC=fabrikam,DC=example,DC=net\n    password-file: pw\n"), 0o600)
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("domains:\n  - base-dn: DC=fabrikam,DC=example,DC=net\n"), 0o600)
	ldapEnv := map[string]string{"DIRGATE_UPSTREAM": "ldap", "DIRGATE_TOKENS_FILE": "tokens.yaml", "DIRGATE_LDAP_URL": "ldaps://dc1",
		"DIRGATE_LDAP_BIND_DN": "CN=svc,DC=corp", "DIRGATE_LDAP_PASSWORD_FILE": "pw", "DIRGATE_LDAP_BASE_DN": "DC=corp,DC=example,DC=com"}
	c, err := LoadConfig([]string{"--ldap-domains-file", good}, env(ldapEnv), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if c.LDAPDomainsFile != good {
		t.Errorf("ldap-domains-file %q", c.LDAPDomainsFile)
	}
	_, err = LoadConfig([]string{"--ldap-domains-file", bad}, env(ldapEnv), &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "ldap-domains-file (DIRGATE_LDAP_DOMAINS_FILE): "+bad+": domains[0] (line 2): bind-dn: is required") {
		t.Errorf("a domain without its account: %v", err)
	}
	_, err = LoadConfig([]string{"--ldap-domains-file", filepath.Join(dir, "none.yaml")}, env(ldapEnv), &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "ldap-domains-file (DIRGATE_LDAP_DOMAINS_FILE): open ") {
		t.Errorf("a missing file: %v", err)
	}
	_, err = LoadConfig([]string{"--ldap-domains-file", good}, env(nil), &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "ldap-domains-file (DIRGATE_LDAP_DOMAINS_FILE): is only used with the ldap upstream") {
		t.Errorf("with the memory upstream: %v", err)
	}
}
