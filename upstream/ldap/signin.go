package ldap

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/dirgate/dirgate"
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
// like a wrong password. The bind is never retried, whatever the error: every
// failed bind counts toward the account's lockout.
func (d *Directory) CheckPassword(ctx context.Context, name dirgate.SignInName, password string) (dirgate.Identifier, error) {
	if password == "" {
		// An LDAP simple bind with a name and no password is an anonymous bind that
		// succeeds (RFC 4513 5.1.2): never send one.
		return dirgate.Identifier{}, &dirgate.SignInError{Reason: dirgate.ReasonInvalidCredentials, Err: errors.New("empty password")}
	}
	start := time.Now()
	dn, err := d.resolve(ctx, name)
	if err != nil {
		return dirgate.Identifier{}, err
	}
	known := dn != ""
	if !known {
		dn = "CN=dirgate-no-such-account," + d.base.String()
	}
	c, err := d.userBind(ctx, dn, password)
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
	defer c.Close()
	if !known {
		return dirgate.Identifier{}, &dirgate.SignInError{Reason: dirgate.ReasonInvalidCredentials,
			Err: errors.New("the name resolves to no single account, yet the placeholder bind succeeded")}
	}
	return ownGUID(ctx, c, dn)
}

// userBind binds as dn on a connection of its own, to the first server that takes
// the connection. A server that could not be reached, or whose TLS failed, never saw
// the bind, so the next one is tried. Once the bind request is sent it is never sent
// again, whatever happens: a refusal is the answer, and a connection that dies after
// sending may or may not have cost the account one bad-password count on that DC,
// but never a second one (docs/directory.md, "Several domain controllers").
func (d *Directory) userBind(ctx context.Context, dn, password string) (conn, error) {
	servers := d.candidates()
	if len(servers) == 0 {
		return nil, unavailable(nil)
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
func (d *Directory) resolve(ctx context.Context, name dirgate.SignInName) (string, error) {
	var dns []string
	err := d.do(ctx, true, func(ctx context.Context, c conn, _ int) error {
		filters := []string{"(sAMAccountName=" + goldap.EscapeFilter(name.User) + ")"}
		if name.DownLevel {
			// DOMAIN\user of another (trusted) domain names no account here, even
			// if this domain has a user of the same sAMAccountName.
			nb, err := d.netbiosName(ctx, c)
			if err != nil {
				return err
			}
			if !strings.EqualFold(name.Domain, nb) {
				return nil
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
		for _, f := range filters {
			dns = dns[:0]
			err := search(ctx, c, query{base: d.base.String(), scope: goldap.ScopeWholeSubtree,
				filter: "(&(objectClass=user)" + f + ")", attrs: []string{"1.1"}},
				func(e *goldap.Entry) error {
					dns = append(dns, e.DN)
					return nil
				})
			if err != nil || len(dns) > 0 {
				return err
			}
		}
		return nil
	})
	if err != nil {
		var de *dirgate.Error
		if errors.As(err, &de) {
			return "", err // netbiosName's, already coded
		}
		return "", wrap("sign-in lookup", err)
	}
	if len(dns) != 1 {
		return "", nil
	}
	return dns[0], nil
}

// ownGUID reads the objectGUID of the account that just bound as dn, as that user
// (who may read its own entry): it is the subject of the caller's principal.
func ownGUID(ctx context.Context, c conn, dn string) (dirgate.Identifier, error) {
	var guid string
	err := search(ctx, c, query{base: dn, scope: goldap.ScopeBaseObject, filter: "(objectClass=user)",
		attrs: []string{"objectGUID"}}, func(e *goldap.Entry) error {
		if raw := e.GetRawAttributeValue("objectGUID"); len(raw) == 16 {
			guid = dirgate.GUIDFromBytes(raw)
		}
		return nil
	})
	if err != nil {
		return dirgate.Identifier{}, wrap("sign-in lookup", err)
	}
	if guid == "" {
		return dirgate.Identifier{}, dirgate.WrapError(dirgate.EUPSTREAM, "", errors.New("ldap: sign-in: the bound account's objectGUID is unreadable"))
	}
	return dirgate.ParseIdentifier(guid)
}

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
