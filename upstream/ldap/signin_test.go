package ldap

import (
	"context"
	"testing"

	"github.com/dirgate/dirgate"
)

// TestResolveBindsTheAccountUnderTheBase: the sign-in binds as the DN resolve
// returns, so that DN must be the account under the base DN that the name means,
// whatever account outside the base carries the same explicit UPN (finding: an
// outside account with the explicit UPN bob@domain, whose password AD accepts for
// bob@domain, became the in-base bob when dirgate bound with the typed name).
func TestResolveBindsTheAccountUnderTheBase(t *testing.T) {
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
	defer d.Close()
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
		got, err := d.resolve(context.Background(), n)
		if err != nil || got != want {
			t.Errorf("%s: %q %v, want %q", name, got, err, want)
		}
	}
}
