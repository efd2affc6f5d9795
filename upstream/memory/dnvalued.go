package memory

import (
	"bytes"
	"unicode/utf8"

	"github.com/dirgate/dirgate"
)

var _ dirgate.PropertySchema = (*Directory)(nil)

// NamedOnlyProperties returns the attributes of the loaded file whose values name
// its entries (by DN or SID), lower-cased, beyond dirgate's built-in list of
// attributes naming objects and but for dirgate.DNPropertyCovered: the memory
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

// dnValued finds the attributes with a value naming a loaded entry: its DN, spelt as
// the entry's DN is (byDN) or otherwise (parsed, by key), the DN of a DN-Binary or
// DN-String value ("B:8:0000000A:CN=…", "S:5:hello:CN=…", as AD exports the
// syntaxes 2.5.5.7 and 2.5.5.14), or its objectSid, in binary (as an export holds
// SID-syntax attributes such as mS-DS-CreatorSID) or in string form
// ("S-1-5-21-…"). It skips the attributes already known (dirgate.IsDNProperty,
// the bulk of the values: member and memberOf) or covered (the entry's own DN and
// SIDs, dirgate.DNPropertyCovered), and values that can be none of these forms.
func dnValued(records []*record, byDN, byKey map[string]*record) *map[string]bool {
	// sids holds the loaded entries' objectSids, binary and in string form (the one
	// starts with the revision byte 1, the other with 'S': they never collide).
	sids := make(map[string]bool, 2*len(records))
	for _, r := range records {
		if r.sid != "" {
			sids[r.sid] = true
			if raw := r.entry.Attrs["objectsid"]; len(raw) > 0 {
				sids[string(raw[0])] = true
			}
		}
	}
	// skip holds, per attribute name met, whether its values need no look: one map
	// lookup per attribute of an entry (a large export has millions).
	skip := map[string]bool{}
	found := map[string]bool{}
	for _, r := range records {
		for k, vals := range r.entry.Attrs {
			s, ok := skip[k]
			if !ok {
				s = dirgate.IsDNProperty(k) || dirgate.DNPropertyCovered(k)
				skip[k] = s
			}
			if s {
				continue
			}
			for _, v := range vals {
				if namesEntry(v, byDN, byKey, sids) {
					found[k], skip[k] = true, true
					break
				}
			}
		}
	}
	return &found
}

// namesEntry reports whether v names a loaded entry: by SID (sids), by the DN of a
// DN-Binary or DN-String value, or by DN.
func namesEntry(v []byte, byDN, byKey map[string]*record, sids map[string]bool) bool {
	if isBinarySID(v) {
		return sids[string(v)] // a leading byte 1: no DN
	}
	if len(v) > 4 && v[1] == '-' && (v[0] == 'S' && sids[string(v)] || v[0] == 's' && sids["S"+string(v[1:])]) {
		return true
	}
	if dn, ok := dnOfDNBinary(v); ok {
		v = dn
	}
	return namesDN(v, byDN, byKey)
}

// isBinarySID reports whether v has the shape of a binary SID: revision 1, then as
// many 32-bit sub-authorities as its count byte says (dirgate.SIDFromBytes).
func isBinarySID(v []byte) bool {
	return len(v) >= 8 && v[0] == 1 && len(v) == 8+4*int(v[1])
}

// dnOfDNBinary returns the DN of a DN-Binary ("B:<count>:<hex digits>:<DN>") or
// DN-String ("S:<count>:<characters>:<DN>") value (MS-ADTS 3.1.1.2.2.2.2), where
// count is the number of hex digits or characters before the DN. A value of
// another form gives false.
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

// namesDN reports whether v is the DN of a loaded entry, however spelt; a value
// that cannot be a DN (no '=' after a leading letter) is not parsed.
func namesDN(v []byte, byDN, byKey map[string]*record) bool {
	if len(v) < 3 || !('a' <= v[0]|0x20 && v[0]|0x20 <= 'z') || bytes.IndexByte(v, '=') < 0 {
		return false
	}
	if byDN[string(v)] != nil {
		return true
	}
	dn, err := dirgate.ParseDN(string(v))
	return err == nil && byKey[dn.Key()] != nil
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
