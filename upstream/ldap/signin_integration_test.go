package ldap

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/ldapentry"
	"github.com/dirgate/dirgate/test/harness/sambatest"
	goldap "github.com/go-ldap/ldap/v3"
)

const signInPassword = "Sign-In-Test-1x"

// tempSAM names a test account: unique per run and at most 20 characters.
func tempSAM(tag string) string { return fmt.Sprintf("si%s%d", tag, os.Getpid()%100000) }

func mustName(t *testing.T, s string) dirgate.SignInName {
	t.Helper()
	n, err := dirgate.ParseSignInName(s)
	if err != nil {
		t.Fatalf("name %q: %v", s, err)
	}
	return n
}

// adminRead reads one attribute of dn as the administrator.
func adminRead(t *testing.T, admin *goldap.Conn, dn, attr string) string {
	t.Helper()
	res, err := admin.Search(goldap.NewSearchRequest(dn, goldap.ScopeBaseObject, goldap.NeverDerefAliases, 0, 0, false,
		"(objectClass=*)", []string{attr}, nil))
	if err != nil || len(res.Entries) != 1 {
		t.Fatalf("read %s of %s: %v", attr, dn, err)
	}
	return res.Entries[0].GetAttributeValue(attr)
}

func replace(t *testing.T, admin *goldap.Conn, dn, attr string, vals ...string) {
	t.Helper()
	m := goldap.NewModifyRequest(dn, nil)
	m.Replace(attr, vals)
	if err := admin.Modify(m); err != nil {
		t.Fatalf("set %s of %s: %v", attr, dn, err)
	}
}

func reasonOf(err error) string {
	var se *dirgate.SignInError
	if errors.As(err, &se) {
		return se.Reason
	}
	return ""
}

