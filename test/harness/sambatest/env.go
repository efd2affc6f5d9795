// Package sambatest gives integration tests the throw-away Samba AD domain
// controller started by test/harness/samba/dc.sh: where it listens, how to bind to it
// and the CA that signed its certificate, read from the DIRGATE_TEST_LDAP_*
// environment variables that dc.sh writes to STATE_DIR/env.
//
// Tests skip when no DC is configured on a developer machine, but fail when
// CI is set: CI must never pass by skipping its integration tests.
package sambatest

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/dirgate/dirgate/test/harness/ci"
	"github.com/go-ldap/ldap/v3"
)

// Environment variable names: the contract with test/harness/samba/dc.sh.
const (
	VarURL               = "DIRGATE_TEST_LDAP_URL"
	VarStartTLSURL       = "DIRGATE_TEST_LDAP_STARTTLS_URL"
	VarBaseDN            = "DIRGATE_TEST_LDAP_BASE_DN"
	VarBindDN            = "DIRGATE_TEST_LDAP_BIND_DN"
	VarPasswordFile      = "DIRGATE_TEST_LDAP_PASSWORD_FILE"
	VarAdminDN           = "DIRGATE_TEST_LDAP_ADMIN_DN"
	VarAdminPasswordFile = "DIRGATE_TEST_LDAP_ADMIN_PASSWORD_FILE"
	VarCAFile            = "DIRGATE_TEST_LDAP_CA_FILE"
	VarFixtureDir        = "DIRGATE_TEST_LDAP_FIXTURE_DIR"
	VarSambaDir          = "DIRGATE_TEST_SAMBA_DIR"
)

// required lists the variables without which no test can reach the DC.
var required = []string{
	VarURL, VarStartTLSURL, VarBaseDN, VarBindDN, VarPasswordFile,
	VarAdminDN, VarAdminPasswordFile, VarCAFile,
}

// ErrNotConfigured reports that none of the DC's variables is set: no DC was
// started for this run. Only this error lets a developer's test skip.
var ErrNotConfigured = errors.New("no Samba DC configured")

// DC describes the running test domain controller. (It is not named Env: Env is
// the function that returns it, and Go forbids a type and a function sharing a
// name.)
type DC struct {
	URL           string // ldaps://127.0.0.1:636
	StartTLSURL   string // ldap://127.0.0.1:389, for StartTLS
	BaseDN        string // DC=corp,DC=example,DC=com
	BindDN        string // dirgate's service account (member of Account Operators)
	Password      string // read from DIRGATE_TEST_LDAP_PASSWORD_FILE
	AdminDN       string // the domain Administrator, to set up or restore state
	AdminPassword string // read from DIRGATE_TEST_LDAP_ADMIN_PASSWORD_FILE
	CAFile        string // PEM of the CA that signed the DC's certificate
	CAPool        *x509.CertPool
	// FixtureDir is the test/harness/fixture/testdata directory that was seeded, or
	// empty when the DC holds only the harness smoke objects.
	FixtureDir string
	SambaDir   string // the DC's files (logs under log/); informational
}

// Env returns the DC described by the environment. With no DC configured it
// skips the test, unless CI is true, where it fails the test; a partial or
// broken configuration always fails it.
func Env(t testing.TB) DC {
	t.Helper()
	return envFrom(t, os.Getenv)
}

func envFrom(t testing.TB, getenv func(string) string) DC {
	t.Helper()
	dc, err := load(getenv)
	if err != nil {
		unusable(t, getenv, err, "bash test/harness/samba/dc.sh start /tmp/dgs && set -a && . /tmp/dgs/env && set +a (or: make test, which CI runs)")
	}
	return dc
}

// unusable ends a test whose server the environment does not describe: skipped
// when nothing is set (failed under CI=true), failed when the description is
// broken. start is the command that starts the server.
func unusable(t testing.TB, getenv func(string) string, err error, start string) {
	t.Helper()
	if errors.Is(err, ErrNotConfigured) {
		ci.SkipOrFailFrom(t, getenv, fmt.Sprintf("sambatest: %v; start one with: %s", err, start))
		return
	}
	t.Fatalf("sambatest: %v", err)
}

// unset checks that every one of names is set: ErrNotConfigured when none is (no
// server), an error naming the missing ones when some are. what names the env file.
func unset(getenv func(string) string, names []string, what string) error {
	var missing []string
	for _, name := range names {
		if getenv(name) == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) == len(names) {
		return fmt.Errorf("load %s: %w (%s and others unset)", what, ErrNotConfigured, names[0])
	}
	if len(missing) > 0 {
		return fmt.Errorf("load %s: incomplete configuration, unset: %s", what, strings.Join(missing, ", "))
	}
	return nil
}

