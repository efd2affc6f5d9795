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
			if a.Type == "" || !validAttributeName(a.Type) {
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

// ContainsPlain reports whether the DN s is d or lies below it, as ParseDN(s)
// followed by EqualFold or IsDescendantOf would, without parsing s. ok is false,
// and the parser must decide, unless s is a plain ASCII DN: each RDN one
// type=value, nothing the parser unescapes, decodes or trims. Then s's key is s
// lower-cased, and a ',' in it always ends an RDN. A directory names almost every
// entry so (upstream/ldap checks the scope of every entry it reads with this).
func (d DN) ContainsPlain(s string) (contains, ok bool) {
	if d.key == "" || !plainASCIIDN(s) {
		return false, false
	}
	k := d.key
	if len(s) < len(k) || !asciiLowerEqual(s[len(s)-len(k):], k) {
		return false, true
	}
	return len(s) == len(k) || s[len(s)-len(k)-1] == ',', true
}

// plainASCIIDN reports whether every RDN of s is type=value with a valid type and
// a plainValue, all in ASCII.
func plainASCIIDN(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	for rdn := range strings.SplitSeq(s, ",") {
		if _, _, plain := plainRDN(rdn); !plain {
			return false
		}
	}
	return true
}

// plainRDN splits one RDN into its type and value when it is type=value with a
// valid type (which holds no space) and a plainValue.
func plainRDN(rdn string) (typ, val string, ok bool) {
	eq := strings.IndexByte(rdn, '=')
	if eq <= 0 || eq == len(rdn)-1 || !validAttributeName(rdn[:eq]) || !plainValue(rdn[eq+1:]) {
		return "", "", false
	}
	return rdn[:eq], rdn[eq+1:], true
}

// asciiLowerEqual reports whether s lower-cased (ASCII) is lower.
func asciiLowerEqual(s, lower string) bool {
	if len(s) != len(lower) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

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

// Parent returns the DN without its leaf RDN, as text rebuilt from the parsed parts.
func (d DN) Parent() (DN, bool) {
	if len(d.rdn) < 2 {
		return DN{}, false
	}
	var b strings.Builder
	for i, r := range d.rdn[1:] {
		if i > 0 {
			b.WriteByte(',')
		}
		for j, a := range r.attrs {
			if j > 0 {
				b.WriteByte('+')
			}
			b.WriteString(a.Type + "=" + ldap.EscapeDN(a.Value))
		}
	}
	p, err := ParseDN(b.String())
	return p, err == nil
}

// dnNames returns what ToObject takes from a DN: the leaf RDN's value (RDNValue) and
// the domain name (DomainName), and ParseDN's error for a DN it rejects. A DN that
// plainDNNames can read exactly is not parsed: ParseDN allocates some fifty times per
// DN, and a listing reads one DN per member.
func dnNames(s string) (display, domain string, err error) {
	if display, domain, ok := plainDNNames(s); ok {
		return display, domain, nil
	}
	d, err := ParseDN(s)
	if err != nil {
		return "", "", err
	}
	return d.RDNValue(), d.DomainName(), nil
}

// plainDNNames reads RDNValue and DomainName from a DN written without anything
// that ParseDN would decode or might reject: RDNs of one type=value each, types that
// are names (validAttributeName), values of valid UTF-8 without escapes, quotes,
// '+', ';', '<', '>', '#', control characters, a second '=' or spaces at either end,
// no empty value. Such a DN parses to exactly its text, so the leaf's value is a
// substring of it. ok is false for anything else, which the caller parses in full
// (FuzzPlainDNNames holds the two to the same answers).
func plainDNNames(s string) (display, domain string, ok bool) {
	if s == "" || !utf8.ValidString(s) {
		return "", "", false
	}
	// One pass over the RDNs, leaf first; dcStart is where the trailing run of DC
	// RDNs begins (len(s)+1 while the last RDN seen is not one), and dcCount its
	// length, for the one allocation of the domain name.
	dcStart, dcCount := len(s)+1, 0
	for start := 0; start <= len(s); {
		end := strings.IndexByte(s[start:], ',')
		if end < 0 {
			end = len(s)
		} else {
			end += start
		}
		typ, val, plain := plainRDN(s[start:end])
		if !plain {
			return "", "", false
		}
		if start == 0 {
			display = val
		}
		if len(typ) == 2 && (typ[0]|0x20) == 'd' && (typ[1]|0x20) == 'c' {
			if dcStart > len(s) {
				dcStart, dcCount = start, 0
			}
			dcCount++
		} else {
			dcStart = len(s) + 1
		}
		start = end + 1
	}
	if dcStart > len(s) {
		return display, "", true
	}
	b := make([]byte, 0, len(s)-dcStart-3*dcCount) // each "DC=" goes, each ',' becomes '.'
	for rdn := range strings.SplitSeq(s[dcStart:], ",") {
		if len(b) > 0 {
			b = append(b, '.')
		}
		b = append(b, rdn[3:]...)
	}
	return display, string(b), true
}

// plainValue reports whether an attribute value's text is its value: nothing that
// the DN parser unescapes, decodes, trims or rejects.
func plainValue(v string) bool {
	if v[0] == ' ' || v[0] == '#' || v[len(v)-1] == ' ' {
		return false
	}
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c < 0x20, c == 0x7f, c == '\\', c == '"', c == '+', c == ';', c == '<', c == '>', c == '=':
			return false
		}
	}
	return true
}
