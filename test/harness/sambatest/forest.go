package sambatest

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/go-ldap/ldap/v3"
)

// Environment variables of test/harness/samba/forest.sh (STATE_DIR/env; see
// test/harness/samba/README.md, "Two domains with a forest trust"). Each domain's
// own variables are VarForestPrefix + its NetBIOS name + "_" + a ForestVar suffix,
// e.g. DIRGATE_TEST_FOREST_CORP_URL.
const (
	VarForestCAFile     = "DIRGATE_TEST_FOREST_CA_FILE"
	VarForestNamespaces = "DIRGATE_TEST_FOREST_NAMESPACES"
	VarForestDNS        = "DIRGATE_TEST_FOREST_DNS"
	VarForestStateDir   = "DIRGATE_TEST_FOREST_STATE_DIR"
	VarForestScript     = "DIRGATE_TEST_FOREST_SCRIPT"
	VarForestPrefix     = "DIRGATE_TEST_FOREST_"
)

// The forest's two domains, by NetBIOS name (the middle of their variables).
const (
	ForestCorp     = "CORP"     // CORP.EXAMPLE.COM, DC=corp,DC=example,DC=com
	ForestFabrikam = "FABRIKAM" // FABRIKAM.EXAMPLE.NET, DC=fabrikam,DC=example,DC=net
)

// forestDomainVars are the suffixes every domain of the forest has.
var forestDomainVars = []string{
	"URL", "DC_NAME", "REALM", "NETBIOS", "BASE_DN", "SID", "BIND_DN", "PASSWORD_FILE",
	"ADMIN_DN", "ADMIN_PASSWORD_FILE", "OU", "USER_DN", "USER_NAME", "USER_PASSWORD_FILE",
	"USER2_DN", "GLOBAL_DN", "UNIVERSAL_DN", "LOCAL_DN", "FSP_DN",
}

// ForestVar is the name of domain netbios's variable suffix, e.g.
// ForestVar(ForestCorp, "URL") is DIRGATE_TEST_FOREST_CORP_URL.
func ForestVar(netbios, suffix string) string { return VarForestPrefix + netbios + "_" + suffix }

// Forest describes the two domains of test/harness/samba/forest.sh, joined by a
// two-way forest trust, each with one DC in a network namespace of its own.
type Forest struct {
	Corp, Fabrikam ForestDomain
	CAFile         string // one CA signed both DCs' certificates
	CAPool         *x509.CertPool
	DNS            string   // host:port of the forwarder that answers both domains' names
	Namespaces     []string // the DCs' network namespaces (CORP's, FABRIKAM's), informational
	StateDir       string
	Script         string // absolute path of forest.sh
}

// ForestDomain is one domain of the forest: its DC, accounts and seed. The seed
// lives under OU: two users with passwords (User, User2), and one group of each
// scope: Global (global: both users), Universal (universal: Global) and Local
// (domain local: Universal, and FSP). FSP is the foreign security principal in
// Local that names the other domain's principal: in CORP, FABRIKAM's User; in
// FABRIKAM, CORP's Global group.
type ForestDomain struct {
	URL           string // ldaps://<DC's IP>:636
	DCName        string // the DC's DNS name, in its certificate: corpdc.corp.example.com
	Realm         string // CORP.EXAMPLE.COM
	NetBIOS       string // CORP
	BaseDN        string
	SID           string // the domain's SID, S-1-5-21-…
	BindDN        string // dirgate's service account (Account Operators, as with dc.sh)
	Password      string
	AdminDN       string
	AdminPassword string
	OU            string
	UserDN        string
	UserName      string // User's sAMAccountName; its UPN is UserName@<the domain's DNS name>
	UserPassword  string
	User2DN       string
	GlobalDN      string
	UniversalDN   string
	LocalDN       string
	FSPDN         string // CN=<SID>,CN=ForeignSecurityPrincipals,<BaseDN>
	CAFile        string
	CAPool        *x509.CertPool
}

// ForestFromEnv returns the forest described by the environment. With none of
// its variables set it skips the test, unless CI is true, where it fails it; a
// partial or broken configuration always fails it.
//
// The test holds the forest until it ends (hold.go): a test of another package may
// stop one of its domains (StopDC).
func ForestFromEnv(t testing.TB) Forest {
	t.Helper()
	f := forestFrom(t, os.Getenv)
	if f.StateDir != "" {
		forestHold.take(t, f.StateDir, "the forest")
	}
	return f
}

// forestHold is the forest's hold.
var forestHold stateHold

// StopDC stops the DC of domain n (1 CORP, 2 FABRIKAM) gracefully: the domain is
// down, its connections reset and new ones refused. It starts again when the test
// ends.
func (f Forest) StopDC(t testing.TB, n int) {
	t.Helper()
	t.Cleanup(func() {
		if err := f.exec(t, "start", n); err != nil {
			t.Errorf("sambatest: restoring the forest: %v", err)
		}
	})
	if err := f.exec(t, "stop", n); err != nil {
		t.Fatalf("sambatest: %v", err)
	}
}

// StartDC starts the DC of domain n again (a no-op if it runs) and returns once it
// answers over LDAPS.
func (f Forest) StartDC(t testing.TB, n int) {
	t.Helper()
	if err := f.exec(t, "start", n); err != nil {
		t.Fatalf("sambatest: %v", err)
	}
}

func (f Forest) exec(t testing.TB, verb string, n int) error {
	t.Helper()
	if n != 1 && n != 2 {
		panic(fmt.Sprintf("sambatest: forest domain %d, want 1 or 2", n))
	}
	ctx, cancel := context.WithTimeout(context.Background(), pairVerbTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", f.Script, verb, fmt.Sprint(n), f.StateDir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("forest.sh %s %d: %w\n%s", verb, n, err, out.String())
	}
	t.Logf("sambatest: forest.sh %s %d took %v", verb, n, time.Since(start).Round(time.Millisecond))
	return nil
}