// load reads and checks every variable, so a misconfiguration surfaces as one
// clear error instead of a dial failure deep inside some test.
func load(getenv func(string) string) (DC, error) {
	if err := unset(getenv, required, "env"); err != nil {
		return DC{}, err
	}
	dc := DC{
		URL:         getenv(VarURL),
		StartTLSURL: getenv(VarStartTLSURL),
		BaseDN:      getenv(VarBaseDN),
		BindDN:      getenv(VarBindDN),
		AdminDN:     getenv(VarAdminDN),
		CAFile:      getenv(VarCAFile),
		FixtureDir:  getenv(VarFixtureDir),
		SambaDir:    getenv(VarSambaDir),
	}
	var errs []error
	if err := checkURL(dc.URL, "ldaps"); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", VarURL, err))
	}
	if err := checkURL(dc.StartTLSURL, "ldap"); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", VarStartTLSURL, err))
	}
	errs = append(errs, readAccounts(getenv, accountVars{VarBaseDN, VarBindDN, VarAdminDN, VarPasswordFile, VarAdminPasswordFile, VarCAFile},
		&dc.Password, &dc.AdminPassword, &dc.CAPool)...)
	if err := errors.Join(errs...); err != nil {
		return DC{}, fmt.Errorf("load env: %w", err)
	}
	return dc, nil
}

// accountVars name the variables of a DC's accounts and CA in an env file.
type accountVars struct{ baseDN, bindDN, adminDN, passwordFile, adminPasswordFile, caFile string }

// readAccounts checks the DNs and reads the password and CA files that both env
// files (the single DC's and the pair's) name, into password, adminPassword and pool.
func readAccounts(getenv func(string) string, v accountVars, password, adminPassword *string, pool **x509.CertPool) []error {
	var errs []error
	for _, name := range []string{v.baseDN, v.bindDN, v.adminDN} {
		if _, err := ldap.ParseDN(getenv(name)); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	var err error
	if *password, err = readPassword(getenv(v.passwordFile)); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", v.passwordFile, err))
	}
	if *adminPassword, err = readPassword(getenv(v.adminPasswordFile)); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", v.adminPasswordFile, err))
	}
	if *pool, err = readCAPool(getenv(v.caFile)); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", v.caFile, err))
	}
	return errs
}

// checkURL accepts only the expected scheme and a loopback host with a port:
// tests must never send traffic off this machine.
func checkURL(raw, scheme string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("parse url: %w", err)
	}
	if u.Scheme != scheme {
		return fmt.Errorf("scheme %q, want %q", u.Scheme, scheme)
	}
	if u.Port() == "" {
		return fmt.Errorf("url %q has no port", raw)
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("host %q is not a loopback address", host)
	}
	return nil
}

// readPassword returns the file's content without a trailing line break
// (dc.sh writes none; an editor may add one). An empty password is refused:
// LDAP treats a simple bind with one as an unauthenticated bind.
func readPassword(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read password: %w", err)
	}
	pw := strings.TrimRight(string(b), "\r\n")
	if pw == "" {
		return "", fmt.Errorf("read password: %s is empty", path)
	}
	return pw, nil
}

func readCAPool(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("read CA: no PEM certificate in %s", path)
	}
	return pool, nil
}

// TLSConfig returns a client configuration that fully verifies the DC: the
// harness CA as the only root and the URL's host (127.0.0.1) as server name.
func (dc DC) TLSConfig() *tls.Config {
	host := "127.0.0.1"
	if u, err := url.Parse(dc.URL); err == nil && u.Hostname() != "" {
		host = u.Hostname()
	}
	return &tls.Config{RootCAs: dc.CAPool, ServerName: host, MinVersion: tls.VersionTLS12}
}

