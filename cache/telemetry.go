package cache

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Spans: "cache listing" per request with how it was served, "cache read" and
// "cache write" for the shared level, "cache invalidate" after a removal; go-redis's
// own spans (command names only) hang below them.
// tracer is fetched per use, so spans follow whichever provider is installed now
// (tests install several; a tracer taken at init would stay with the first).
func tracer() trace.Tracer { return otel.Tracer("github.com/dirgate/dirgate/cache") }

type cacheMetrics struct {
	listings metric.Int64Counter
}

func newCacheMetrics() cacheMetrics {
	m := otel.Meter("github.com/dirgate/dirgate/cache")
	listings, _ := m.Int64Counter("dirgate_cache_listings",
		metric.WithDescription("Listings requested from the cache, by how they were served: hit, miss, stale or bypass."))
	return cacheMetrics{listings: listings}
}
