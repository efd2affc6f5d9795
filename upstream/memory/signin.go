package memory

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"strings"

	"github.com/dirgate/dirgate"
)

var _ dirgate.CredentialChecker = (*Directory)(nil)

// SetPasswords gives accounts passwords for signing in, keyed by sAMAccountName
// (letter case ignored). An LDIF export carries no passwords: these are for the
// demo and for development (docs/auth.md, "The demo"). It replaces any earlier set.
func (d *Directory) SetPasswords(passwords map[string]string) {
	m := make(map[string][sha256.Size]byte, len(passwords))
	for name, pw := range passwords {
		m[strings.ToLower(name)] = sha256.Sum256([]byte(pw))
	}
	d.mu.Lock()
	d.passwords = m
	d.mu.Unlock()
}

// CheckPassword finds the account by UPN or by DOMAIN\sAMAccountName (the domain
// part must be the first label of the directory's DNS domain) and compares the
// password's hash in constant time. An unknown account and an account without a
// password are answered as a wrong password, after the same comparison. A disabled
// account with the right password is accountIsDisabled, as AD answers.
func (d *Directory) CheckPassword(ctx context.Context, name dirgate.SignInName, password string) (dirgate.Identifier, error) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	var found *record
	for _, r := range d.records {
		if d.names(r, name) {
			found = r
			break
		}
	}
	var want [sha256.Size]byte // no password: never equal to a real hash's input
	ok := false
	if found != nil {
		want, ok = d.passwords[strings.ToLower(found.entry.First("sAMAccountName"))]
	}
	got := sha256.Sum256([]byte(password))
	if subtle.ConstantTimeCompare(got[:], want[:]) != 1 || !ok || password == "" {
		return dirgate.Identifier{}, &dirgate.SignInError{Reason: dirgate.ReasonInvalidCredentials}
	}
	if uac, _ := found.entry.Int("userAccountControl"); uac&2 != 0 {
		return dirgate.Identifier{}, &dirgate.SignInError{Reason: dirgate.ReasonAccountDisabled}
	}
	return dirgate.ParseIdentifier(found.guid)
}

// names reports whether r is the account name signs in as.
func (d *Directory) names(r *record, name dirgate.SignInName) bool {
	if r.group || r.entry.First("sAMAccountName") == "" {
		return false
	}
	if name.DownLevel {
		dom, _, _ := strings.Cut(dnsDomainOf(r.entry.DN), ".")
		return strings.EqualFold(r.entry.First("sAMAccountName"), name.User) && strings.EqualFold(dom, name.Domain)
	}
	return strings.EqualFold(r.entry.First("userPrincipalName"), name.String())
}

// dnsDomainOf returns the DNS name of a DN's DC components.
func dnsDomainOf(dn string) string {
	var labels []string
	for _, rdn := range strings.Split(dn, ",") {
		if k, v, ok := strings.Cut(strings.TrimSpace(rdn), "="); ok && strings.EqualFold(k, "DC") {
			labels = append(labels, v)
		}
	}
	return strings.Join(labels, ".")
}