// TestCheckPasswordOutcomes binds as accounts this test creates, one per state of
// the table in docs/auth.md, and checks each answer.
func TestCheckPasswordOutcomes(t *testing.T) {
	dc := sambatest.Env(t)
	d := openDC(t, dcConfig(dc))
	ctx := context.Background()
	admin := dc.DialAdmin(t)
	netbios := strings.ToUpper(strings.SplitN(dnsDomain(dc.BaseDN), ".", 2)[0])

	okDN, okUPN := dc.TempUser(t, tempSAM("ok"), signInPassword, nil)
	wantGUID := ldapentry.GUIDFromBytes([]byte(adminRead(t, admin, okDN, "objectGUID")))
	for _, name := range []string{okUPN, strings.ToUpper(okUPN), netbios + `\` + tempSAM("ok")} {
		id, err := d.CheckPassword(ctx, mustName(t, name), signInPassword)
		if err != nil || id.Canonical() != wantGUID {
			t.Errorf("%s: %v %v, want %s", name, id, err, wantGUID)
		}
	}

	// A DOMAIN\\user is looked up only when DOMAIN is the served domain's NetBIOS
	// name (read from its crossRef at the first down-level sign-in): a trusted
	// domain's user, whose bind the DC accepts, must not become this domain's user of
	// the same name. The harness has no trust; the read is checked, and another
	// domain part is refused whatever the DC said.
	if nb := d.netbios.Load(); nb == nil || !strings.EqualFold(*nb, netbios) {
		t.Errorf("NetBIOS name read as %v, want %s", nb, netbios)
	}
	_, err := d.CheckPassword(ctx, mustName(t, "OTHER"+netbios+`\`+tempSAM("ok")), signInPassword)
	t.Logf("another domain part: %v", err)
	if reasonOf(err) == "" {
		t.Errorf("another domain's name signed in as this domain's account")
	}

	// A wrong password: invalidCredentials, and badPwdCount rises by exactly one
	// (one bind, never retried).
	before, _ := strconv.Atoi(adminRead(t, admin, okDN, "badPwdCount"))
	_, err = d.CheckPassword(ctx, mustName(t, okUPN), "wrong-password")
	if reasonOf(err) != dirgate.ReasonInvalidCredentials {
		t.Errorf("wrong password: %v", err)
	}
	after, _ := strconv.Atoi(adminRead(t, admin, okDN, "badPwdCount"))
	if after != before+1 {
		t.Errorf("badPwdCount went from %d to %d, want +1", before, after)
	}
	// An empty password is never sent (it would be an anonymous bind that succeeds).
	if _, err := d.CheckPassword(ctx, mustName(t, okUPN), ""); reasonOf(err) != dirgate.ReasonInvalidCredentials {
		t.Errorf("empty password: %v", err)
	}
	if n, _ := strconv.Atoi(adminRead(t, admin, okDN, "badPwdCount")); n != after {
		t.Errorf("an empty password reached the DC: badPwdCount %d", n)
	}
	// An unknown user is a wrong password.
	for _, name := range []string{"nobody-" + tempSAM("x") + "@" + dnsDomain(dc.BaseDN), netbios + `\nobody` + tempSAM("")} {
		if _, err := d.CheckPassword(ctx, mustName(t, name), "whatever-1"); reasonOf(err) != dirgate.ReasonInvalidCredentials {
			t.Errorf("unknown %s: %v", name, err)
		}
	}

	states := []struct {
		tag, reason string
		change      func(admin *goldap.Conn, dn string)
	}{
		{"dis", dirgate.ReasonAccountDisabled, func(a *goldap.Conn, dn string) { replace(t, a, dn, "userAccountControl", "514") }},
		// 2020-01-01 as a FILETIME.
		{"exp", dirgate.ReasonAccountExpired, func(a *goldap.Conn, dn string) { replace(t, a, dn, "accountExpires", "132223104000000000") }},
		{"hrs", dirgate.ReasonLogonTime, func(a *goldap.Conn, dn string) { replace(t, a, dn, "logonHours", string(make([]byte, 21))) }},
		{"chg", dirgate.ReasonMustChangePassword, func(a *goldap.Conn, dn string) { replace(t, a, dn, "pwdLastSet", "0") }},
		{"lck", dirgate.ReasonAccountLockedOut, func(_ *goldap.Conn, dn string) {
			for range 3 { // the harness domain's lockout threshold
				c, err := goldap.DialURL(dc.URL, goldap.DialWithTLSConfig(dc.TLSConfig()))
				if err != nil {
					t.Fatal(err)
				}
				_ = c.Bind(dn, "wrong-password")
				c.Close()
			}
		}},
	}
	for _, s := range states {
		dn, upn := dc.TempUser(t, tempSAM(s.tag), signInPassword, s.change)
		id, err := d.CheckPassword(ctx, mustName(t, upn), signInPassword)
		if reasonOf(err) != s.reason {
			t.Errorf("%s with the right password: %v, want %s", s.tag, err, s.reason)
		}
		// A right password that must be changed names its account (for the sign-in
		// rule); no other refusal names anything.
		if wantID := s.reason == dirgate.ReasonMustChangePassword; wantID != !id.IsZero() ||
			wantID && !strings.EqualFold(id.String(), dn) {
			t.Errorf("%s with the right password: identifier %q (account %s)", s.tag, id, dn)
		}
		// With a wrong password every state but a lockout is a wrong password: a
		// session must never be opened, nor an account's state told, without it.
		_, err = d.CheckPassword(ctx, mustName(t, upn), "wrong-password")
		want := dirgate.ReasonInvalidCredentials
		if s.reason == dirgate.ReasonAccountLockedOut {
			want = dirgate.ReasonAccountLockedOut // AD and Samba say 775 whatever the password
		}
		if reasonOf(err) != want {
			t.Errorf("%s with a wrong password: %v, want %s", s.tag, err, want)
		}
	}
}

// TestBindRefusal maps every data code of the table, in the message forms AD and
// Samba send, including 532 which the harness cannot produce (Samba ignored a
// one-second PSO maximum age).
func TestBindRefusal(t *testing.T) {
	for code, want := range map[string]string{
		"52e": dirgate.ReasonInvalidCredentials, "533": dirgate.ReasonAccountDisabled, "775": dirgate.ReasonAccountLockedOut,
		"701": dirgate.ReasonAccountExpired, "530": dirgate.ReasonLogonTime, "532": dirgate.ReasonPasswordExpired,
		"773": dirgate.ReasonMustChangePassword, "531": dirgate.ReasonAccessDenied, "999": dirgate.ReasonInvalidCredentials,
		"": dirgate.ReasonInvalidCredentials,
	} {
		msg := "80090308: LdapErr: DSID-0C0903A9, comment: AcceptSecurityContext error, data " + code + ", v1db1"
		if code == "" {
			msg = "Invalid Credentials"
		}
		err := bindRefusal(goldap.NewError(goldap.LDAPResultInvalidCredentials, errors.New(msg)))
		if got := reasonOf(err); got != want {
			t.Errorf("data %q: %s, want %s", code, got, want)
		}
		// The code goes to the log, mapped or not (999 is not).
		if se := (*dirgate.SignInError)(nil); !errors.As(err, &se) || se.DataCode != code {
			t.Errorf("data %q: DataCode %+v", code, err)
		}
		if strings.ToUpper(code) != code {
			if got := reasonOf(bindRefusal(goldap.NewError(49, errors.New(strings.ToUpper(msg))))); got != want {
				t.Errorf("data %q upper case: %s", code, got)
			}
		}
	}
}

// TestCheckPasswordUPNOutsideBase: the bind goes to the DN of the account the name
// resolves to under the base DN, never to the typed name, which AD resolves
// forest-wide. Account A lies outside the base (the base is CN=Users; A is moved to
// CN=Computers) and is never bound or signed in, even with its right password; B,
// under the base with no explicit UPN, signs in by its implicit UPN. (The confusion
// itself, A with the explicit UPN b@domain, cannot be made on Samba, which refuses
// a UPN that another account's sAMAccountName implies;
// TestResolveBindsTheAccountUnderTheBase covers it on the fake.)
func TestCheckPasswordUPNOutsideBase(t *testing.T) {
	dc := sambatest.Env(t)
	cfg := dcConfig(dc)
	cfg.BaseDN = "CN=Users," + dc.BaseDN
	d := openDC(t, cfg)
	ctx := context.Background()
	admin := dc.DialAdmin(t)

	bDN, bUPN := dc.TempUser(t, tempSAM("b"), signInPassword, func(a *goldap.Conn, dn string) {
		m := goldap.NewModifyRequest(dn, nil)
		m.Delete("userPrincipalName", nil)
		if err := a.Modify(m); err != nil {
			t.Fatalf("remove the UPN of %s: %v", dn, err)
		}
	})
	aSAM := tempSAM("a")
	aDN, aUPN := dc.TempUser(t, aSAM, signInPassword, nil)
	// Out of the base; back before TempUser's cleanup (cleanups run last first).
	rdn := "CN=" + goldap.EscapeDN(aSAM)
	if err := admin.ModifyDN(goldap.NewModifyDNRequest(aDN, rdn, true, "CN=Computers,"+dc.BaseDN)); err != nil {
		t.Fatalf("move %s: %v", aDN, err)
	}
	t.Cleanup(func() {
		c := dc.DialAdmin(t)
		if err := c.ModifyDN(goldap.NewModifyDNRequest(rdn+",CN=Computers,"+dc.BaseDN, rdn, true, "CN=Users,"+dc.BaseDN)); err != nil {
			t.Errorf("move %s back: %v", aDN, err)
		}
	})

	for _, name := range []string{aUPN, strings.ToUpper(strings.SplitN(dnsDomain(dc.BaseDN), ".", 2)[0]) + `\` + aSAM} {
		if id, err := d.CheckPassword(ctx, mustName(t, name), signInPassword); reasonOf(err) != dirgate.ReasonInvalidCredentials {
			t.Errorf("%s, outside the base, with its right password: %v %v, want invalidCredentials", name, id, err)
		}
	}
	bGUID := ldapentry.GUIDFromBytes([]byte(adminRead(t, admin, bDN, "objectGUID")))
	if id, err := d.CheckPassword(ctx, mustName(t, bUPN), signInPassword); err != nil || id.Canonical() != bGUID {
		t.Errorf("%s by its implicit UPN: %v %v, want %s", bUPN, id, err, bGUID)
	}
}
