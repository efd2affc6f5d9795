package memory

import (
	"bytes"
	"unicode/utf8"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/adattr"
	"github.com/dirgate/dirgate/internal/ldapentry"
)

var _ dirgate.PropertySchema = (*Directory)(nil)

// NamedOnlyProperties returns the attributes of the loaded file whose values name
// its entries (by DN or SID), lower-cased, beyond dirgate's built-in list of
// attributes naming objects and but for adattr.DNPropertyCovered: the memory
// upstream has no schema, and an AD export may hold attributes naming objects
// (Exchange's, an extension's) that the built-in list does not know. The property
// policy returns them only to a caller whose policy names them (docs/policy.md,
// "Attributes that name other objects"). The map is replaced, never changed, on a
// reload, and only grows.
func (d *Directory) NamedOnlyProperties() map[string]bool {
	if m := d.dnAttrs.Load(); m != nil {
		return *m
	}
	return nil
}

// dnValued finds the attributes with a value naming a loaded entry (namesEntry):
// its DN, spelt as the entry's DN is (byDN) or otherwise (parsed, by key), the DN
// of a DN-Binary or DN-String value ("B:8:0000000A:CN=…", "S:5:hello:CN=…", as AD
// exports the syntaxes 2.5.5.7 and 2.5.5.14), or its objectSid (bySID), in binary
// (as an export holds SID-syntax attributes such as mS-DS-CreatorSID) or in string
// form ("S-1-5-21-…"). It skips the attributes already known (adattr.IsDNProperty,
// the bulk of the values: member and memberOf) or covered (the entry's own DN and
// SIDs, adattr.DNPropertyCovered), and values that can be none of these forms.
func dnValued(records []*record, byDN, byKey map[string]*record, bySID map[string][]*record) *map[string]bool {
	// skip holds, per attribute name met, whether its values need no look: one map
	// lookup per attribute of an entry (a large export has millions).
	skip := map[string]bool{}
	found := map[string]bool{}
	for _, r := range records {
		for k, vals := range r.entry.Attrs {
			s, ok := skip[k]
			if !ok {
				s = adattr.IsDNProperty(k) || adattr.DNPropertyCovered(k)
				skip[k] = s
			}
			if s {
				continue
			}
			for _, v := range vals {
				if namesEntry(v, r, byDN, byKey, bySID) {
					found[k], skip[k] = true, true
					break
				}
			}
		}
	}
	return &found
}

// namesEntry reports whether v, a value of r, names a loaded entry: by objectSid
// (bySID, keyed by the string form) other than r's own, by the DN of a DN-Binary or
// DN-String value, or by DN. A SID that is r's own names r: a foreign security
// principal's cn and name are its SID, and would otherwise take cn and name out of
// "*" in every export holding one. A DN that is r's own still counts (fail
// closed): no attribute but distinguishedName, covered, usually holds it.
func namesEntry(v []byte, r *record, byDN, byKey map[string]*record, bySID map[string][]*record) bool {
	if isBinarySID(v) {
		// Few values have the shape (objectSid and sIDHistory, the bulk, are
		// covered and not looked at): converting them costs less than a map of
		// every entry's binary SID.
		sid, err := ldapentry.SIDFromBytes(v)
		return err == nil && sid != r.sid && bySID[sid] != nil // a leading byte 1: no DN
	}
	if len(v) > 4 && v[1] == '-' && (v[0] == 'S' || v[0] == 's') {
		sid := string(v)
		if v[0] == 's' {
			sid = "S" + sid[1:]
		}
		if sid != r.sid && bySID[sid] != nil {
			return true
		}
	}
	if dn, ok := dnOfDNBinary(v); ok {
		v = dn
	}
	return namedDN(v, byDN, byKey) != nil
}

// isBinarySID reports whether v has the shape of a binary SID: revision 1, then as
// many 32-bit sub-authorities as its count byte says (ldapentry.SIDFromBytes).
func isBinarySID(v []byte) bool {
	return len(v) >= 8 && v[0] == 1 && len(v) == 8+4*int(v[1])
}

// dnOfDNBinary returns the DN of a DN-Binary ("B:<count>:<hex digits>:<DN>") or
// DN-String ("S:<count>:<characters>:<DN>") value (MS-ADTS, the Object(DN-Binary)
// and Object(DN-String) syntaxes), where count is the number of hex digits or
// characters before the DN. A value of another form gives false.
func dnOfDNBinary(v []byte) ([]byte, bool) {
	if len(v) < 5 || v[1] != ':' || (v[0]|0x20 != 'b' && v[0]|0x20 != 's') {
		return nil, false
	}
	rest := v[2:]
	n, digits := 0, 0
	for ; digits < len(rest) && '0' <= rest[digits] && rest[digits] <= '9'; digits++ {
		if digits == 9 { // more than the longest value AD holds; and no overflow
			return nil, false
		}
		n = n*10 + int(rest[digits]-'0')
	}
	if digits == 0 || digits == len(rest) || rest[digits] != ':' {
		return nil, false
	}
	rest = rest[digits+1:]
	// Skip count characters: hex digits are bytes, a DN-String's characters may not be.
	for ; n > 0 && len(rest) > 0; n-- {
		_, size := utf8.DecodeRune(rest)
		rest = rest[size:]
	}
	if n > 0 || len(rest) == 0 || rest[0] != ':' {
		return nil, false
	}
	return rest[1:], true
}

// namedDN returns the loaded entry whose DN v is, however spelt, or nil; a value
// that cannot be a DN (no '=' after a leading letter) is not parsed.
func namedDN(v []byte, byDN, byKey map[string]*record) *record {
	if len(v) < 3 || !('a' <= v[0]|0x20 && v[0]|0x20 <= 'z') || bytes.IndexByte(v, '=') < 0 {
		return nil
	}
	if r := byDN[string(v)]; r != nil {
		return r
	}
	dn, err := dirgate.ParseDN(string(v))
	if err != nil {
		return nil
	}
	return byKey[dn.Key()]
}

// unionOf returns a map holding the keys of a and b (either may be nil).
func unionOf(a, b *map[string]bool) *map[string]bool {
	out := map[string]bool{}
	for _, m := range []*map[string]bool{a, b} {
		if m != nil {
			for k := range *m {
				out[k] = true
			}
		}
	}
	return &out
}
