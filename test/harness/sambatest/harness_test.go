package sambatest

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-ldap/ldap/v3"
)

// smokeDir holds the LDIF and post file that dc.sh seeds on every start.
const smokeDir = "../samba/testdata"

// TestHarness proves the DC started by test/harness/samba/dc.sh is what the LDAP
// adapter's tests rely on: TLS verified against the harness CA on LDAPS and
// StartTLS, the service account's rights, and the seeded objects and states.
func TestHarness(t *testing.T) {
	dc := Env(t)

	t.Run("LDAPS with full certificate verification", func(t *testing.T) {
		conn := dc.DialService(t)
		checkVerifiedTLS(t, conn)
		root, err := conn.Search(ldap.NewSearchRequest("", ldap.ScopeBaseObject, ldap.NeverDerefAliases,
			0, 0, false, "(objectClass=*)", []string{"defaultNamingContext", "vendorName"}, nil))
		if err != nil {
			t.Fatalf("read rootDSE: %v", err)
		}
		if len(root.Entries) != 1 {
			t.Fatalf("rootDSE: %d entries, want 1", len(root.Entries))
		}
		if got := root.Entries[0].GetAttributeValue("defaultNamingContext"); !dnEqual(t, got, dc.BaseDN) {
			t.Errorf("defaultNamingContext = %q, want %q", got, dc.BaseDN)
		}
		if got := root.Entries[0].GetAttributeValue("vendorName"); !strings.Contains(got, "Samba") {
			t.Errorf("vendorName = %q, want a Samba server", got)
		}
	})

	t.Run("StartTLS on the plain port", func(t *testing.T) {
		conn := dc.Dial(t, dc.StartTLSURL, dc.BindDN, dc.Password)
		checkVerifiedTLS(t, conn)
		// Samba has no WhoAmI; reading the account's groups shows the bind
		// worked and that it holds the rights the README documents.
		e, err := baseSearch(conn, dc.BindDN, "(objectClass=user)", "memberOf")
		if err != nil {
			t.Fatal(err)
		}
		want := "CN=Account Operators,CN=Builtin," + dc.BaseDN
		found := false
		for _, g := range e.GetAttributeValues("memberOf") {
			found = found || dnEqual(t, g, want)
		}
		if !found {
			t.Errorf("service account memberOf = %q, want %s", e.GetAttributeValues("memberOf"), want)
		}
	})

	// Samba's default "ldap server require strong auth" refuses simple binds
	// in clear; the adapter must therefore always use TLS.
	t.Run("simple bind without TLS is refused", func(t *testing.T) {
		conn, err := ldap.DialURL(dc.StartTLSURL, ldap.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}))
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		defer conn.Close()
		err = conn.Bind(dc.BindDN, dc.Password)
		if !ldap.IsErrorWithCode(err, ldap.LDAPResultStrongAuthRequired) {
			t.Errorf("plain bind: err = %v, want result %d (strong auth required)", err, ldap.LDAPResultStrongAuthRequired)
		}
	})

	// The two negative cases show verification is real: the CA and the
	// certificate's IP SAN are what make the positive cases pass.
	t.Run("TLS verification rejects a wrong CA or name", func(t *testing.T) {
		tests := []struct {
			name string
			cfg  *tls.Config
			want any // pointer to the x509 error type expected in the chain
		}{
			// A client that does not trust the harness CA must not connect.
			{name: "system roots only", cfg: &tls.Config{RootCAs: x509.NewCertPool(), ServerName: "127.0.0.1"}, want: new(x509.UnknownAuthorityError)},
			// The certificate names only 127.0.0.1 and localhost.
			{name: "other server name", cfg: &tls.Config{RootCAs: dc.CAPool, ServerName: "dc.corp.example.com"}, want: new(x509.HostnameError)},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				conn, err := ldap.DialURL(dc.URL, ldap.DialWithTLSConfig(tt.cfg),
					ldap.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}))
				if err == nil {
					conn.Close()
					t.Fatal("dial succeeded, want a certificate error")
				}
				if !errors.As(err, tt.want) {
					t.Errorf("dial error %v, want %T in its chain", err, tt.want)
				}
			})
		}
	})

	t.Run("smoke objects", func(t *testing.T) {
		checkSmokeObjects(t, dc, dc.DialService(t))
	})

	t.Run("service account removes a member", func(t *testing.T) {
		checkServiceRemoval(t, dc)
	})

	// The same checks run on the harness's own files and on the project
	// fixture, when dc.sh seeded it.
	seeds := []string{smokeDir}
	if dc.FixtureDir != "" {
		seeds = append(seeds, dc.FixtureDir)
	}
	for _, dir := range seeds {
		seed, post := "smoke.ldif", "smoke-post.json"
		if dir != smokeDir {
			seed, post = "samba-seed.ldif", "samba-post.json"
		}
		t.Run("seeded "+seed, func(t *testing.T) {
			checkSeeded(t, dc.DialService(t), filepath.Join(dir, seed))
		})
		t.Run("post states of "+post, func(t *testing.T) {
			checkPost(t, dc, filepath.Join(dir, post))
		})
	}
}

