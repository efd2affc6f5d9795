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
)

// Environment variable names: the contract with test/harness/samba/pair.sh, which
// writes them to STATE_DIR/env (see test/harness/samba/README.md, "Two replicating DCs").
const (
	VarPairURLs              = "DIRGATE_TEST_PAIR_URLS"
	VarPairDC1URL            = "DIRGATE_TEST_PAIR_DC1_URL"
	VarPairDC2URL            = "DIRGATE_TEST_PAIR_DC2_URL"
	VarPairDC1Name           = "DIRGATE_TEST_PAIR_DC1_NAME"
	VarPairDC2Name           = "DIRGATE_TEST_PAIR_DC2_NAME"
	VarPairDNS               = "DIRGATE_TEST_PAIR_DNS"
	VarPairDNSServers        = "DIRGATE_TEST_PAIR_DNS_SERVERS"
	VarPairDomain            = "DIRGATE_TEST_PAIR_DOMAIN"
	VarPairSite              = "DIRGATE_TEST_PAIR_SITE"
	VarPairBaseDN            = "DIRGATE_TEST_PAIR_BASE_DN"
	VarPairBindDN            = "DIRGATE_TEST_PAIR_BIND_DN"
	VarPairPasswordFile      = "DIRGATE_TEST_PAIR_PASSWORD_FILE"
	VarPairAdminDN           = "DIRGATE_TEST_PAIR_ADMIN_DN"
	VarPairAdminPasswordFile = "DIRGATE_TEST_PAIR_ADMIN_PASSWORD_FILE"
	VarPairCAFile            = "DIRGATE_TEST_PAIR_CA_FILE"
	VarPairNamespaces        = "DIRGATE_TEST_PAIR_NAMESPACES"
	VarPairStateDir          = "DIRGATE_TEST_PAIR_STATE_DIR"
	VarPairScript            = "DIRGATE_TEST_PAIR_SCRIPT"
	// VarPairFixtureDir is set when DC1 was seeded with the project fixture too.
	VarPairFixtureDir = "DIRGATE_TEST_PAIR_FIXTURE_DIR"
)

var pairRequired = []string{
	VarPairDC1URL, VarPairDC2URL, VarPairDC1Name, VarPairDC2Name, VarPairDNS, VarPairDomain,
	VarPairSite, VarPairBaseDN, VarPairBindDN, VarPairPasswordFile, VarPairAdminDN,
	VarPairAdminPasswordFile, VarPairCAFile, VarPairStateDir, VarPairScript,
}

// pairVerbTimeout bounds one pair.sh verb: start N waits up to 60 s for LDAPS
// (DIRGATE_SAMBA_START_TIMEOUT), and a loaded 2-core machine needs margin.
const pairVerbTimeout = 3 * time.Minute

// Pair describes the two replicating domain controllers started by
// test/harness/samba/pair.sh. DCs are numbered 1 and 2, as in pair.sh's verbs.
type Pair struct {
	URLs          [2]string // ldaps://10.231.77.11:636, ldaps://10.231.77.12:636
	Names         [2]string // dc1.corp.example.com, dc2.corp.example.com (in each certificate)
	DNS           string    // host:port of DC1's DNS server, which serves the DC locator records
	DNSServers    []string  // both DCs' DNS servers (DC1's, DC2's): each serves the same records
	Domain        string    // corp.example.com
	Site          string    // Default-First-Site-Name
	BaseDN        string
	BindDN        string // dirgate's service account, the same on both DCs
	Password      string
	AdminDN       string
	AdminPassword string
	CAFile        string // one CA signed both DCs' certificates
	CAPool        *x509.CertPool
	Namespaces    []string // the DCs' network namespaces, informational
	StateDir      string   // pair.sh's STATE_DIR
	Script        string   // absolute path of pair.sh
	FixtureDir    string   // the fixture DC1 was seeded with (both hold it); "" for the smoke objects only
}

// PairFromEnv returns the pair described by the environment. With none of
// its variables set it skips the test, unless CI is true, where it fails it;
// a partial or broken configuration always fails it.
//
// The test holds the pair alone until it ends: go test runs packages in
// parallel, and one package killing a DC must not meet another package's test
// that needs both. Tests of one package share the hold; they must not call
// t.Parallel.
func PairFromEnv(t testing.TB) Pair {
	t.Helper()
	p := pairFrom(t, os.Getenv)
	if p.StateDir != "" {
		holdPair(t, p.StateDir)
	}
	return p
}

// pairHold is the pair's hold (hold.go).
var pairHold stateHold

func holdPair(t testing.TB, stateDir string) { pairHold.take(t, stateDir, "the pair") }

func pairFrom(t testing.TB, getenv func(string) string) Pair {
	t.Helper()
	p, err := loadPair(getenv)
	if err != nil {
		unusable(t, getenv, err, "bash test/harness/samba/pair.sh start /tmp/dirgate-pair && set -a && . /tmp/dirgate-pair/env && set +a (or: make test)")
	}
	return p
}

