package dirgate

import "github.com/dirgate/dirgate/internal/listorder"

// SortObjects puts a listing in its documented order: by DN compared without regard
// to letter case, then by GUID. Upstreams return members in arbitrary order; sorting
// makes sizeLimit and caching deterministic. A listing's GUIDs are unique (Listing
// keeps each object once); objects that share one keep their order among those of
// equal DNs. The sort moves each object once (internal/listorder).
func SortObjects(objs []Object) { listorder.Sort(objs, sortKeys) }

func sortKeys(o *Object) (dn, guid string) { return o.DN, o.GUID }