func forestFrom(t testing.TB, getenv func(string) string) Forest {
	t.Helper()
	f, err := loadForest(getenv)
	if err != nil {
		unusable(t, getenv, err, "bash test/harness/samba/forest.sh start /tmp/dirgate-forest && set -a && . /tmp/dirgate-forest/env && set +a (or: make test)")
	}
	return f
}

func forestRequired() []string {
	names := []string{VarForestCAFile, VarForestDNS, VarForestStateDir, VarForestScript}
	for _, d := range []string{ForestCorp, ForestFabrikam} {
		for _, s := range forestDomainVars {
			names = append(names, ForestVar(d, s))
		}
	}
	return names
}

func loadForest(getenv func(string) string) (Forest, error) {
	if err := unset(getenv, forestRequired(), "forest env"); err != nil {
		return Forest{}, err
	}
	f := Forest{
		CAFile:     getenv(VarForestCAFile),
		DNS:        getenv(VarForestDNS),
		Namespaces: strings.Fields(getenv(VarForestNamespaces)),
		StateDir:   getenv(VarForestStateDir),
		Script:     getenv(VarForestScript),
	}
	var errs []error
	pool, err := readCAPool(f.CAFile)
	if err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", VarForestCAFile, err))
	}
	f.CAPool = pool
	if host, _, err := net.SplitHostPort(f.DNS); err != nil || !pairAddr(host) {
		errs = append(errs, fmt.Errorf("%s %q: want a private or loopback IP:port", VarForestDNS, f.DNS))
	}
	var e []error
	f.Corp, e = loadForestDomain(getenv, ForestCorp, f.CAFile, pool)
	errs = append(errs, e...)
	f.Fabrikam, e = loadForestDomain(getenv, ForestFabrikam, f.CAFile, pool)
	errs = append(errs, e...)
	if err := errors.Join(errs...); err != nil {
		return Forest{}, fmt.Errorf("load forest env: %w", err)
	}
	return f, nil
}

func loadForestDomain(getenv func(string) string, netbios, caFile string, pool *x509.CertPool) (ForestDomain, []error) {
	v := func(s string) string { return getenv(ForestVar(netbios, s)) }
	d := ForestDomain{
		URL: v("URL"), DCName: v("DC_NAME"), Realm: v("REALM"), NetBIOS: v("NETBIOS"),
		BaseDN: v("BASE_DN"), SID: v("SID"), BindDN: v("BIND_DN"), AdminDN: v("ADMIN_DN"),
		OU: v("OU"), UserDN: v("USER_DN"), UserName: v("USER_NAME"), User2DN: v("USER2_DN"),
		GlobalDN: v("GLOBAL_DN"), UniversalDN: v("UNIVERSAL_DN"), LocalDN: v("LOCAL_DN"),
		FSPDN: v("FSP_DN"), CAFile: caFile, CAPool: pool,
	}
	var errs []error
	if err := checkPairURL(d.URL); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", ForestVar(netbios, "URL"), err))
	}
	if d.NetBIOS != netbios {
		errs = append(errs, fmt.Errorf("%s is %q, want %q", ForestVar(netbios, "NETBIOS"), d.NetBIOS, netbios))
	}
	if !strings.HasPrefix(d.SID, "S-1-5-21-") {
		errs = append(errs, fmt.Errorf("%s %q: want a domain SID S-1-5-21-…", ForestVar(netbios, "SID"), d.SID))
	}
	for _, s := range []string{"BASE_DN", "BIND_DN", "ADMIN_DN", "OU", "USER_DN", "USER2_DN", "GLOBAL_DN", "UNIVERSAL_DN", "LOCAL_DN", "FSP_DN"} {
		if _, err := ldap.ParseDN(v(s)); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", ForestVar(netbios, s), err))
		}
	}
	for _, p := range []struct {
		suffix string
		to     *string
	}{{"PASSWORD_FILE", &d.Password}, {"ADMIN_PASSWORD_FILE", &d.AdminPassword}, {"USER_PASSWORD_FILE", &d.UserPassword}} {
		var err error
		if *p.to, err = readPassword(v(p.suffix)); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", ForestVar(netbios, p.suffix), err))
		}
	}
	return d, errs
}

// DNSName is the domain's DNS name: corp.example.com.
func (d ForestDomain) DNSName() string { return strings.ToLower(d.Realm) }

// UserUPN is User's userPrincipalName.
func (d ForestDomain) UserUPN() string { return d.UserName + "@" + d.DNSName() }

// Host is the DC's IP address.
func (d ForestDomain) Host() string {
	u, _ := url.Parse(d.URL) // checked by loadForest
	return u.Hostname()
}

// DC is the domain's DC with the single-DC helpers (Dial, DialAdmin,
// DialService, TempUser, TLSConfig verifying against its IP; not TempGroup:
// the forest's domains have no OU=Groups).
// StartTLSURL is ldap://<its IP>:389.
func (d ForestDomain) DC() DC {
	return DC{
		URL: d.URL, StartTLSURL: "ldap://" + net.JoinHostPort(d.Host(), "389"),
		BaseDN: d.BaseDN, BindDN: d.BindDN, Password: d.Password,
		AdminDN: d.AdminDN, AdminPassword: d.AdminPassword,
		CAFile: d.CAFile, CAPool: d.CAPool,
	}
}

// Resolver sends every query to the forest's DNS forwarder, which answers
// both domains' names (their DCs, SRV records) from the domain's own DC.
func (f Forest) Resolver() *net.Resolver { return ResolverAt(f.DNS) }