func loadPair(getenv func(string) string) (Pair, error) {
	if err := unset(getenv, pairRequired, "pair env"); err != nil {
		return Pair{}, err
	}
	p := Pair{
		URLs:       [2]string{getenv(VarPairDC1URL), getenv(VarPairDC2URL)},
		Names:      [2]string{getenv(VarPairDC1Name), getenv(VarPairDC2Name)},
		DNS:        getenv(VarPairDNS),
		DNSServers: strings.Fields(getenv(VarPairDNSServers)),
		Domain:     getenv(VarPairDomain),
		Site:       getenv(VarPairSite),
		BaseDN:     getenv(VarPairBaseDN),
		BindDN:     getenv(VarPairBindDN),
		AdminDN:    getenv(VarPairAdminDN),
		CAFile:     getenv(VarPairCAFile),
		Namespaces: strings.Fields(getenv(VarPairNamespaces)),
		StateDir:   getenv(VarPairStateDir),
		Script:     getenv(VarPairScript),
		FixtureDir: getenv(VarPairFixtureDir),
	}
	var errs []error
	for i, u := range p.URLs {
		if err := checkPairURL(u); err != nil {
			errs = append(errs, fmt.Errorf("DC%d URL: %w", i+1, err))
		}
	}
	if len(p.DNSServers) == 0 {
		p.DNSServers = []string{p.DNS}
	}
	for _, a := range append([]string{p.DNS}, p.DNSServers...) {
		if host, _, err := net.SplitHostPort(a); err != nil || !pairAddr(host) {
			errs = append(errs, fmt.Errorf("DNS server %q: want a private or loopback IP:port", a))
		}
	}
	errs = append(errs, readAccounts(getenv, accountVars{VarPairBaseDN, VarPairBindDN, VarPairAdminDN, VarPairPasswordFile, VarPairAdminPasswordFile, VarPairCAFile},
		&p.Password, &p.AdminPassword, &p.CAPool)...)
	if err := errors.Join(errs...); err != nil {
		return Pair{}, fmt.Errorf("load pair env: %w", err)
	}
	return p, nil
}

// checkPairURL accepts ldaps:// to an IP inside a private range (the
// namespaces' bridge) or loopback: tests must never send traffic off this machine.
func checkPairURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("parse url: %w", err)
	}
	if u.Scheme != "ldaps" || u.Port() == "" {
		return fmt.Errorf("url %q: want ldaps://IP:port", raw)
	}
	if !pairAddr(u.Hostname()) {
		return fmt.Errorf("host %q is not a private or loopback IP", u.Hostname())
	}
	return nil
}

func pairAddr(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && (ip.IsPrivate() || ip.IsLoopback())
}

func (p Pair) index(n int) int {
	if n != 1 && n != 2 {
		panic(fmt.Sprintf("sambatest: DC number %d, want 1 or 2", n))
	}
	return n - 1
}

// URL is DC n's LDAPS URL.
func (p Pair) URL(n int) string { return p.URLs[p.index(n)] }

// Host is DC n's IP address.
func (p Pair) Host(n int) string {
	u, _ := url.Parse(p.URL(n)) // checked by loadPair
	return u.Hostname()
}

// DC is DC n alone, with the single-DC helpers (Dial, DialAdmin, DialService,
// TempUser, TLSConfig verifying the certificate against DC n's IP).
// StartTLSURL is ldap://<its IP>:389.
func (p Pair) DC(n int) DC {
	return DC{
		URL: p.URL(n), StartTLSURL: "ldap://" + net.JoinHostPort(p.Host(n), "389"),
		BaseDN: p.BaseDN, BindDN: p.BindDN, Password: p.Password,
		AdminDN: p.AdminDN, AdminPassword: p.AdminPassword,
		CAFile: p.CAFile, CAPool: p.CAPool, FixtureDir: p.FixtureDir,
	}
}

// Resolver queries DC1's DNS server (Samba's internal DNS) only: it serves
// _ldap._tcp.dc._msdcs.<Domain> with both DCs, and dc1/dc2.<Domain>.
func (p Pair) Resolver() *net.Resolver { return ResolverAt(p.DNS) }

// ResolverAt returns a resolver that sends every query to addr (host:port),
// e.g. p.DNSServers[1], DC2's, to discover the DCs while DC1 is down.
func ResolverAt(addr string) *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
}

// Kill crashes DC n: SIGKILL to its samba process group. Connections get a
// reset and new ones are refused at once. The DC restarts when the test ends.
func (p Pair) Kill(t testing.TB, n int) {
	t.Helper()
	p.restoreRunning(t, n)
	p.run(t, nil, "kill", n)
}

