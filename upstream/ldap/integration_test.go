package ldap

// Integration tests against the throw-away Samba AD DC of test/harness/samba/dc.sh (see its
// README). They skip on a machine without one and fail under CI=true.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/ldapentry"
	"github.com/dirgate/dirgate/test/harness/ci"
	"github.com/dirgate/dirgate/test/harness/sambatest"
	goldap "github.com/go-ldap/ldap/v3"
)

// Smoke objects seeded by the harness (test/harness/samba/testdata/smoke.ldif).
const (
	smokeOU        = "OU=dirgate-smoke,DC=corp,DC=example,DC=com"
	smokeAlice     = "CN=smoke-alice," + smokeOU
	smokeAlicePw   = "Smoke-Alice-1" // smoke-post.json
	smokeSmith     = `CN=Smith\, John (Ünïcode)*,` + smokeOU
	smokeQuoted    = `CN=a\+b \"quoted\" back\\slash,` + smokeOU
	smokeGroup     = "CN=smoke-group," + smokeOU
	smokePrimary   = "CN=smoke-primary," + smokeOU
	smokeRemovable = "CN=smoke-removable," + smokeOU
	smokePC        = "CN=smoke-pc," + smokeOU
	smokeContact   = "CN=smoke-contact," + smokeOU
	smokeNested    = "CN=smoke-nested,OU=Nested Ünits," + smokeOU
	smokeHash      = `CN=\#hash-user,OU=Nested Ünits,` + smokeOU
	fspDN          = "CN=S-1-5-11,CN=ForeignSecurityPrincipals,DC=corp,DC=example,DC=com"
)

// dcConfig is the adapter's configuration for the harness DC.
func dcConfig(dc sambatest.DC) Config {
	return Config{
		URL: dc.URL, BindDN: dc.BindDN, PasswordFile: os.Getenv(sambatest.VarPasswordFile),
		BaseDN: dc.BaseDN, CAFile: dc.CAFile,
	}
}

func openDC(t testing.TB, c Config) *Directory {
	t.Helper()
	d, err := c.Open(context.Background())
	if err != nil {
		t.Fatalf("open %s: %v", c.URL, err)
	}
	t.Cleanup(d.Close)
	return d
}

func mustLookup(t testing.TB, d *Directory, id string, props ...string) dirgate.Object {
	t.Helper()
	o, err := d.Lookup(context.Background(), dirgate.MustParseIdentifier(id), props)
	if err != nil {
		t.Fatalf("lookup %s: %v", id, err)
	}
	return o
}

func keys(objs []dirgate.Object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, dirgate.MustParseDN(o.DN).Key())
	}
	slices.Sort(out)
	return out
}

func dnKeys(dns ...string) []string {
	var out []string
	for _, dn := range dns {
		out = append(out, dirgate.MustParseDN(dn).Key())
	}
	slices.Sort(out)
	return out
}

// TestIntegrationTLS: LDAPS and StartTLS both verify the certificate against the CA
// file and the URL's host; a wrong CA, a host the certificate does not name and a
// failing bind stop Open.
func TestIntegrationTLS(t *testing.T) {
	dc := sambatest.Env(t)
	for _, url := range []string{dc.URL, dc.StartTLSURL} {
		t.Run(url, func(t *testing.T) {
			c := dcConfig(dc)
			c.URL = url
			d := openDC(t, c)
			if o := mustLookup(t, d, dc.BaseDN); o.ObjectType != dirgate.TypeDomain {
				t.Errorf("base object type %q", o.ObjectType)
			}
		})
	}
	otherCA := filepath.Join(t.TempDir(), "other-ca.pem")
	writeCA(t, otherCA)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(dc.URL, "ldaps://"))
	tests := []struct {
		name   string
		mutate func(*Config)
		check  func(error) bool
	}{
		// A CA that did not sign the DC's certificate.
		{"unknown CA", func(c *Config) { c.CAFile = otherCA }, func(err error) bool {
			var uae x509.UnknownAuthorityError
			return errors.As(err, &uae)
		}},
		{"unknown CA over StartTLS", func(c *Config) { c.CAFile, c.URL = otherCA, dc.StartTLSURL }, func(err error) bool {
			return strings.Contains(err.Error(), "certificate")
		}},
		// The certificate names 127.0.0.1 and localhost, not ::1.
		{"host not in certificate", func(c *Config) { c.URL = "ldaps://[::1]:" + port }, func(err error) bool {
			var he x509.HostnameError
			return errors.As(err, &he)
		}},
		// A bind DN that does not exist gets 49 without locking any account.
		{"bad credentials", func(c *Config) { c.BindDN = "CN=dirgate-nobody,CN=Users," + dc.BaseDN }, func(err error) bool {
			return goldap.IsErrorWithCode(err, goldap.LDAPResultInvalidCredentials) && dirgate.ErrorCode(err) == dirgate.EUPSTREAM
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dcConfig(dc)
			tt.mutate(&c)
			d, err := c.Open(context.Background())
			if err == nil {
				d.Close()
				t.Fatal("Open succeeded")
			}
			if !tt.check(err) {
				t.Errorf("Open: unexpected error %v", err)
			}
		})
	}
}