// Dial connects to rawURL, with TLS from the start for ldaps:// and through
// StartTLS for ldap://, then binds; the connection closes when the test ends.
// It fails the test on any error.
func (dc DC) Dial(t testing.TB, rawURL, bindDN, password string) *ldap.Conn {
	t.Helper()
	conn, err := ldap.DialURL(rawURL, ldap.DialWithTLSConfig(dc.TLSConfig()),
		ldap.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}))
	if err != nil {
		t.Fatalf("sambatest: dial %s: %v", rawURL, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	conn.SetTimeout(30 * time.Second)
	if strings.HasPrefix(rawURL, "ldap://") {
		if err := conn.StartTLS(dc.TLSConfig()); err != nil {
			t.Fatalf("sambatest: starttls %s: %v", rawURL, err)
		}
	}
	if err := conn.Bind(bindDN, password); err != nil {
		t.Fatalf("sambatest: bind %s as %q: %v", rawURL, bindDN, err)
	}
	return conn
}

// DialService returns an LDAPS connection bound as dirgate's service account.
func (dc DC) DialService(t testing.TB) *ldap.Conn {
	t.Helper()
	return dc.Dial(t, dc.URL, dc.BindDN, dc.Password)
}

// DialAdmin returns an LDAPS connection bound as the domain Administrator,
// for tests that must restore what they changed (e.g. re-add a removed member).
func (dc DC) DialAdmin(t testing.TB) *ldap.Conn {
	t.Helper()
	return dc.Dial(t, dc.URL, dc.AdminDN, dc.AdminPassword)
}

// TempGroup creates a group under OU=Groups of the base DN holding members, as the
// administrator, and deletes it when the test ends. Tests that change memberships
// use groups of their own, so that they never change what other tests read.
func (dc DC) TempGroup(t testing.TB, name string, members ...string) string {
	t.Helper()
	admin := dc.DialAdmin(t)
	dn := fmt.Sprintf("CN=%s %d,OU=Groups,%s", ldap.EscapeDN(name), os.Getpid(), dc.BaseDN)
	_ = admin.Del(ldap.NewDelRequest(dn, nil)) // left over by a killed run
	add := ldap.NewAddRequest(dn, nil)
	add.Attribute("objectClass", []string{"top", "group"})
	if len(members) > 0 {
		add.Attribute("member", members)
	}
	if err := admin.Add(add); err != nil {
		t.Fatalf("sambatest: create %s: %v", dn, err)
	}
	dc.deleteAtEnd(t, dn)
	return dn
}

// deleteAtEnd deletes dn, as the administrator, when the test ends.
func (dc DC) deleteAtEnd(t testing.TB, dn string) {
	t.Cleanup(func() {
		// A fresh connection: the test's may have been idle for minutes.
		c, err := ldap.DialURL(dc.URL, ldap.DialWithTLSConfig(dc.TLSConfig()))
		if err != nil {
			t.Errorf("sambatest: delete %s: %v", dn, err)
			return
		}
		defer c.Close()
		if err := c.Bind(dc.AdminDN, dc.AdminPassword); err != nil {
			t.Errorf("sambatest: delete %s: %v", dn, err)
			return
		}
		if err := c.Del(ldap.NewDelRequest(dn, nil)); err != nil {
			t.Errorf("sambatest: delete %s: %v", dn, err)
		}
	})
}

// TempUser creates an enabled user account under CN=Users with sAMAccountName sam
// (at most 20 characters), UPN sam@<the domain's DNS name> and password, as the
// administrator, then applies change (nil: none) to it, and deletes it when the test
// ends. Sign-in tests bind as such accounts, never as shared ones: a wrong password
// counts toward the account's lockout.
func (dc DC) TempUser(t testing.TB, sam, password string, change func(admin *ldap.Conn, dn string)) (dn, upn string) {
	t.Helper()
	admin := dc.DialAdmin(t)
	dn = fmt.Sprintf("CN=%s,CN=Users,%s", ldap.EscapeDN(sam), dc.BaseDN)
	upn = sam + "@" + dnsDomain(dc.BaseDN)
	_ = admin.Del(ldap.NewDelRequest(dn, nil)) // left over by a killed run
	add := ldap.NewAddRequest(dn, nil)
	add.Attribute("objectClass", []string{"top", "person", "organizationalPerson", "user"})
	add.Attribute("sAMAccountName", []string{sam})
	add.Attribute("userPrincipalName", []string{upn})
	add.Attribute("unicodePwd", []string{utf16Quoted(password)})
	add.Attribute("userAccountControl", []string{"512"})
	if err := admin.Add(add); err != nil {
		t.Fatalf("sambatest: create user %s: %v", dn, err)
	}
	dc.deleteAtEnd(t, dn)
	if change != nil {
		change(admin, dn)
	}
	return dn, upn
}

// utf16Quoted is a password as unicodePwd takes it: quoted, in UTF-16LE.
func utf16Quoted(pw string) string {
	var b []byte
	for _, r := range utf16.Encode([]rune(`"` + pw + `"`)) {
		b = append(b, byte(r), byte(r>>8))
	}
	return string(b)
}

// dnsDomain is the DNS name of a domain DN: DC=corp,DC=example is corp.example.
func dnsDomain(dn string) string {
	var labels []string
	for _, rdn := range strings.Split(dn, ",") {
		if k, v, ok := strings.Cut(rdn, "="); ok && strings.EqualFold(strings.TrimSpace(k), "DC") {
			labels = append(labels, v)
		}
	}
	return strings.Join(labels, ".")
}