// Stop stops DC n gracefully (SIGTERM); its database stays for Start.
// The DC restarts when the test ends.
func (p Pair) Stop(t testing.TB, n int) {
	t.Helper()
	p.restoreRunning(t, n)
	p.run(t, nil, "stop", n)
}

// Start starts DC n again (a no-op if it runs) and returns once an
// Administrator bind over LDAPS succeeds.
func (p Pair) Start(t testing.TB, n int) {
	t.Helper()
	p.run(t, nil, "start", n)
}

// restoreRunning brings DC n back when the test ends: link up first, or the
// start's wait for LDAPS could not succeed.
func (p Pair) restoreRunning(t testing.TB, n int) {
	t.Cleanup(func() {
		p.undo(t, "linkup", n)
		p.undo(t, "start", n)
	})
}

// LinkDown makes every packet to and from DC n vanish: a connect then hangs
// until the caller's timeout, and an open connection stalls (no reset).
// The link comes back when the test ends.
func (p Pair) LinkDown(t testing.TB, n int) {
	t.Helper()
	t.Cleanup(func() { p.undo(t, "linkup", n) })
	p.run(t, nil, "linkdown", n)
}

// LinkUp undoes LinkDown.
func (p Pair) LinkUp(t testing.TB, n int) {
	t.Helper()
	p.run(t, nil, "linkup", n)
}

// Delay makes every chunk of LDAPS traffic to and from DC n arrive d late (whole
// milliseconds), each way: new connections go through a relay in DC n's namespace,
// and the connections open are cut so that their clients reconnect through it
// (test/harness/samba/pair.sh delay; the kernel has no netem). Replication between the DCs
// is not delayed. The delay ends when the test ends.
func (p Pair) Delay(t testing.TB, n int, d time.Duration) {
	t.Helper()
	t.Cleanup(func() { p.undo(t, "undelay", n) })
	p.run(t, nil, "delay", n, fmt.Sprint(d.Milliseconds()))
}

// Undelay undoes Delay: new connections go to the DC itself, and those through the
// relay are left silent (pair.sh, undelay).
func (p Pair) Undelay(t testing.TB, n int) {
	t.Helper()
	p.run(t, nil, "undelay", n)
}

// PauseInbound stops DC n from pulling changes from the other DC
// (DISABLE_INBOUND_REPL), so a change made on the other one stays away from
// DC n. Replication resumes when the test ends.
func (p Pair) PauseInbound(t testing.TB, n int) {
	t.Helper()
	t.Cleanup(func() { p.undo(t, "resume-inbound", n) })
	p.run(t, nil, "pause-inbound", n)
}

// ResumeInbound undoes PauseInbound. Changes held back arrive at the next
// periodic pull (dreplsrv:periodic_interval, 10 s) or the next change
// notified by the other DC; Replicate brings them at once.
func (p Pair) ResumeInbound(t testing.TB, n int) {
	t.Helper()
	p.run(t, nil, "resume-inbound", n)
}

// Replicate makes each DC pull the domain naming context from the other now.
// It fails while a DC's inbound replication is paused.
func (p Pair) Replicate(t testing.TB) {
	t.Helper()
	p.run(t, nil, "replicate", 0)
}

// AdminModify applies ldif (ldapmodify syntax, changetype lines included) as
// Administrator on DC n only; the other DC receives it by replication.
func (p Pair) AdminModify(t testing.TB, n int, ldif string) {
	t.Helper()
	p.run(t, strings.NewReader(ldif), "modify", n)
}

// run execs pair.sh VERB [N [ARG...]] STATE_DIR and fails the test with its output.
func (p Pair) run(t testing.TB, stdin *strings.Reader, verb string, n int, extra ...string) {
	t.Helper()
	if err := p.exec(t, stdin, verb, n, extra...); err != nil {
		t.Fatalf("sambatest: %v", err)
	}
}

// undo is run for cleanups: Errorf, so that the other cleanups still run.
func (p Pair) undo(t testing.TB, verb string, n int) {
	t.Helper()
	if err := p.exec(t, nil, verb, n); err != nil {
		t.Errorf("sambatest: restoring the pair: %v", err)
	}
}

func (p Pair) exec(t testing.TB, stdin *strings.Reader, verb string, n int, extra ...string) error {
	t.Helper()
	args := []string{p.Script, verb}
	if n != 0 {
		p.index(n)
		args = append(args, fmt.Sprint(n))
	}
	args = append(args, extra...)
	args = append(args, p.StateDir)
	ctx, cancel := context.WithTimeout(context.Background(), pairVerbTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", args...)
	if stdin != nil {
		cmd.Stdin = stdin
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("pair.sh %s: %w\n%s", strings.Join(args[1:len(args)-1], " "), err, out.String())
	}
	t.Logf("sambatest: pair.sh %s took %v", strings.Join(args[1:len(args)-1], " "), time.Since(start).Round(time.Millisecond))
	return nil
}
