package domains

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/dirgate/dirgate"
)

// NetBIOSNamer is a CredentialChecker that knows its domain's NetBIOS name (the
// LDAP upstream reads it from the domain's crossRef), so that DOMAIN\user is sent
// to the domain it names.
type NetBIOSNamer interface {
	NetBIOSName(ctx context.Context) (string, error)
}

var _ dirgate.CredentialChecker = (*Directory)(nil)

// CheckPassword implements dirgate.CredentialChecker: the name is checked by the
// domain it names, and only there. user@domain goes to the domain whose DNS name
// (its base DN's DC components) is the suffix; DOMAIN\user to the domain whose
// NetBIOS name is DOMAIN. Any other name (a UPN suffix that is no configured
// domain's name, a NetBIOS name of none) goes to the home domain, which refuses it
// as an unknown account, as it does alone. A domain without a Checker refuses
// sign-in as the home domain would an unknown name.
func (r *Directory) CheckPassword(ctx context.Context, name dirgate.SignInName, password string) (dirgate.Identifier, error) {
	d, err := r.signInDomain(ctx, name)
	if err != nil {
		return dirgate.Identifier{}, err
	}
	if d.Checker == nil {
		d = r.home()
	}
	if d.Checker == nil {
		return dirgate.Identifier{}, dirgate.WrapError(dirgate.EINTERNAL, "", fmt.Errorf("domains: sign-in: the home domain checks no passwords"))
	}
	id, err := d.Checker.CheckPassword(ctx, name, password)
	if d == r.home() || id.IsZero() {
		return id, err
	}
	if verr := r.verifySubject(ctx, d, id); verr != nil {
		r.log.WarnContext(ctx, "domains: sign-in refused: the domain named an account that is not its own",
			"domain", d.name, "subject", id.Canonical(), "err", verr)
		return dirgate.Identifier{}, dirgate.WrapError(dirgate.EUPSTREAM, "", fmt.Errorf("domains: sign-in in %s: %w", d.name, verr))
	}
	return id, err
}

// errNotOwnSubject is the detail of a sign-in refused because the domain that
// checked the password named an account it does not hold.
var errNotOwnSubject = errors.New("the account the domain named is not one of its own")

// verifySubject checks that id, the account another domain than home signed in,
// is an object of d (its DN under d's base DN, its SID's domain part d's SID) and
// that the router resolves id to that same object: the session looks the subject
// up through the router, so a domain naming another domain's account (a home
// GUID, say) would otherwise sign the caller in as that account.
func (r *Directory) verifySubject(ctx context.Context, d *domain, id dirgate.Identifier) error {
	obj, err := d.Dir.Lookup(ctx, id, nil)
	if err != nil {
		return fmt.Errorf("looking the account up there: %w", err)
	}
	if r.ofDN(obj.DN) != d || r.ofSID(obj.SID) != d {
		return fmt.Errorf("%w (it answered an object outside the domain)", errNotOwnSubject)
	}
	routed, err := r.Lookup(ctx, id, nil)
	if err != nil {
		return fmt.Errorf("looking the account up through the router: %w", err)
	}
	if routed.GUID != obj.GUID || !strings.EqualFold(routed.DN, obj.DN) {
		return fmt.Errorf("%w (the identifier names another domain's object)", errNotOwnSubject)
	}
	return nil
}

// signInDomain returns the domain name names. A NetBIOS name is compared with each
// domain's in order, home first, and goes to the first that has it; a domain that
// cannot say its NetBIOS name stops the search, its failure the answer, since the
// name may be its: a name is never sent past a domain that might own it.
func (r *Directory) signInDomain(ctx context.Context, name dirgate.SignInName) (*domain, error) {
	if !name.DownLevel {
		for _, d := range r.domains {
			if strings.EqualFold(name.Domain, d.name) {
				return d, nil
			}
		}
		return r.home(), nil
	}
	for _, d := range r.domains {
		n, ok := d.Checker.(NetBIOSNamer)
		if !ok {
			continue
		}
		nb, err := n.NetBIOSName(ctx)
		if err != nil {
			return nil, fmt.Errorf("domains: sign-in: the NetBIOS name of %s: %w", d.name, err)
		}
		if strings.EqualFold(name.Domain, nb) {
			return d, nil
		}
	}
	return r.home(), nil
}

// readNetBIOSNames reads the NetBIOS name of every domain whose checker can say it
// and refuses two domains of one name (compared case-insensitively): DOMAIN\user
// would name both. A domain that cannot say its name now (its DCs down) is left to
// sign-in, which stops there (signInDomain).
func (r *Directory) readNetBIOSNames(ctx context.Context) error {
	seen := map[string]*domain{}
	var errs []error
	for _, d := range r.domains {
		n, ok := d.Checker.(NetBIOSNamer)
		if !ok {
			continue
		}
		nb, err := n.NetBIOSName(ctx)
		if err != nil {
			r.log.WarnContext(ctx, "domains: NetBIOS name unread at start; DOMAIN\\user names stop at this domain until it answers",
				"domain", d.name, "err", err)
			continue
		}
		key := strings.ToUpper(nb)
		if o, ok := seen[key]; ok {
			errs = append(errs, fmt.Errorf("%s and %s have the same NetBIOS name %q: each domain's must differ", o.name, d.name, nb))
			continue
		}
		seen[key] = d
	}
	return errors.Join(errs...)
}
