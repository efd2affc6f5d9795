package dirgate

import (
	"context"
	"sync"
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

// ListingReport travels in a listing request's context from the cache, which fills it
// in, to the HTTP layer and the renderer (render/), which read it: how the listing was
// served, and the JSON encoding of the listing's objects when the cache has it, so
// that a response is joined from pre-encoded objects instead of encoding each object
// again. It keeps the caller-independent listing beside what the caller receives
// after permission filtering, which is why it travels beside the result instead of
// inside it.
type ListingReport struct {
	mu      sync.Mutex
	status  CacheStatus
	encoded *EncodedListing
}

type listingReportKey struct{}

// WithListingReport returns a context carrying a new, empty report.
func WithListingReport(ctx context.Context) (context.Context, *ListingReport) {
	r := &ListingReport{}
	return context.WithValue(ctx, listingReportKey{}, r), r
}

// ListingReportFrom returns the report in ctx, or nil. Every method of a nil report is
// a no-op, so producers need not check.
func ListingReportFrom(ctx context.Context) *ListingReport {
	r, _ := ctx.Value(listingReportKey{}).(*ListingReport)
	return r
}

// SetCacheStatus records how (part of) a listing was served. When a request passes
// through the cache more than once (the group's lookup, then its listing), the most
// degraded status wins, so that a listing resolved through a stale lookup says stale.
func (r *ListingReport) SetCacheStatus(s CacheStatus) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if cacheStatusRank[s] > cacheStatusRank[r.status] {
		r.status = s
	}
}

// CacheStatus returns the recorded status, "" when no cache took part.
func (r *ListingReport) CacheStatus() CacheStatus {
	if r == nil {
		return ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status
}

// SetEncoded records the encoded form of the unfiltered listing being served.
func (r *ListingReport) SetEncoded(e *EncodedListing) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.encoded = e
}

// Encoded returns the encoded listing recorded by SetEncoded, nil when none was.
func (r *ListingReport) Encoded() *EncodedListing {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.encoded
}

type freshLookupKey struct{}

// WithFreshLookup marks ctx so that identifier lookups bypass any cache: a removal
// must act on the directory's current DN and primary group, not on a resolution
// cached before a rename or move.
func WithFreshLookup(ctx context.Context) context.Context {
	return context.WithValue(ctx, freshLookupKey{}, true)
}

// FreshLookup reports whether ctx asks for uncached lookups.
func FreshLookup(ctx context.Context) bool {
	v, _ := ctx.Value(freshLookupKey{}).(bool)
	return v
}
