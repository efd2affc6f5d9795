package ldap

// DomainSID returns the SID of the domain whose naming context BaseDN lies in, as
// read from the domain object at Open (S-1-5-21-…): a router of several domains
// (upstream/domains) sends a SID to the domain that holds its domain part.
func (d *Directory) DomainSID() string { return d.domainSID }
