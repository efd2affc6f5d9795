package ldap

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/ldapentry"
	goldap "github.com/go-ldap/ldap/v3"
)

var _ dirgate.CredentialChecker = (*Directory)(nil)

// dataCodes maps the AD "data" code of a failed simple bind (docs/directory.md,
// "Failed binds"; Samba sends the same ones) to the sign-in's reason. A code missing
// here is answered as invalidCredentials; the proxy logs every refusal's code
// (SignInError.DataCode), so an unmapped one shows in the log.
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

// CheckPassword resolves the typed name to exactly one account under the base DN
// (as the service account), then binds once as that account's DN, on a connection
// of its own (never the service pool: a bind changes a connection's identity) over
// the upstream's TLS settings. Binding with the resolved DN, not the typed name,
// makes the account that proves the password the one that becomes the principal: AD
// resolves a typed UPN forest-wide, so bob@domain may name an account outside the
// base while dirgate's lookup finds another bob inside it. A name that resolves to
// no single account still costs one bind (of a DN no account has) and is refused
// like a wrong password. A bind that was sent is never sent again, whatever the
// error: every failed bind counts toward the account's lockout (userBind says when
// another DC is tried). The principal's subject is the objectGUID the lookup read.
func (d *Directory) CheckPassword(ctx context.Context, name dirgate.SignInName, password string) (dirgate.Identifier, error) {
	if password == "" {
		// An LDAP simple bind with a name and no password is an anonymous bind that
		// succeeds (RFC 4513 5.1.2): never send one.
		return dirgate.Identifier{}, &dirgate.SignInError{Reason: dirgate.ReasonInvalidCredentials, Err: errors.New("empty password")}
	}
	start := time.Now()
	acct, err := d.resolve(ctx, name)
	if err != nil {
		return dirgate.Identifier{}, err
	}
	dn := acct.dn
	known := dn != ""
	if !known {
		dn = "CN=dirgate-no-such-account," + d.base.String()
	}
	c, err := d.userBind(ctx, dn, password, acct.server)
	if err != nil {
		if rc, ok := resultCode(err); ok && rc == goldap.LDAPResultInvalidCredentials {
			refusal := bindRefusal(err)
			// Only the wrong password's refusal is shared by both kinds of name; the
			// others (disabled, locked, …) name a real account anyway.
			var se *dirgate.SignInError
			if errors.As(refusal, &se) && se.Reason == dirgate.ReasonInvalidCredentials {
				if known {
					d.refusals.record(time.Since(start))
				} else {
					d.refusals.wait(ctx, start)
				}
			}
			if known && se != nil && se.PasswordChangeReason() != 0 {
				// The password was right: name the account, for the sign-in rule.
				if id, err := dirgate.ParseIdentifier(dn); err == nil {
					return id, refusal
				}
			}
			return dirgate.Identifier{}, refusal
		}
		return dirgate.Identifier{}, wrap("sign-in bind", err)
	}
	_ = c.Close() // the bind was the proof; nothing more is read on it
	if !known {
		return dirgate.Identifier{}, &dirgate.SignInError{Reason: dirgate.ReasonInvalidCredentials,
			Err: errors.New("the name resolves to no single account, yet the placeholder bind succeeded")}
	}
	// The subject is the objectGUID the lookup read with the DN: the bind proved
	// that DN's password. Reading it again on the user's own connection would be
	// a call without failover after the proof was already in hand.
	id, err := dirgate.ParseIdentifier(acct.guid)
	if err != nil || id.Kind() != dirgate.KindGUID {
		return dirgate.Identifier{}, dirgate.WrapError(dirgate.EUPSTREAM, "", errors.New("ldap: sign-in: the account's objectGUID is unreadable"))
	}
	return id, nil
}

