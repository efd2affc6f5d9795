package ldap

import "context"

// DomainSID returns the SID of the domain whose naming context BaseDN lies in, as
// read from the domain object at Open (S-1-5-21-…): a router of several domains
// (upstream/domains) sends a SID to the domain that holds its domain part.
func (d *Directory) DomainSID() string { return d.domainSID }

// NetBIOSName returns the domain's NetBIOS name (its crossRef's nETBIOSName, read
// once, as sign-in reads it for DOMAIN\user names): a router of several domains
// sends such a name to the domain it names.
func (d *Directory) NetBIOSName(ctx context.Context) (string, error) {
	var nb string
	err := d.do(ctx, true, func(ctx context.Context, c conn, _ int) error {
		var err error
		nb, err = d.netbiosName(ctx, c)
		return err
	})
	return nb, err
}