// writeCA writes a freshly generated, unrelated CA certificate.
func writeCA(t *testing.T, path string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "other CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestIntegrationLookup(t *testing.T) {
	dc := sambatest.Env(t)
	d := openDC(t, dcConfig(dc))
	alice := mustLookup(t, d, smokeAlice)
	smith := mustLookup(t, d, smokeSmith)
	if alice.ObjectType != dirgate.TypeUser || alice.SID == "" || alice.PrimaryGroupID == 0 || alice.AccountStatus == nil {
		t.Fatalf("alice = %+v", alice)
	}
	narrow := dcConfig(dc)
	narrow.BaseDN = "OU=Nested Ünits," + smokeOU
	dn := openDC(t, narrow)
	tests := []struct {
		name string
		d    *Directory
		id   string
		want string // DN or error code
	}{
		// The three forms, and DNs spelled differently.
		{"dn", d, smokeAlice, smokeAlice},
		{"guid", d, alice.GUID, smokeAlice},
		{"guid braces upper", d, "{" + strings.ToUpper(alice.GUID) + "}", smokeAlice},
		{"sid", d, alice.SID, smokeAlice},
		{"escaped dn", d, `cn=smith\2c john (\c3\9cn\c3\afcode)*,ou=DIRGATE-SMOKE,dc=corp,dc=example,dc=com`, smokeSmith},
		{"escaped dn by sid", d, smith.SID, smokeSmith},
		{"quotes plus backslash", d, smokeQuoted, smokeQuoted},
		{"leading hash", d, smokeHash, smokeHash},
		// S-1-5-11: Samba's duplicate base-DN answer, resolved inside BaseDN.
		{"well-known sid", d, "S-1-5-11", fspDN},
		{"builtin sid", d, "S-1-5-32-544", "CN=Administrators,CN=Builtin,DC=corp,DC=example,DC=com"},
		// Unknown objects in every form.
		{"unknown dn", d, "CN=nobody," + smokeOU, dirgate.ENOTFOUND},
		{"unknown parent", d, "CN=x,OU=nowhere," + smokeOU, dirgate.ENOTFOUND},
		{"unknown guid", d, "00000000-0000-4000-8000-000000000000", dirgate.ENOTFOUND},
		{"unknown sid", d, alice.SID + "0", dirgate.ENOTFOUND},
		{"wildcard dn", d, "CN=*," + smokeOU, dirgate.ENOTFOUND},
		// The configuration partition lies below the domain's DN but not in it.
		{"configuration", d, "CN=Authenticated Users,CN=WellKnown Security Principals,CN=Configuration," + dc.BaseDN, dirgate.ENOTFOUND},
		// A narrowed BaseDN hides everything else, whatever the form.
		{"narrow inside", dn, smokeHash, smokeHash},
		{"narrow dn outside", dn, smokeAlice, dirgate.ENOTFOUND},
		{"narrow guid outside", dn, alice.GUID, dirgate.ENOTFOUND},
		{"narrow sid outside", dn, "S-1-5-11", dirgate.ENOTFOUND},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.d.Lookup(context.Background(), dirgate.MustParseIdentifier(tt.id), nil)
			if err == nil && dirgate.MustParseDN(got.DN).EqualFold(dirgate.MustParseDN(tt.want)) {
				return
			}
			if code := dirgate.ErrorCode(err); code != tt.want {
				t.Errorf("Lookup(%s) = %s, %v; want %s", tt.id, got.DN, err, tt.want)
			}
		})
	}
	// Properties and account states come back rendered.
	o := mustLookup(t, d, smokeGroup, "description", "member", "objectSid")
	if len(o.Properties["member"]) != 8 || o.Properties["description"][0] != "every kind of member" || o.Properties["objectsid"][0] != o.SID {
		t.Errorf("smoke-group properties = %v", o.Properties)
	}
	if mc := mustLookup(t, d, "CN=smoke-mustchange,"+smokeOU); mc.PasswordStatus == nil || mc.PasswordStatus.ExpirationStatus != dirgate.PasswordExpired {
		t.Errorf("smoke-mustchange password status = %+v", mc.PasswordStatus)
	}
}