func checkVerifiedTLS(t *testing.T, conn *ldap.Conn) {
	t.Helper()
	state, ok := conn.TLSConnectionState()
	if !ok {
		t.Fatal("connection is not TLS")
	}
	if len(state.VerifiedChains) == 0 {
		t.Fatal("no verified certificate chain")
	}
	if leaf := state.PeerCertificates[0]; leaf.SerialNumber.Sign() <= 0 {
		t.Errorf("server certificate serial %v is not positive", leaf.SerialNumber)
	}
}

func dnEqual(t *testing.T, a, b string) bool {
	t.Helper()
	da, err := ldap.ParseDN(a)
	if err != nil {
		t.Fatalf("parse DN %q: %v", a, err)
	}
	db, err := ldap.ParseDN(b)
	if err != nil {
		t.Fatalf("parse DN %q: %v", b, err)
	}
	return da.EqualFold(db)
}

func baseSearch(conn *ldap.Conn, dn, filter string, attrs ...string) (*ldap.Entry, error) {
	res, err := conn.Search(ldap.NewSearchRequest(dn, ldap.ScopeBaseObject, ldap.NeverDerefAliases,
		0, 0, false, filter, attrs, nil))
	if err != nil {
		return nil, fmt.Errorf("base search %q: %w", dn, err)
	}
	if len(res.Entries) != 1 {
		return nil, fmt.Errorf("base search %q: %d entries", dn, len(res.Entries))
	}
	return res.Entries[0], nil
}

// checkSmokeObjects verifies the awkward names of smoke.ldif survive the
// round trip: DN escaping, cn values, filter escaping and group membership.
func checkSmokeObjects(t *testing.T, dc DC, conn *ldap.Conn) {
	ou := "OU=dirgate-smoke," + dc.BaseDN
	nested := "OU=Nested Ünits," + ou
	names := []struct {
		name string
		dn   string
		cn   string
	}{
		// ',' '(' ')' '*' and non-ASCII letters.
		{name: "comma parens star unicode", dn: `CN=Smith\, John (Ünïcode)*,` + ou, cn: "Smith, John (Ünïcode)*"},
		// '+' '"' and '\'.
		{name: "plus quote backslash", dn: `CN=a\+b \"quoted\" back\\slash,` + ou, cn: `a+b "quoted" back\slash`},
		// A leading '#' is escaped in the DN only.
		{name: "leading hash", dn: `CN=\#hash-user,` + nested, cn: "#hash-user"},
		// Letters outside Latin-1.
		{name: "non-ASCII", dn: "CN=Zoë Ørsted-Łukasz," + nested, cn: "Zoë Ørsted-Łukasz"},
	}
	for _, tt := range names {
		t.Run(tt.name, func(t *testing.T) {
			e, err := baseSearch(conn, tt.dn, "(objectClass=user)", "cn")
			if err != nil {
				t.Fatal(err)
			}
			if got := e.GetAttributeValue("cn"); got != tt.cn {
				t.Errorf("cn = %q, want %q", got, tt.cn)
			}
			res, err := conn.Search(ldap.NewSearchRequest(ou, ldap.ScopeWholeSubtree, ldap.NeverDerefAliases,
				0, 0, false, "(&(objectClass=user)(cn="+ldap.EscapeFilter(tt.cn)+"))", []string{"cn"}, nil))
			if err != nil {
				t.Fatalf("filter search: %v", err)
			}
			if len(res.Entries) != 1 || !dnEqual(t, res.Entries[0].DN, tt.dn) {
				t.Errorf("filter on escaped cn found %d entries, want only %s", len(res.Entries), tt.dn)
			}
		})
	}

	// smoke-alice's primary group moved to smoke-primary: Samba (like AD)
	// then drops her from smoke-primary's member list and makes the former
	// primary group, Domain Users, an explicit membership. The fixture models
	// the same, so the harness keeps it.
	alice, err := baseSearch(conn, "CN=smoke-alice,"+ou, "(objectClass=user)", "memberOf")
	if err != nil {
		t.Fatal(err)
	}
	wantGroups := []string{"CN=smoke-group," + ou, "CN=Domain Users,CN=Users," + dc.BaseDN}
	gotGroups := alice.GetAttributeValues("memberOf")
	if len(gotGroups) != len(wantGroups) {
		t.Errorf("smoke-alice memberOf = %q, want %q", gotGroups, wantGroups)
	}
	for _, w := range wantGroups {
		found := false
		for _, g := range gotGroups {
			found = found || dnEqual(t, g, w)
		}
		if !found {
			t.Errorf("smoke-alice memberOf = %q, lacks %s", gotGroups, w)
		}
	}

	group, err := baseSearch(conn, "CN=smoke-group,"+ou, "(objectClass=group)", "member")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"CN=smoke-alice," + ou, names[0].dn, names[1].dn, names[2].dn,
		"CN=smoke-contact," + ou, "CN=smoke-pc," + ou, "CN=smoke-nested," + nested,
		"CN=S-1-5-11,CN=ForeignSecurityPrincipals," + dc.BaseDN,
	}
	got := group.GetAttributeValues("member")
	if len(got) != len(want) {
		t.Errorf("smoke-group has %d members %q, want %d", len(got), got, len(want))
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			found = found || dnEqual(t, g, w)
		}
		if !found {
			t.Errorf("smoke-group lacks member %s", w)
		}
	}
}

