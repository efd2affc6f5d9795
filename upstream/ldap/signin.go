package ldap

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/dirgate/dirgate"
	goldap "github.com/go-ldap/ldap/v3"
)

var _ dirgate.CredentialChecker = (*Directory)(nil)

// dataCodes maps the AD "data" code of a failed simple bind (ad-ldap.md, "Account
// status"; Samba sends the same ones) to the sign-in's reason. A code missing here
// is answered as invalidCredentials and logged.
var dataCodes = map[string]string{
	"52e": dirgate.ReasonInvalidCredentials,
	"525": dirgate.ReasonInvalidCredentials, // no such user (AD usually says 52e)
	"533": dirgate.ReasonAccountDisabled,
	"775": dirgate.ReasonAccountLockedOut,
	"701": dirgate.ReasonAccountExpired,
	"530": dirgate.ReasonLogonTime,
	"531": dirgate.ReasonAccessDenied, // not allowed to log on at this workstation
	"568": dirgate.ReasonAccessDenied, // too many security ids
	"532": dirgate.ReasonPasswordExpired,
	"773": dirgate.ReasonMustChangePassword,
}

var dataCodeRE = regexp.MustCompile(`(?i)\bdata ([0-9a-fA-F]{1,8})\b`)

// CheckPassword binds once as the user, on a connection of its own (never the
// service pool: a bind changes a connection's identity) over the upstream's TLS
// settings. The bind is never retried, whatever the error: every failed bind counts
// toward the account's lockout. With the right password it then reads the account's
// own objectGUID as the user, which is the subject of the caller's principal.
func (d *Directory) CheckPassword(ctx context.Context, name dirgate.SignInName, password string) (dirgate.Identifier, error) {
	if password == "" {
		// An LDAP simple bind with a name and no password is an anonymous bind that
		// succeeds (RFC 4513 5.1.2): never send one.
		return dirgate.Identifier{}, &dirgate.SignInError{Reason: dirgate.ReasonInvalidCredentials, Err: errors.New("empty password")}
	}
	dl := d.userDialer
	dl.bindDN, dl.password = name.String(), password
	c, err := dl.dial(ctx)
	if err != nil {
		if rc, ok := resultCode(err); ok && rc == goldap.LDAPResultInvalidCredentials {
			return dirgate.Identifier{}, bindRefusal(err)
		}
		return dirgate.Identifier{}, wrap("sign-in bind", err)
	}
	defer c.Close()
	return d.ownGUID(ctx, c, name)
}

// bindRefusal turns a bind's invalidCredentials into the sign-in's reason by its
// data code.
func bindRefusal(err error) error {
	code := ""
	if m := dataCodeRE.FindStringSubmatch(err.Error()); m != nil {
		code = strings.ToLower(m[1])
	}
	reason, ok := dataCodes[code]
	if !ok {
		reason = dirgate.ReasonInvalidCredentials
	}
	return &dirgate.SignInError{Reason: reason, Err: fmt.Errorf("bind data code %q: %w", code, err)}
}

// ownGUID finds the account that just bound. AD names it by UPN (explicit, or the
// implicit sAMAccountName@dns-domain) or by DOMAIN\sAMAccountName; the search
// runs under the user's own identity, which may read its own entry.
func (d *Directory) ownGUID(ctx context.Context, c conn, name dirgate.SignInName) (dirgate.Identifier, error) {
	if name.DownLevel {
		// DOMAIN\user of a trusted domain binds too; its sAMAccountName must not be
		// looked up in this domain, where it may name someone else.
		nb, err := d.netbiosName(ctx, c)
		if err != nil {
			return dirgate.Identifier{}, err
		}
		if !strings.EqualFold(name.Domain, nb) {
			return dirgate.Identifier{}, &dirgate.SignInError{Reason: dirgate.ReasonAccessDenied,
				Err: fmt.Errorf("the account's domain is not the served domain %s", nb)}
		}
	}
	filters := []string{"(sAMAccountName=" + goldap.EscapeFilter(name.User) + ")"}
	if !name.DownLevel {
		filters = []string{"(userPrincipalName=" + goldap.EscapeFilter(name.String()) + ")"}
		if strings.EqualFold(name.Domain, dnsDomain(d.base.String())) {
			filters = append(filters, "(sAMAccountName="+goldap.EscapeFilter(name.User)+")")
		}
	}
	for _, f := range filters {
		var guids []string
		err := search(ctx, c, query{base: d.base.String(), scope: goldap.ScopeWholeSubtree,
			filter: "(&(objectClass=user)" + f + ")", attrs: []string{"objectGUID"}},
			func(e *goldap.Entry) error {
				if raw := e.GetRawAttributeValue("objectGUID"); len(raw) == 16 {
					guids = append(guids, dirgate.GUIDFromBytes(raw))
				}
				return nil
			})
		if err != nil {
			return dirgate.Identifier{}, wrap("sign-in lookup", err)
		}
		switch len(guids) {
		case 0:
			continue
		case 1:
			return dirgate.ParseIdentifier(guids[0])
		}
		return dirgate.Identifier{}, &dirgate.SignInError{Reason: dirgate.ReasonAccessDenied,
			Err: fmt.Errorf("%d accounts match the name", len(guids))}
	}
	// The DC accepted the password of an account outside the base DN (a trusted
	// domain's): dirgate serves no principal for it.
	return dirgate.Identifier{}, &dirgate.SignInError{Reason: dirgate.ReasonAccessDenied,
		Err: errors.New("the account that bound is not under the base DN")}
}

// netbiosName reads the served domain's NetBIOS name from its crossRef in the
// configuration partition, once (on the signing-in user's connection: any
// authenticated user may read it).
func (d *Directory) netbiosName(ctx context.Context, c conn) (string, error) {
	if nb := d.netbios.Load(); nb != nil {
		return *nb, nil
	}
	var config, domain, nb string
	err := search(ctx, c, query{base: "", scope: goldap.ScopeBaseObject, filter: "(objectClass=*)",
		attrs: []string{"configurationNamingContext", "defaultNamingContext"}}, func(e *goldap.Entry) error {
		config, domain = e.GetAttributeValue("configurationNamingContext"), e.GetAttributeValue("defaultNamingContext")
		return nil
	})
	if err == nil && config != "" && domain != "" {
		err = search(ctx, c, query{base: "CN=Partitions," + config, scope: goldap.ScopeSingleLevel,
			filter: "(&(objectClass=crossRef)(nCName=" + goldap.EscapeFilter(domain) + "))", attrs: []string{"nETBIOSName"}},
			func(e *goldap.Entry) error {
				nb = e.GetAttributeValue("nETBIOSName")
				return nil
			})
	}
	if err != nil {
		return "", wrap("sign-in: read the domain's NetBIOS name", err)
	}
	if nb == "" {
		return "", dirgate.WrapError(dirgate.EUPSTREAM, "", errors.New("ldap: sign-in: the domain's crossRef has no nETBIOSName"))
	}
	d.netbios.Store(&nb)
	return nb, nil
}

// dnsDomain returns the DNS name of a domain DN's DC components: DC=corp,DC=example
// is corp.example.
func dnsDomain(dn string) string {
	parsed, err := goldap.ParseDN(dn)
	if err != nil {
		return ""
	}
	var labels []string
	for _, rdn := range parsed.RDNs {
		for _, a := range rdn.Attributes {
			if strings.EqualFold(a.Type, "DC") {
				labels = append(labels, a.Value)
			}
		}
	}
	return strings.Join(labels, ".")
}