// TestIntegrationMembers: every listing strategy (unpaged ASQ as on Samba, paged ASQ
// as on AD, the memberOf filter without ASQ) gives the same members, primary-group
// members included.
func TestIntegrationMembers(t *testing.T) {
	dc := sambatest.Env(t)
	strategies := map[string]func(*Directory){
		"asq":      func(d *Directory) { d.pageASQ.Store(false) },
		"asqPaged": func(d *Directory) { d.pageASQ.Store(true) },
		"memberOf": func(d *Directory) { d.asq = false },
	}
	for name, set := range strategies {
		t.Run(name, func(t *testing.T) {
			c := dcConfig(dc)
			c.PageSize = 3 // several pages even for the smoke groups
			d := openDC(t, c)
			if !d.asq || d.pageASQ.Load() {
				t.Fatalf("Samba detection: asq %v pageASQ %v", d.asq, d.pageASQ.Load())
			}
			set(d)
			tests := []struct {
				group string
				want  []string
			}{
				// One of every kind: users with awkward names, contact, computer, group, FSP.
				{smokeGroup, dnKeys(smokeAlice, smokeSmith, smokeQuoted, smokeHash, smokeContact, smokePC, smokeNested, fspDN)},
				// Only through primaryGroupID.
				{smokePrimary, dnKeys(smokeAlice)},
			}
			for _, tt := range tests {
				got, err := d.Members(context.Background(), mustLookup(t, d, tt.group), []string{"samaccountname"})
				if err != nil {
					t.Fatalf("members of %s: %v", tt.group, err)
				}
				if !slices.Equal(keys(got), tt.want) {
					t.Errorf("members of %s = %v, want %v", tt.group, keys(got), tt.want)
				}
			}
			// Domain Computers holds smoke-pc through primaryGroupID 515.
			got, err := d.Members(context.Background(), mustLookup(t, d, "CN=Domain Computers,CN=Users,"+dc.BaseDN), nil)
			if err != nil || !slices.Contains(keys(got), dirgate.MustParseDN(smokePC).Key()) {
				t.Errorf("Domain Computers: %v, %v; want smoke-pc among them", keys(got), err)
			}
			// Her primary group, her one group, and Domain Users: moving the primary
			// group away from it made the membership explicit, as AD does.
			groups, err := d.MemberOf(context.Background(), mustLookup(t, d, smokeAlice))
			if err != nil || !slices.Equal(keys(groups), dnKeys(smokeGroup, smokePrimary, "CN=Domain Users,CN=Users,"+dc.BaseDN)) {
				t.Errorf("MemberOf(alice) = %v, %v", keys(groups), err)
			}
		})
	}
}

// TestIntegrationLargeGroup lists the fixture's All Staff (more than AD's 1,500-value
// range) through each strategy and fetches its member values by range retrieval.
func TestIntegrationLargeGroup(t *testing.T) {
	dc := sambatest.Env(t)
	if dc.FixtureDir == "" {
		// make test seeds the fixture; only a hand-started smoke DC lacks it.
		ci.SkipOrFail(t, "the DC was seeded without the fixture")
	}
	const allStaff = "CN=All Staff,OU=Groups,DC=corp,DC=example,DC=com"
	d := openDC(t, dcConfig(dc))
	g := mustLookup(t, d, allStaff, "member")
	n := len(g.Properties["member"])
	if n <= 1500 {
		t.Fatalf("All Staff has %d member values, the fixture more than 1500", n)
	}
	for _, asq := range []bool{true, false} {
		d.asq = asq
		got, err := d.Members(context.Background(), g, nil)
		if err != nil || len(got) != n {
			t.Errorf("asq=%v: %d members, %v; want %d", asq, len(got), err, n)
		}
	}
	// Samba answers explicit ranges (docs/directory.md, "Range retrieval"):
	// continuing from 1500 yields the rest, and the values match the unranged read.
	e := ldapentry.NewEntry(g.DN)
	err := d.do(context.Background(), true, func(ctx context.Context, c conn, _ int) error {
		return completeRange(ctx, c, e, pendingRange{attr: "member", next: 1500})
	})
	if err != nil || len(e.Values("member")) != n-1500 {
		t.Fatalf("range from 1500: %d values, %v; want %d", len(e.Values("member")), err, n-1500)
	}
	if string(e.Values("member")[0]) != g.Properties["member"][1500] {
		t.Errorf("value 1500 = %q, want %q", e.Values("member")[0], g.Properties["member"][1500])
	}
}

