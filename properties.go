package dirgate

import (
	"errors"

	"github.com/dirgate/dirgate/internal/adattr"
)

// IsOIDProperty reports whether name is a numeric OID (1.2.840.113556.1.4.90)
// rather than an attribute's name: NormalizeProperties accepts both forms, and
// names starting with a digit are OIDs.
func IsOIDProperty(name string) bool { return name != "" && '0' <= name[0] && name[0] <= '9' }

// NamedOnlyProperty reports whether the property policy's "*" leaves name
// (lower-case) out, so that it is returned only to a caller whose policy names it
// (docs/policy.md, "Which properties a caller may read"): a built-in secret
// (adattr.IsSecretProperty), a built-in attribute naming other objects
// (adattr.IsDNProperty), one in schema (a PropertySchema's NamedOnlyProperties, nil
// without one), or any name given as an OID. An OID is left out whatever attribute
// it stands for: the lists go by name, a schema extension's attributes (LAPS's)
// have OIDs of its own choosing, and a directory may answer an OID request under
// the attribute's name (Samba does, so the value is empty anyway) or under the OID:
// an OID is never taken to be public.
func NamedOnlyProperty(name string, schema map[string]bool) bool {
	return adattr.IsSecretProperty(name) || adattr.IsDNProperty(name) || schema[name] || IsOIDProperty(name)
}

// PropertySchema is implemented by an upstream that reads from its directory's
// schema which attributes the property policy's "*" must leave out
// (docs/policy.md): those the schema marks confidential (searchFlags bit 0x80,
// CONFIDENTIAL in MS-ADTS 3.1.1.2.3) and those whose values name objects
// (attributeSyntax 2.5.5.1, 2.5.5.7 or 2.5.5.14: DNs; 2.5.5.17: SIDs; 2.5.5.15:
// security descriptors) but for adattr.DNPropertyCovered. The LDAP upstream reads
// them at start-up and again periodically; the memory upstream has no schema and
// does not implement it.
type PropertySchema interface {
	// NamedOnlyProperties returns the lower-cased lDAPDisplayNames of those
	// attributes, as last read. The map is shared and must not be modified; it is
	// replaced, never changed, when the schema is read again.
	NamedOnlyProperties() map[string]bool
}

// ErrPropertiesWithheld is a ViewSelector's answer when some of the listing's
// requested properties are withheld from the caller, or may be as far as it knows
// yet, which a selection of shared objects cannot do: MemberService.Select then
// declines to select, and the renderer (render.Lister) renders the objects
// FilterView returns (altered copies: the listing's objects are shared) rather than
// a body shared by the callers that select the same objects.
var ErrPropertiesWithheld = errors.New("properties may be withheld: decide with FilterView")