// userBind binds as dn on a connection of its own, to the first server that takes
// the connection. A server that could not be reached, or whose TLS failed, never saw
// the bind, so the next one is tried. Once the bind request is sent it is never sent
// again, whatever happens: a refusal is the answer, and a connection that dies after
// sending may or may not have cost the account one bad-password count on that DC,
// but never a second one (docs/directory.md, "Several domain controllers").
func (d *Directory) userBind(ctx context.Context, dn, password, prefer string) (conn, error) {
	servers := d.candidates()
	if len(servers) == 0 {
		return nil, unavailable(nil)
	}
	// The DC that just answered the lookup first: it is known to answer.
	for i, s := range servers {
		if s.t.url == prefer && i > 0 {
			servers = append([]*server{s}, append(servers[:i:i], servers[i+1:]...)...)
			break
		}
	}
	var lastErr error
	for _, s := range servers {
		dl := s.user
		dl.bindDN, dl.password = dn, password
		c, err := dl.dial(ctx)
		if err == nil {
			return c, nil
		}
		var ns *notSentError
		if !errors.As(err, &ns) || ctx.Err() != nil {
			return nil, err
		}
		d.markDown(s, err)
		lastErr = err
	}
	return nil, lastErr
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
	return &dirgate.SignInError{Reason: reason, DataCode: code, Err: fmt.Errorf("bind data code %q: %w", code, err)}
}

// resolve finds the DN of the one account under the base DN that name means, or ""
// for none or several. AD names an account by UPN (explicit, or the implicit
// sAMAccountName@dns-domain) or by DOMAIN\sAMAccountName. The search runs as the
// service account and costs the same for known and unknown names.
func (d *Directory) resolve(ctx context.Context, name dirgate.SignInName) (account, error) {
	// Hedged like a listing (attempt.go): a DC that falls silent costs the sign-in
	// AttemptTimeout, and the bind then goes to the DC that answered.
	found, err := run(ctx, d, true, true, func(ctx context.Context, c conn, _ int) (account, error) {
		filters := []string{"(sAMAccountName=" + goldap.EscapeFilter(name.User) + ")"}
		if name.DownLevel {
			// DOMAIN\user of another (trusted) domain names no account here, even
			// if this domain has a user of the same sAMAccountName.
			nb, err := d.netbiosName(ctx, c)
			if err != nil {
				return account{}, err
			}
			if !strings.EqualFold(name.Domain, nb) {
				return account{server: servedBy(ctx)}, nil
			}
		} else {
			upn := "(userPrincipalName=" + goldap.EscapeFilter(name.String()) + ")"
			if strings.EqualFold(name.Domain, dnsDomain(d.base.String())) {
				// The implicit UPN: safe as a fallback because the bind below proves
				// the password of exactly the account found.
				filters = []string{upn, filters[0]}
			} else {
				filters = []string{upn}
			}
		}
		var found []account
		for _, f := range filters {
			found = found[:0]
			err := search(ctx, c, query{base: d.base.String(), scope: goldap.ScopeWholeSubtree,
				filter: "(&(objectClass=user)" + f + ")", attrs: []string{"objectGUID"}},
				func(e *goldap.Entry) error {
					a := account{dn: e.DN}
					if raw := e.GetRawAttributeValue("objectGUID"); len(raw) == 16 {
						a.guid = ldapentry.GUIDFromBytes(raw)
					}
					found = append(found, a)
					return nil
				})
			if err != nil {
				return account{}, err
			}
			if len(found) > 0 {
				break
			}
		}
		if len(found) != 1 {
			return account{server: servedBy(ctx)}, nil // none or several: no single account
		}
		found[0].server = servedBy(ctx)
		return found[0], nil
	})
	if err != nil {
		var de *dirgate.Error
		if errors.As(err, &de) {
			return account{}, err // netbiosName's, already coded
		}
		return account{}, wrap("sign-in lookup", err)
	}
	return found, nil
}

// account is what resolve found: the one account a name means (dn "" for none or
// several), its objectGUID, and the server that answered.
type account struct{ dn, guid, server string }

// netbiosName reads the served domain's NetBIOS name from its crossRef in the
// configuration partition, once (on a service connection).
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