// addMember restores a member as the administrator; "already there" is fine.
func addMember(t *testing.T, dc sambatest.DC, group, member string) {
	t.Helper()
	m := goldap.NewModifyRequest(group, nil)
	m.Add("member", []string{member})
	if err := dc.DialAdmin(t).Modify(m); err != nil && !goldap.IsErrorWithCode(err, goldap.LDAPResultEntryAlreadyExists) {
		t.Errorf("restore %s in %s: %v", member, group, err)
	}
}

func TestIntegrationRemove(t *testing.T) {
	dc := sambatest.Env(t)
	d := openDC(t, dcConfig(dc))
	ctx := context.Background()
	group, smith := mustLookup(t, d, smokeRemovable), mustLookup(t, d, smokeSmith)
	t.Cleanup(func() { addMember(t, dc, smokeRemovable, smokeSmith) })

	if err := d.RemoveMember(ctx, group, smith); err != nil {
		t.Fatalf("remove: %v", err)
	}
	if ms, _ := d.Members(ctx, group, nil); !slices.Equal(keys(ms), dnKeys(smokeQuoted)) {
		t.Errorf("after removal: %v", keys(ms))
	}
	if err := d.RemoveMember(ctx, group, smith); !errors.Is(err, dirgate.ErrNotMember) {
		t.Errorf("second removal: %v, want ErrNotMember", err)
	}
	alice, primary := mustLookup(t, d, smokeAlice), mustLookup(t, d, smokePrimary)
	if err := d.RemoveMember(ctx, primary, alice); !errors.Is(err, dirgate.ErrPrimaryGroup) {
		t.Errorf("primary group removal: %v, want ErrPrimaryGroup", err)
	}
	if err := d.RemoveMember(ctx, alice, smith); dirgate.ErrorCode(err) != dirgate.EINVALID {
		t.Errorf("removal from a user: %v, want EINVALID (16)", err)
	}
	// A plain user may not change groups: 50 becomes EFORBIDDEN.
	pw := filepath.Join(t.TempDir(), "alice")
	if err := os.WriteFile(pw, []byte(smokeAlicePw+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := dcConfig(dc)
	c.BindDN, c.PasswordFile = smokeAlice, pw
	asAlice := openDC(t, c)
	if err := asAlice.RemoveMember(ctx, group, mustLookup(t, d, smokeQuoted)); dirgate.ErrorCode(err) != dirgate.EFORBIDDEN {
		t.Errorf("removal as a plain user: %v, want EFORBIDDEN", err)
	}
}

// TestIntegrationWriteRetry: a removal whose connection breaks is sent once more; if
// the first attempt had already removed the member, the retry's 53 is success.
func TestIntegrationWriteRetry(t *testing.T) {
	dc := sambatest.Env(t)
	p := startProxy(t, strings.TrimPrefix(dc.URL, "ldaps://"))
	c := dcConfig(dc)
	c.URL = "ldaps://" + p.addr()
	d := openDC(t, c)
	ctx := context.Background()
	group, smith := mustLookup(t, d, smokeRemovable), mustLookup(t, d, smokeSmith)
	t.Cleanup(func() { addMember(t, dc, smokeRemovable, smokeSmith) })
	for _, mode := range []string{"request lost", "response lost"} {
		t.Run(mode, func(t *testing.T) {
			addMember(t, dc, smokeRemovable, smokeSmith)
			before := p.accepted.Load()
			if mode == "request lost" {
				p.dropRequest.Store(true)
			} else {
				p.dropResponse.Store(true)
			}
			if err := d.RemoveMember(ctx, group, smith); err != nil {
				t.Fatalf("remove: %v", err)
			}
			if p.accepted.Load() != before+1 {
				t.Errorf("connections %d -> %d, want one new for the retry", before, p.accepted.Load())
			}
			if ms, _ := d.Members(ctx, group, nil); slices.Contains(keys(ms), dirgate.MustParseDN(smokeSmith).Key()) {
				t.Errorf("member still listed after the removal")
			}
		})
	}
}

// TestIntegrationPool: 8 goroutines share a pool of 4 connections.
func TestIntegrationPool(t *testing.T) {
	dc := sambatest.Env(t)
	p := startProxy(t, strings.TrimPrefix(dc.URL, "ldaps://"))
	c := dcConfig(dc)
	c.URL, c.PoolSize = "ldaps://"+p.addr(), 4
	d := openDC(t, c)
	ids := []string{smokeAlice, smokeSmith, smokeQuoted, smokeHash, smokeGroup, smokePC}
	group := mustLookup(t, d, smokeGroup)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 40 {
				if i%10 == 0 {
					if ms, err := d.Members(context.Background(), group, nil); err != nil || len(ms) != 8 {
						t.Errorf("members: %d, %v", len(ms), err)
						return
					}
					continue
				}
				id := ids[(g+i)%len(ids)]
				if o, err := d.Lookup(context.Background(), dirgate.MustParseIdentifier(id), nil); err != nil ||
					!dirgate.MustParseDN(o.DN).EqualFold(dirgate.MustParseDN(id)) {
					t.Errorf("lookup %s: %s, %v", id, o.DN, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := p.accepted.Load(); n > 4 {
		t.Errorf("%d connections opened, want at most the pool size 4", n)
	}
}

// TestIntegrationReadRetry: a read whose connection is cut is retried on a new
// connection; with the server gone the error is EUPSTREAM.
func TestIntegrationReadRetry(t *testing.T) {
	dc := sambatest.Env(t)
	p := startProxy(t, strings.TrimPrefix(dc.URL, "ldaps://"))
	c := dcConfig(dc)
	c.URL = "ldaps://" + p.addr()
	d := openDC(t, c)
	mustLookup(t, d, smokeAlice)
	before := p.accepted.Load()
	p.dropRequest.Store(true)
	if o := mustLookup(t, d, smokeAlice); o.DN == "" || p.accepted.Load() != before+1 {
		t.Errorf("retry: %s, connections %d -> %d", o.DN, before, p.accepted.Load())
	}
	_ = p.ln.Close() // no new connections
	p.dropRequest.Store(true)
	_, err := d.Lookup(context.Background(), dirgate.MustParseIdentifier(smokeAlice), nil)
	if dirgate.ErrorCode(err) != dirgate.EUPSTREAM {
		t.Errorf("server gone: %v, want EUPSTREAM", err)
	}
}

// TestIntegrationContext: a server that stops answering is cut off by the caller's
// deadline (ETIMEOUT) or cancellation (ECANCELED) long before the request timeout,
// set to an hour here so that only the context can end the call.
func TestIntegrationContext(t *testing.T) {
	dc := sambatest.Env(t)
	p := startProxy(t, strings.TrimPrefix(dc.URL, "ldaps://"))
	c := dcConfig(dc)
	c.URL, c.RequestTimeout = "ldaps://"+p.addr(), time.Hour
	d := openDC(t, c)
	group := mustLookup(t, d, smokeGroup)
	p.stall.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := d.Members(ctx, group, nil); dirgate.ErrorCode(err) != dirgate.ETIMEOUT {
		t.Errorf("deadline: %v, want ETIMEOUT", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	if err := d.RemoveMember(ctx, group, mustLookupStalled(t, d)); dirgate.ErrorCode(err) != dirgate.ECANCELED {
		t.Errorf("cancel: %v, want ECANCELED", err)
	}
	// A request timeout shorter than the caller's deadline applies too.
	d.cfg.RequestTimeout = 200 * time.Millisecond
	if _, err := d.Lookup(context.Background(), dirgate.MustParseIdentifier(smokeAlice), nil); dirgate.ErrorCode(err) != dirgate.ETIMEOUT {
		t.Errorf("request timeout: %v, want ETIMEOUT", err)
	}
	p.stall.Store(false)
	mustLookup(t, d, smokeAlice)
}

// mustLookupStalled returns an object without asking the stalled server.
func mustLookupStalled(t *testing.T, d *Directory) dirgate.Object {
	t.Helper()
	return dirgate.Object{DN: smokeSmith}
}