// checkServiceRemoval proves the service account may remove group members
// (the reason it is in Account Operators) and restores the member as admin.
func checkServiceRemoval(t *testing.T, dc DC) {
	group := "CN=smoke-removable,OU=dirgate-smoke," + dc.BaseDN
	member := `CN=Smith\, John (Ünïcode)*,OU=dirgate-smoke,` + dc.BaseDN
	svc, admin := dc.DialService(t), dc.DialAdmin(t)
	t.Cleanup(func() {
		add := ldap.NewModifyRequest(group, nil)
		add.Add("member", []string{member})
		if err := admin.Modify(add); err != nil && !ldap.IsErrorWithCode(err, ldap.LDAPResultEntryAlreadyExists) {
			t.Errorf("restore member: %v", err)
		}
	})
	del := ldap.NewModifyRequest(group, nil)
	del.Delete("member", []string{member})
	if err := svc.Modify(del); err != nil {
		t.Fatalf("service account removing a member: %v", err)
	}
	res, err := svc.Search(ldap.NewSearchRequest(group, ldap.ScopeBaseObject, ldap.NeverDerefAliases,
		0, 0, false, "(member="+ldap.EscapeFilter(member)+")", []string{"cn"}, nil))
	if err != nil {
		t.Fatalf("check removal: %v", err)
	}
	if len(res.Entries) != 0 {
		t.Errorf("member still present after removal")
	}
	// Removing a non-member answers 53 on Samba (and AD); the adapter maps it.
	if err := svc.Modify(del); !ldap.IsErrorWithCode(err, ldap.LDAPResultUnwillingToPerform) {
		t.Errorf("second removal: err = %v, want result 53", err)
	}
}

// ldifDNs returns the DN of every record of an LDIF file, unfolding
// continuation lines and decoding base64 (dn::) values.
func ldifDNs(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("ldif dns: %w", err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, " ") && len(lines) > 0 {
			lines[len(lines)-1] += l[1:]
			continue
		}
		lines = append(lines, l)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("ldif dns: %w", err)
	}
	var dns []string
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "dn:: "):
			b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(l[5:]))
			if err != nil {
				return nil, fmt.Errorf("ldif dns: %q: %w", l, err)
			}
			dns = append(dns, string(b))
		case strings.HasPrefix(l, "dn: "):
			dns = append(dns, strings.TrimSpace(l[4:]))
		}
	}
	return dns, nil
}

