package sambatest

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/go-ntlmssp"
	ber "github.com/go-asn1-ber/asn1-ber"
	"github.com/go-ldap/ldap/v3"
)

// TestForest proves, and so documents, what tests of several domains rely on in
// the two domains of test/harness/samba/forest.sh (docs/directory.md, "Several
// domains: what the directory shows"). It only reads.
func TestForest(t *testing.T) {
	f := ForestFromEnv(t)
	both := []ForestDomain{f.Corp, f.Fabrikam}

	t.Run("each DC answers over LDAPS as its domain's service account", func(t *testing.T) {
		for _, d := range both {
			conn := d.DC().DialService(t)
			checkVerifiedTLS(t, conn)
			e, err := baseSearch(conn, d.BaseDN, "(objectClass=domain)", "objectSid")
			if err != nil {
				t.Fatalf("%s: read the domain object: %v", d.NetBIOS, err)
			}
			if got := sidString(e.GetRawAttributeValue("objectSid")); got != d.SID {
				t.Errorf("%s: domain SID %s, env says %s", d.NetBIOS, got, d.SID)
			}
		}
	})

	t.Run("each domain holds a two-way forest trust object for the other", func(t *testing.T) {
		for i, d := range both {
			other := both[1-i]
			conn := d.DC().DialService(t)
			res, err := conn.Search(ldap.NewSearchRequest("CN=System,"+d.BaseDN, ldap.ScopeSingleLevel, ldap.NeverDerefAliases,
				0, 0, false, "(objectClass=trustedDomain)",
				[]string{"trustPartner", "flatName", "trustDirection", "trustType", "trustAttributes", "securityIdentifier"}, nil))
			if err != nil {
				t.Fatalf("%s: search trustedDomain: %v", d.NetBIOS, err)
			}
			if len(res.Entries) != 1 {
				t.Fatalf("%s: %d trustedDomain objects, want 1", d.NetBIOS, len(res.Entries))
			}
			e := res.Entries[0]
			want := "CN=" + other.DNSName() + ",CN=System," + d.BaseDN
			if !dnEqual(t, e.DN, want) {
				t.Errorf("%s: trust object %s, want %s", d.NetBIOS, e.DN, want)
			}
			for attr, want := range map[string]string{
				"trustPartner": other.DNSName(), "flatName": other.NetBIOS,
				"trustDirection": "3", // inbound | outbound
				"trustType":      "2", // uplevel: an Active Directory domain
			} {
				if got := e.GetAttributeValue(attr); !strings.EqualFold(got, want) {
					t.Errorf("%s: %s = %q, want %q", d.NetBIOS, attr, got, want)
				}
			}
			// TRUST_ATTRIBUTE_FOREST_TRANSITIVE (0x8) makes it a forest trust.
			if a, err := strconv.Atoi(e.GetAttributeValue("trustAttributes")); err != nil || a&0x8 == 0 {
				t.Errorf("%s: trustAttributes %q lacks FOREST_TRANSITIVE (0x8)", d.NetBIOS, e.GetAttributeValue("trustAttributes"))
			}
			if got := sidString(e.GetRawAttributeValue("securityIdentifier")); got != other.SID {
				t.Errorf("%s: securityIdentifier %s, want the other domain's SID %s", d.NetBIOS, got, other.SID)
			}
		}
	})

	t.Run("a foreign security principal stands for the other domain's member", func(t *testing.T) {
		// In CORP's local group: FABRIKAM's user. In FABRIKAM's: CORP's global group.
		for i, d := range both {
			other := both[1-i]
			foreignDN := []string{f.Fabrikam.UserDN, f.Corp.GlobalDN}[i]
			conn := d.DC().DialService(t)
			otherConn := other.DC().DialService(t)
			foreign, err := baseSearch(otherConn, foreignDN, "(objectClass=*)", "objectSid")
			if err != nil {
				t.Fatalf("%s: read %s: %v", other.NetBIOS, foreignDN, err)
			}
			sid := sidString(foreign.GetRawAttributeValue("objectSid"))

			g, err := baseSearch(conn, d.LocalDN, "(objectClass=group)", "member")
			if err != nil {
				t.Fatalf("%s: read %s: %v", d.NetBIOS, d.LocalDN, err)
			}
			// member lists the FSP by its plain DN: CN=<SID>,CN=ForeignSecurityPrincipals,<domain>.
			want := "CN=" + sid + ",CN=ForeignSecurityPrincipals," + d.BaseDN
			if !slices.ContainsFunc(g.GetAttributeValues("member"), func(m string) bool { return dnEqual(t, m, want) }) {
				t.Errorf("%s: %s members %q, want %s among them", d.NetBIOS, d.LocalDN, g.GetAttributeValues("member"), want)
			}
			if !dnEqual(t, d.FSPDN, want) {
				t.Errorf("%s: env FSP_DN %s, want %s", d.NetBIOS, d.FSPDN, want)
			}

			fsp, err := baseSearch(conn, want, "(objectClass=*)", "objectClass", "objectSid", "memberOf", "cn")
			if err != nil {
				t.Fatalf("%s: read the FSP: %v", d.NetBIOS, err)
			}
			if got := fsp.GetAttributeValues("objectClass"); !slices.Equal(got, []string{"top", "foreignSecurityPrincipal"}) {
				t.Errorf("%s: FSP objectClass %q, want [top foreignSecurityPrincipal]", d.NetBIOS, got)
			}
			if got := sidString(fsp.GetRawAttributeValue("objectSid")); got != sid {
				t.Errorf("%s: FSP objectSid %s, want %s", d.NetBIOS, got, sid)
			}
			if fsp.GetAttributeValue("cn") != sid {
				t.Errorf("%s: FSP cn %q, want the SID %s", d.NetBIOS, fsp.GetAttributeValue("cn"), sid)
			}
			if got := fsp.GetAttributeValues("memberOf"); len(got) != 1 || !dnEqual(t, got[0], d.LocalDN) {
				t.Errorf("%s: FSP memberOf %q, want [%s]", d.NetBIOS, got, d.LocalDN)
			}
			// The SID leads back to the object on the other domain's DC.
			back, err := baseSearch(otherConn, "<SID="+sid+">", "(objectClass=*)", "distinguishedName")
			if err != nil {
				t.Fatalf("%s: <SID=%s>: %v", other.NetBIOS, sid, err)
			}
			if !dnEqual(t, back.DN, foreignDN) {
				t.Errorf("%s: <SID=%s> is %s, want %s", other.NetBIOS, sid, back.DN, foreignDN)
			}
			// The domain holding the FSP knows nothing more of it: no name, no class of the real object.
			if _, err := baseSearch(conn, foreignDN, "(objectClass=*)"); !ldap.IsErrorWithCode(err, ldap.LDAPResultNoSuchObject) {
				t.Errorf("%s: reading %s there: %v, want 32 noSuchObject", d.NetBIOS, foreignDN, err)
			}
		}
	})

	t.Run("the extended DN control gives the FSP member its GUID and SID", func(t *testing.T) {
		conn := f.Corp.DC().DialService(t)
		res, err := conn.Search(ldap.NewSearchRequest(f.Corp.LocalDN, ldap.ScopeBaseObject, ldap.NeverDerefAliases, 0, 0, false,
			"(objectClass=*)", []string{"member"},
			[]ldap.Control{ldap.NewControlString(ldap.ControlTypeMicrosoftExtendedDN, false, "\x30\x03\x02\x01\x01")}))
		if err != nil || len(res.Entries) != 1 {
			t.Fatalf("search %s with the extended DN control: %v", f.Corp.LocalDN, err)
		}
		fspSID := strings.TrimPrefix(strings.SplitN(f.Corp.FSPDN, ",", 2)[0], "CN=")
		var found string
		for _, m := range res.Entries[0].GetAttributeValues("member") {
			if strings.Contains(m, "<SID="+fspSID+">") {
				found = m
			}
		}
		// <GUID=…>;<SID=S-1-5-21-…>;CN=S-1-5-21-…,CN=ForeignSecurityPrincipals,DC=corp,…
		if !strings.HasPrefix(found, "<GUID=") || !strings.HasSuffix(strings.ToLower(found), strings.ToLower(";"+f.Corp.FSPDN)) {
			t.Errorf("extended member values %q: want <GUID=…>;<SID=%s>;%s", res.Entries[0].GetAttributeValues("member"), fspSID, f.Corp.FSPDN)
		}
		t.Logf("FSP member with the extended DN control: %s", found)
	})

	t.Run("across the trust a simple bind is refused and an NTLM bind accepted", func(t *testing.T) {
		corp, fab := f.Corp.DC(), f.Fabrikam
		// The same names and password bind on FABRIKAM's own DC.
		if err := tryBind(fab.DC(), fab.UserUPN(), fab.UserPassword); err != nil {
			t.Fatalf("simple bind as %s on FABRIKAM's DC: %v", fab.UserUPN(), err)
		}
		for _, name := range []string{fab.UserDN, fab.UserUPN(), fab.NetBIOS + `\` + fab.UserName} {
			err := tryBind(corp, name, fab.UserPassword)
			var le *ldap.Error
			if !errors.As(err, &le) || le.ResultCode != ldap.LDAPResultInvalidCredentials {
				t.Errorf("simple bind as %s on CORP's DC: %v, want 49 invalidCredentials", name, err)
				continue
			}
			// AD's "unknown user or wrong password" (data 52e): nothing says "trust".
			if !strings.Contains(le.Err.Error(), "data 52e") {
				t.Errorf("simple bind as %s on CORP's DC: diagnostic %q, want AD's data 52e", name, le.Err)
			}
			t.Logf("simple bind as %s on CORP's DC: %v", name, err)
		}

		// go-ldap's NTLMBind sends NTLM in the bind's Sicily choices, which Samba
		// does not implement: it closes the connection (EOF), for any account.
		if err := dialNoBind(t, corp).NTLMBind(fab.NetBIOS, fab.UserName, fab.UserPassword); err == nil ||
			ldap.IsErrorWithCode(err, ldap.LDAPResultInvalidCredentials) {
			t.Errorf("go-ldap NTLMBind on CORP's DC: %v, want the connection closed", err)
		} else {
			t.Logf("go-ldap NTLMBind on CORP's DC: %v", err)
		}

		// NTLM inside SASL GSS-SPNEGO, as Windows and Samba's own tools send it, is
		// accepted: forest.sh lets it go unsigned over LDAPS (allow_sasl_over_tls).
		conn, err := spnegoNTLMBind(corp, fab.NetBIOS+`\`+fab.UserName, fab.UserPassword)
		if err != nil {
			t.Fatalf("GSS-SPNEGO (NTLM) bind as %s\\%s on CORP's DC: %v", fab.NetBIOS, fab.UserName, err)
		}
		defer conn.Close()
		// Samba has no whoami extended operation (2 protocolError); that the
		// connection may read beyond the root DSE shows it is authenticated
		// (an anonymous search gets 1 operationsError there).
		g, err := baseSearch(conn, f.Corp.LocalDN, "(objectClass=group)", "member")
		if err != nil {
			t.Fatalf("read %s as FABRIKAM's user after the GSS-SPNEGO bind: %v", f.Corp.LocalDN, err)
		}
		t.Logf("GSS-SPNEGO (NTLM) bind as %s\\%s on CORP's DC: reads %s, members %q", fab.NetBIOS, fab.UserName, f.Corp.LocalDN, g.GetAttributeValues("member"))
		anon := dialNoBind(t, corp)
		if _, err := baseSearch(anon, f.Corp.LocalDN, "(objectClass=group)", "member"); err == nil {
			t.Errorf("an anonymous connection read %s: the read above proves nothing", f.Corp.LocalDN)
		}

		// A wrong password is refused as a simple bind's is: 49, data 52e.
		_, err = spnegoNTLMBind(corp, fab.NetBIOS+`\`+fab.UserName+"-nobody", "wrong")
		if !ldap.IsErrorWithCode(err, ldap.LDAPResultInvalidCredentials) || !strings.Contains(err.Error(), "data 52e") {
			t.Errorf("GSS-SPNEGO (NTLM) bind as an unknown FABRIKAM user: %v, want 49 with data 52e", err)
		}
		t.Logf("GSS-SPNEGO (NTLM) bind as an unknown FABRIKAM user on CORP's DC: %v", err)
	})
}

// spnegoNTLMBind opens an LDAPS connection to dc and binds with SASL
// GSS-SPNEGO carrying raw NTLMSSP messages (user is DOMAIN\name), then hands
// the connection to go-ldap. Over TLS no signing or sealing is negotiated, so
// later requests travel unwrapped.
func spnegoNTLMBind(dc DC, user, password string) (*ldap.Conn, error) {
	u, err := url.Parse(dc.URL)
	if err != nil {
		return nil, fmt.Errorf("spnego bind: %w", err)
	}
	raw, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", u.Host, dc.TLSConfig())
	if err != nil {
		return nil, fmt.Errorf("spnego bind: %w", err)
	}
	if err := raw.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		raw.Close()
		return nil, fmt.Errorf("spnego bind: %w", err)
	}
	fail := func(err error) (*ldap.Conn, error) {
		raw.Close()
		return nil, err
	}
	neg, err := ntlmssp.NewNegotiateMessage("", "")
	if err != nil {
		return fail(fmt.Errorf("spnego bind: %w", err))
	}
	challenge, err := saslBindStep(raw, 1, neg, ldap.LDAPResultSaslBindInProgress)
	if err != nil {
		return fail(err)
	}
	auth, err := ntlmssp.NewAuthenticateMessage(challenge, user, password, nil)
	if err != nil {
		return fail(fmt.Errorf("spnego bind: %w", err))
	}
	if _, err := saslBindStep(raw, 2, auth, ldap.LDAPResultSuccess); err != nil {
		return fail(err)
	}
	if err := raw.SetDeadline(time.Time{}); err != nil {
		return fail(fmt.Errorf("spnego bind: %w", err))
	}
	conn := ldap.NewConn(raw, true)
	conn.Start()
	conn.SetTimeout(30 * time.Second)
	return conn, nil
}

// saslBindStep sends one SASL GSS-SPNEGO bind request with token and returns
// the server's SASL credentials, or an *ldap.Error unless the result is want.
func saslBindStep(c net.Conn, id int64, token []byte, want uint16) ([]byte, error) {
	env := ber.Encode(ber.ClassUniversal, ber.TypeConstructed, ber.TagSequence, nil, "LDAP Request")
	env.AppendChild(ber.NewInteger(ber.ClassUniversal, ber.TypePrimitive, ber.TagInteger, id, "MessageID"))
	req := ber.Encode(ber.ClassApplication, ber.TypeConstructed, ldap.ApplicationBindRequest, nil, "Bind Request")
	req.AppendChild(ber.NewInteger(ber.ClassUniversal, ber.TypePrimitive, ber.TagInteger, 3, "Version"))
	req.AppendChild(ber.NewString(ber.ClassUniversal, ber.TypePrimitive, ber.TagOctetString, "", "User Name"))
	sasl := ber.Encode(ber.ClassContext, ber.TypeConstructed, 3, nil, "SASL")
	sasl.AppendChild(ber.NewString(ber.ClassUniversal, ber.TypePrimitive, ber.TagOctetString, "GSS-SPNEGO", "Mechanism"))
	sasl.AppendChild(ber.NewString(ber.ClassUniversal, ber.TypePrimitive, ber.TagOctetString, string(token), "Credentials"))
	req.AppendChild(sasl)
	env.AppendChild(req)
	if _, err := c.Write(env.Bytes()); err != nil {
		return nil, fmt.Errorf("spnego bind: write: %w", err)
	}
	p, err := ber.ReadPacket(c)
	if err != nil {
		return nil, fmt.Errorf("spnego bind: read: %w", err)
	}
	if len(p.Children) < 2 || len(p.Children[1].Children) < 3 {
		return nil, fmt.Errorf("spnego bind: malformed response")
	}
	resp := p.Children[1].Children
	code, _ := resp[0].Value.(int64)
	if uint16(code) != want {
		diag, _ := resp[2].Value.(string)
		return nil, &ldap.Error{ResultCode: uint16(code), Err: errors.New(diag)}
	}
	for _, ch := range resp[3:] {
		if ch.ClassType == ber.ClassContext && ch.Tag == 7 { // serverSaslCreds
			return ch.Data.Bytes(), nil
		}
	}
	return nil, nil
}

// dialNoBind opens an LDAPS connection to dc that the test binds itself.
func dialNoBind(t *testing.T, dc DC) *ldap.Conn {
	t.Helper()
	conn, err := ldap.DialURL(dc.URL, ldap.DialWithTLSConfig(dc.TLSConfig()))
	if err != nil {
		t.Fatalf("dial %s: %v", dc.URL, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// sidString is the S-1-… form of a binary SID ("" if malformed).
func sidString(b []byte) string {
	if len(b) < 8 || len(b) != 8+4*int(b[1]) {
		return ""
	}
	var auth uint64
	for _, x := range b[2:8] {
		auth = auth<<8 | uint64(x)
	}
	s := "S-" + strconv.Itoa(int(b[0])) + "-" + strconv.FormatUint(auth, 10)
	for i := 0; i < int(b[1]); i++ {
		o := 8 + 4*i
		s += "-" + strconv.FormatUint(uint64(b[o])|uint64(b[o+1])<<8|uint64(b[o+2])<<16|uint64(b[o+3])<<24, 10)
	}
	return s
}

func TestForestFrom(t *testing.T) {
	dir := t.TempDir()
	pw := dir + "/pw"
	if err := os.WriteFile(pw, []byte("Pw-1"), 0o600); err != nil {
		t.Fatal(err)
	}
	writeCA(t, dir+"/ca.pem")
	full := map[string]string{
		VarForestCAFile: dir + "/ca.pem", VarForestDNS: "10.231.90.1:53", VarForestStateDir: dir,
		VarForestScript: "/x/forest.sh",
	}
	for i, d := range []struct{ netbios, realm, base, ip string }{
		{ForestCorp, "CORP.EXAMPLE.COM", "DC=corp,DC=example,DC=com", "10.231.90.11"},
		{ForestFabrikam, "FABRIKAM.EXAMPLE.NET", "DC=fabrikam,DC=example,DC=net", "10.231.90.12"},
	} {
		for _, s := range forestDomainVars {
			full[ForestVar(d.netbios, s)] = "CN=x," + d.base
		}
		for s, v := range map[string]string{
			"URL": "ldaps://" + d.ip + ":636", "DC_NAME": "dc." + strings.ToLower(d.realm), "REALM": d.realm,
			"NETBIOS": d.netbios, "BASE_DN": d.base, "SID": "S-1-5-21-1-2-" + strconv.Itoa(i),
			"PASSWORD_FILE": pw, "ADMIN_PASSWORD_FILE": pw, "USER_PASSWORD_FILE": pw, "USER_NAME": "u",
		} {
			full[ForestVar(d.netbios, s)] = v
		}
	}
	with := func(k, v string) func(string) string {
		return func(name string) string {
			if name == k {
				return v
			}
			return full[name]
		}
	}
	cases := []struct {
		name         string
		getenv       func(string) string
		skip, failed bool
	}{
		{"complete", with("", ""), false, false},
		{"nothing set", func(string) string { return "" }, true, false},
		{"nothing set under CI", func(k string) string {
			if k == "CI" {
				return "true"
			}
			return ""
		}, false, true},
		{"one missing", with(ForestVar(ForestFabrikam, "FSP_DN"), ""), false, true},
		{"public address", with(ForestVar(ForestCorp, "URL"), "ldaps://192.0.2.1:636"), false, true},
		{"not a domain SID", with(ForestVar(ForestCorp, "SID"), "S-1-5-32"), false, true},
		{"domains swapped", with(ForestVar(ForestCorp, "NETBIOS"), ForestFabrikam), false, true},
	}
	for _, tc := range cases {
		rec := &recordingTB{}
		f := forestFrom(rec, tc.getenv)
		if rec.skipped != tc.skip || rec.failed != tc.failed {
			t.Errorf("%s: skipped=%v failed=%v (%s), want skipped=%v failed=%v", tc.name, rec.skipped, rec.failed, rec.msg, tc.skip, tc.failed)
		}
		if !tc.skip && !tc.failed && (f.Fabrikam.Host() != "10.231.90.12" || f.Corp.UserPassword != "Pw-1" || f.Corp.UserUPN() != "u@corp.example.com") {
			t.Errorf("%s: got %+v", tc.name, f)
		}
	}
}

func TestSIDString(t *testing.T) {
	// Revision 1, five sub-authorities, authority 5 (big-endian), then
	// 21, 508194244, 2207136538, 3014242401, 1104 (each little-endian).
	b := []byte{1, 5, 0, 0, 0, 0, 0, 5, 0x15, 0, 0, 0, 0xc4, 0x6d, 0x4a, 0x1e,
		0x1a, 0x3b, 0x8e, 0x83, 0x61, 0xb0, 0xa9, 0xb3, 0x50, 0x04, 0, 0}
	if got, want := sidString(b), "S-1-5-21-508194244-2207136538-3014242401-1104"; got != want {
		t.Errorf("sidString = %s, want %s", got, want)
	}
	if got := sidString(b[:27]); got != "" {
		t.Errorf("sidString(truncated) = %q, want \"\"", got)
	}
}
