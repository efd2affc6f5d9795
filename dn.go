package dirgate

import (
	"fmt"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/go-ldap/ldap/v3"
)

// DN is a parsed distinguished name that keeps the text it was parsed from. Comparison
// is case-insensitive and ignores escaping differences (CN=a\2Cb equals cn=A\,B), as
// directory servers compare DNs.
type DN struct {
	raw string
	key string
	rdn []rdnPart // the RDNs, leaf first
}

// rdnPart is one RDN with its normalised key, kept so that ancestry is decided RDN by
// RDN: a suffix test on the joined key would take the escaped comma of CN=a\,OU=b for
// an RDN boundary.
type rdnPart struct {
	attrs []ldap.AttributeTypeAndValue
	key   string
}

// ParseDN parses an RFC 4514 DN. The <GUID=...> and <SID=...> forms that AD accepts as
// base DNs are not DNs and are rejected: clients give GUIDs and SIDs in their own form.
func ParseDN(s string) (DN, error) {
	p, err := ldap.ParseDN(s)
	if err != nil {
		return DN{}, fmt.Errorf("parse DN: %w", err)
	}
	if len(p.RDNs) == 0 {
		return DN{}, fmt.Errorf("parse DN: empty")
	}
	d := DN{raw: s, rdn: make([]rdnPart, len(p.RDNs))}
	keys := make([]string, len(p.RDNs))
	for i, r := range p.RDNs {
		if len(r.Attributes) == 0 {
			return DN{}, fmt.Errorf("parse DN: empty RDN")
		}
		parts := make([]string, len(r.Attributes))
		for j, a := range r.Attributes {
			// An attribute type is a name or an OID; anything else (an escaped "=" or ","
			// in it) would make two different DNs share a key.
			if a.Type == "" || !IsAttributeName(a.Type) {
				return DN{}, fmt.Errorf("parse DN: invalid attribute type")
			}
			// Hex escapes can decode to bytes that are not UTF-8. No directory names an
			// entry so, and lower-casing would turn every such byte into U+FFFD, giving
			// different DNs the same key.
			if !utf8.ValidString(a.Value) {
				return DN{}, fmt.Errorf("parse DN: attribute value is not valid UTF-8")
			}
			d.rdn[i].attrs = append(d.rdn[i].attrs, *a)
			parts[j] = strings.ToLower(a.Type) + "=" + ldap.EscapeDN(strings.ToLower(a.Value))
		}
		sort.Strings(parts) // multi-valued RDNs are unordered sets
		keys[i] = strings.Join(parts, "+")
		d.rdn[i].key = keys[i]
	}
	d.key = strings.Join(keys, ",")
	return d, nil
}

// hasControl reports whether any attribute value, unescaped, holds a control
// character.
func (d DN) hasControl() bool {
	for _, r := range d.rdn {
		for _, a := range r.attrs {
			if strings.IndexFunc(a.Value, unicode.IsControl) >= 0 {
				return true
			}
		}
	}
	return false
}

// MustParseDN is ParseDN for constants.
func MustParseDN(s string) DN {
	d, err := ParseDN(s)
	if err != nil {
		panic(err)
	}
	return d
}

// String returns the DN as it was given.
func (d DN) String() string { return d.raw }

// Key returns a normalised form: equal for DNs that a directory treats as the same.
func (d DN) Key() string { return d.key }

// IsZero reports whether d is the zero DN.
func (d DN) IsZero() bool { return d.raw == "" }

// EqualFold reports whether d and o name the same entry.
func (d DN) EqualFold(o DN) bool { return d.key == o.key }

// IsDescendantOf reports whether d lies strictly below o.
func (d DN) IsDescendantOf(o DN) bool {
	if len(o.rdn) == 0 || len(d.rdn) <= len(o.rdn) {
		return false
	}
	tail := d.rdn[len(d.rdn)-len(o.rdn):]
	for i := range tail {
		if tail[i].key != o.rdn[i].key {
			return false
		}
	}
	return true
}

// RDNValue returns the value of the leaf RDN's first attribute, unescaped: the CN of
// CN=Smith\, John,OU=x is "Smith, John". The product takes displayName from it
// (docs/compatibility.md, "Objects as the product renders them").
func (d DN) RDNValue() string {
	if len(d.rdn) == 0 {
		return ""
	}
	return d.rdn[0].attrs[0].Value
}

// DomainName joins the values of the trailing DC components: DC=corp,DC=example,DC=com
// gives corp.example.com. Only the run of single-valued DC RDNs at the root counts, as
// in AD's canonicalName: a DNS record's DC=host,...,DC=DomainDnsZones,DC=corp,DC=com
// belongs to DomainDnsZones.corp.com, not to a name with "host" in it.
func (d DN) DomainName() string {
	i := len(d.rdn)
	for i > 0 && len(d.rdn[i-1].attrs) == 1 && strings.EqualFold(d.rdn[i-1].attrs[0].Type, "dc") {
		i--
	}
	dcs := make([]string, 0, len(d.rdn)-i)
	for _, r := range d.rdn[i:] {
		dcs = append(dcs, r.attrs[0].Value)
	}
	return strings.Join(dcs, ".")
}
