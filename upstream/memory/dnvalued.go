package memory

import (
	"bytes"

	"github.com/dirgate/dirgate"
)

var _ dirgate.PropertySchema = (*Directory)(nil)

// NamedOnlyProperties returns the attributes of the loaded file whose values name
// its entries, lower-cased, beyond dirgate's built-in list of DN-valued attributes
// and but for dirgate.DNPropertyCovered: the memory upstream has no schema, and an
// AD export may hold attributes naming objects (Exchange's, an extension's) that
// the built-in list does not know. The property policy returns them only to a
// caller whose policy names them (docs/policy.md, "Attributes that name other
// objects"). The map is replaced, never changed, on a reload, and only grows.
func (d *Directory) NamedOnlyProperties() map[string]bool {
	if m := d.dnAttrs.Load(); m != nil {
		return *m
	}
	return nil
}

// dnValued finds the attributes with a value that is the DN of a loaded entry,
// spelt as the entry's DN is (byDN) or otherwise (parsed, by key). It skips the
// attributes already known (dirgate.IsDNProperty, the bulk of the values: member
// and memberOf) and values that cannot be a DN (no '=' after a leading letter).
func dnValued(records []*record, byDN, byKey map[string]*record) *map[string]bool {
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
				if namesEntry(v, byDN, byKey) {
					found[k], skip[k] = true, true
					break
				}
			}
		}
	}
	return &found
}

func namesEntry(v []byte, byDN, byKey map[string]*record) bool {
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
