package ldap

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
)

// TestResolveBindsTheAccountUnderTheBase: the sign-in binds as the DN resolve
// returns, so that DN must be the account under the base DN that the name means,
// whatever account outside the base carries the same explicit UPN (finding: an
// outside account with the explicit UPN bob@domain, whose password AD accepts for
// bob@domain, became the in-base bob when dirgate bound with the typed name).
func TestResolveBindsTheAccountUnderTheBase(t *testing.T) {
	d, served := signInFake(t)
	for name, want := range map[string]string{
		"bob@corp.example.com":    "CN=bob," + served, // the implicit UPN, under the base only
		"carol@mail.example":      "CN=carol," + served,
		"other@corp.example.com":  "", // outside the base: no account, a placeholder bind
		"nobody@corp.example.com": "",
		"bob@mail.example":        "", // no implicit UPN in another suffix
	} {
		n, err := dirgate.ParseSignInName(name)
		if err != nil {
			t.Fatal(err)
		}
		acct, err := d.resolve(context.Background(), n)
		if got := acct.dn; err != nil || got != want || (got != "") != (acct.guid != "") {
			t.Errorf("%s: %q %v, want %q", name, got, err, want)
		}
	}
}

// signInFake is a directory served from OU=Served: bob (no explicit UPN) and carol
// inside it, and outside it an account with the explicit UPN bob@corp.example.com.
func signInFake(t *testing.T) (*Directory, string) {
	s := newFakeServer()
	served := "OU=Served," + s.domain
	s.add(&fakeObj{dn: s.domain, guid: guid(1), sid: domSID, classes: []string{"domain", "domainDNS"}})
	s.add(&fakeObj{dn: served, guid: guid(2), classes: []string{"organizationalUnit"}})
	s.add(&fakeObj{dn: "CN=other,OU=Elsewhere," + s.domain, guid: guid(3), classes: []string{"person", "user"},
		attrs: map[string][]string{"sAMAccountName": {"other"}, "userPrincipalName": {"bob@corp.example.com"}}})
	s.add(&fakeObj{dn: "CN=bob," + served, guid: guid(4), classes: []string{"person", "user"},
		attrs: map[string][]string{"sAMAccountName": {"bob"}}})
	s.add(&fakeObj{dn: "CN=carol," + served, guid: guid(5), classes: []string{"person", "user"},
		attrs: map[string][]string{"sAMAccountName": {"carol"}, "userPrincipalName": {"carol@mail.example"}}})
	d, err := newFakeDirectory(s, Config{BaseDN: served})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d, served
}

// TestSignInErrorNamesNoOne: a sign-in bind that fails other than by a refusal
// answers a 5xx, whose error text the proxy logs; it must not hold the account's
// name or DN (users type passwords into name fields). The "DC" here is a TLS
// server that speaks no LDAP and never answers the bind, which times out.
func TestSignInErrorNamesNoOne(t *testing.T) {
	d, _ := signInFake(t)
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	tc := srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	tc.ServerName = "example.com" // httptest's certificate
	addr := srv.Listener.Addr().String()
	d.servers()[0].user = dialer{addr: addr, implicitTLS: true, tls: tc, timeout: 300 * time.Millisecond, redact: true}
	_, err := d.CheckPassword(context.Background(), mustSignInName(t, "bob@corp.example.com"), "pw-1")
	if err == nil || !strings.Contains(err.Error(), "(bind: ") {
		t.Fatalf("the bind did not fail: %v", err)
	}
	if strings.Contains(strings.ToLower(err.Error()), "bob") {
		t.Errorf("the error names the account: %v", err)
	}
}

func mustSignInName(t *testing.T, s string) dirgate.SignInName {
	t.Helper()
	n, err := dirgate.ParseSignInName(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