func checkSeeded(t *testing.T, conn *ldap.Conn, path string) {
	dns, err := ldifDNs(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(dns) == 0 {
		t.Fatalf("%s has no records", path)
	}
	for _, dn := range dns {
		if _, err := baseSearch(conn, dn, "(objectClass=*)", "1.1"); err != nil {
			t.Errorf("seeded entry missing: %v", err)
		}
	}
}

// postFile is the shape of samba-post.json / smoke-post.json.
type postFile struct {
	Passwords    []postPassword `json:"passwords"`
	Lock         []postPassword `json:"lock"`
	MustChange   []string       `json:"mustChange"`
	PrimaryGroup []postPrimary  `json:"primaryGroup"`
}

type postPassword struct {
	DN       string `json:"dn"`
	Password string `json:"password"`
}

type postPrimary struct {
	Member string `json:"member"`
	Group  string `json:"group"`
}

// tryBind binds on a fresh LDAPS connection and returns the bind error.
func tryBind(dc DC, dn, password string) error {
	conn, err := ldap.DialURL(dc.URL, ldap.DialWithTLSConfig(dc.TLSConfig()),
		ldap.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}))
	if err != nil {
		return fmt.Errorf("try bind: %w", err)
	}
	defer conn.Close()
	return conn.Bind(dn, password)
}

// rid returns the last sub-authority of a binary objectSid.
func rid(sid []byte) (uint32, error) {
	if len(sid) < 8 || len(sid) != 8+4*int(sid[1]) || sid[1] == 0 {
		return 0, fmt.Errorf("rid: malformed objectSid of %d bytes", len(sid))
	}
	return binary.LittleEndian.Uint32(sid[len(sid)-4:]), nil
}

// checkPost verifies every state a post file asks for, reading it as the
// adapter will: passwords bind, locked accounts carry the computed lockout
// bit, must-change accounts have pwdLastSet 0, primary groups match RIDs.
func checkPost(t *testing.T, dc DC, path string) {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields() // as dc.sh does: a misspelt key is a broken fixture
	var post postFile
	if err := dec.Decode(&post); err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	conn := dc.DialService(t)
	noBind := map[string]bool{}
	for _, dn := range post.MustChange {
		noBind[strings.ToLower(dn)] = true
		e, err := baseSearch(conn, dn, "(objectClass=user)", "pwdLastSet")
		if err != nil {
			t.Error(err)
			continue
		}
		if got := e.GetAttributeValue("pwdLastSet"); got != "0" {
			t.Errorf("%s: pwdLastSet = %q, want 0", dn, got)
		}
	}
	for _, l := range post.Lock {
		noBind[strings.ToLower(l.DN)] = true
		e, err := baseSearch(conn, l.DN, "(objectClass=user)", "msDS-User-Account-Control-Computed")
		if err != nil {
			t.Error(err)
			continue
		}
		computed, _ := strconv.ParseInt(e.GetAttributeValue("msDS-User-Account-Control-Computed"), 10, 64)
		if computed&0x10 == 0 {
			t.Errorf("%s: msDS-User-Account-Control-Computed = %d, want the lockout bit 0x10", l.DN, computed)
		}
		// Even the right password is refused while the account is locked.
		if err := tryBind(dc, l.DN, l.Password); !ldap.IsErrorWithCode(err, ldap.LDAPResultInvalidCredentials) {
			t.Errorf("bind as locked %s: err = %v, want result 49", l.DN, err)
		}
	}
	for _, p := range post.Passwords {
		if noBind[strings.ToLower(p.DN)] {
			continue // a must-change or locked account refuses even the right password
		}
		if err := tryBind(dc, p.DN, p.Password); err != nil {
			t.Errorf("bind as %s with its fixture password: %v", p.DN, err)
		}
	}
	for _, pg := range post.PrimaryGroup {
		g, err := baseSearch(conn, pg.Group, "(objectClass=group)", "objectSid")
		if err != nil {
			t.Error(err)
			continue
		}
		want, err := rid(g.GetRawAttributeValue("objectSid"))
		if err != nil {
			t.Errorf("%s: %v", pg.Group, err)
			continue
		}
		m, err := baseSearch(conn, pg.Member, "(objectClass=*)", "primaryGroupID")
		if err != nil {
			t.Error(err)
			continue
		}
		if got := m.GetAttributeValue("primaryGroupID"); got != strconv.FormatUint(uint64(want), 10) {
			t.Errorf("%s: primaryGroupID = %s, want %d (RID of %s)", pg.Member, got, want, pg.Group)
		}
	}
}
