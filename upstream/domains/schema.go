package domains

import (
	"reflect"
	"unsafe"
)

// schemaUnion is the union of the domains' named-only properties, with the maps it
// was made from.
type schemaUnion struct {
	from  []unsafe.Pointer // each domain's map, nil without a schema
	union map[string]bool
}

// NamedOnlyProperties implements dirgate.PropertySchema: the attributes that any
// domain's schema withholds from the property policy's "*" (a trusted forest may
// have a schema extension, such as LAPS's confidential attributes, that the home
// forest lacks). The union is made again only when a domain's schema was read again
// (a domain replaces its map then, never changes it); nil when no domain has a
// schema.
func (r *Directory) NamedOnlyProperties() map[string]bool {
	if cur := r.schema.Load(); cur != nil && r.unchanged(cur) {
		return cur.union
	}
	maps := make([]map[string]bool, len(r.domains))
	for i, d := range r.domains {
		if d.Schema != nil {
			maps[i] = d.Schema.NamedOnlyProperties()
		}
	}
	next := &schemaUnion{from: make([]unsafe.Pointer, len(maps))}
	for i, m := range maps {
		next.from[i] = mapPointer(m)
		if m == nil {
			continue
		}
		if next.union == nil {
			next.union = make(map[string]bool, len(m))
		}
		for k, v := range m {
			if v {
				next.union[k] = true
			}
		}
	}
	r.schema.Store(next)
	return next.union
}

// unchanged reports whether every domain's schema is the map cur was made from.
func (r *Directory) unchanged(cur *schemaUnion) bool {
	for i, d := range r.domains {
		var m map[string]bool
		if d.Schema != nil {
			m = d.Schema.NamedOnlyProperties()
		}
		if cur.from[i] != mapPointer(m) {
			return false
		}
	}
	return true
}

// mapPointer identifies a map (nil for a nil map).
func mapPointer(m map[string]bool) unsafe.Pointer {
	if m == nil {
		return nil
	}
	return reflect.ValueOf(m).UnsafePointer()
}
