package dirgate

import (
	"context"

	"github.com/dirgate/dirgate/internal/encodedlisting"
)

// CacheStatus tells how a listing was served; the HTTP layer reports it in the
// X-Dirgate-Cache header.
type CacheStatus string

// Cache statuses, from the best to the most degraded.
const (
	// CacheHit: served from the cache, fresh and valid.
	CacheHit CacheStatus = "hit"
	// CacheMiss: read from the directory, then cached.
	CacheMiss CacheStatus = "miss"
	// CacheBypass: read from the directory without the cache, because the cache was
	// unreachable or could not vouch for its entries.
	CacheBypass CacheStatus = "bypass"
	// CacheStale: the directory failed, and a cached listing older than the cache's
	// freshness limit, but within its staleness limit, was served instead.
	CacheStale CacheStatus = "stale"
)

var cacheStatusRank = map[CacheStatus]int{CacheHit: 1, CacheMiss: 2, CacheBypass: 3, CacheStale: 4}

// Worse returns the more degraded of s and o: a listing read through a stale
// resolution of its group says stale.
func (s CacheStatus) Worse(o CacheStatus) CacheStatus {
	if cacheStatusRank[o] > cacheStatusRank[s] {
		return o
	}
	return s
}

// Listing is a group's unfiltered listing as a Lister hands it back: its objects in
// listing order, their JSON encodings when the lister keeps them, and how a cache
// served it. A cached listing is shared between requests: its objects must not be
// modified in place.
type Listing struct {
	Objects []Object
	// Encoded holds the encodings of Objects, in their order; nil when the lister has
	// none. A renderer joins responses from it instead of encoding each object again
	// (render/). A cache fill makes a new one, so its identity names one version of
	// the listing.
	Encoded *encodedlisting.Listing
	// Status says how a cache served the listing; "" when no cache took part.
	Status CacheStatus
}

// CachingDirectory is a Directory that caches identifier resolutions (a cache in
// front of the directory). MemberService uses it to learn how a resolution was served
// and to bypass the cache for writes and principals, which must act on the
// directory's current state: a removal on the current DN and primary group, not on a
// resolution cached before a rename or move.
type CachingDirectory interface {
	Directory
	// LookupServed resolves id as Lookup does, saying how it was served.
	LookupServed(ctx context.Context, id Identifier) (Object, CacheStatus, error)
	// LookupFresh resolves id from the directory itself.
	LookupFresh(ctx context.Context, id Identifier, props []string) (Object, error)
}
