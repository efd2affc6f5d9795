package proxy

import (
	"sync"
	"sync/atomic"

	"github.com/dirgate/dirgate"
)

// Bounds of the identifier cache: entries and the length of a value cached.
const (
	maxCachedIdentifiers      = 4096
	maxCachedIdentifierLength = 512
)

// identifierCache remembers the identifiers parsed from query values: clients ask
// for the same groups again and again, and parsing a DN (ldap.ParseDN, lower-casing,
// escaping) was a third of a cached listing's allocations. An Identifier is an
// immutable value, so sharing one is safe. Only values that parsed are kept (bad
// input is parsed, and refused, every time); at maxCachedIdentifiers the cache starts
// over, so a client sending endless distinct values costs what it did without it.
type identifierCache struct {
	m atomic.Pointer[identifierMap]
}

type identifierMap struct {
	ids sync.Map // raw value → dirgate.Identifier
	n   atomic.Int64
}

func (c *identifierCache) parse(v string) (dirgate.Identifier, error) {
	m := c.m.Load()
	if m != nil {
		if id, ok := m.ids.Load(v); ok {
			return id.(dirgate.Identifier), nil
		}
	}
	id, err := dirgate.ParseIdentifier(v)
	if err != nil || len(v) > maxCachedIdentifierLength {
		return id, err
	}
	if m == nil || m.n.Load() >= maxCachedIdentifiers {
		fresh := &identifierMap{}
		if !c.m.CompareAndSwap(m, fresh) {
			return id, nil // another request started over first; keep theirs
		}
		m = fresh
	}
	if _, loaded := m.ids.LoadOrStore(v, id); !loaded {
		m.n.Add(1)
	}
	return id, nil
}

var identifiers identifierCache
