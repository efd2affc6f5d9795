package cache

import (
	"context"

	"github.com/dirgate/dirgate"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
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
	listings       metric.Int64Counter
	leaseWait      metric.Float64Histogram
	historySettled metric.Int64Counter
	claimWaits     metric.Int64Counter
}

func newCacheMetrics() cacheMetrics {
	m := otel.Meter("github.com/dirgate/dirgate/cache")
	listings, _ := m.Int64Counter("dirgate_cache_listings",
		metric.WithDescription("Listings requested from the cache, by how they were served: hit, miss, stale or bypass."))
	leaseWait, _ := m.Float64Histogram("dirgate_cache_lease_wait", metric.WithUnit("s"),
		metric.WithDescription("Time a removal or addition waited for every instance holding a lease to drop its trust in its first level."))
	// Every status exists from start-up at 0: Prometheus sees no increase in a series
	// that first appears at 1, so the alerts on bypass and stale
	// (deploy/prometheus/alerts.yaml) would miss the start of an outage.
	for _, o := range statusSets {
		listings.Add(context.Background(), 0, o)
	}
	historySettled, _ := m.Int64Counter("dirgate_cache_history_invalidations",
		metric.WithDescription("Times this instance invalidated every cached entry because Redis's history changed (a failover that may have lost writes)."))
	historySettled.Add(context.Background(), 0)
	claimWaits, _ := m.Int64Counter("dirgate_cache_fill_waits",
		metric.WithDescription("Listing misses that found another instance filling the same listing (its claim in Redis) and waited for its entry before reading the directory."))
	claimWaits.Add(context.Background(), 0)
	return cacheMetrics{listings: listings, leaseWait: leaseWait, historySettled: historySettled, claimWaits: claimWaits}
}

// statusSets are the listings counter's attribute sets, built once: building one per
// request cost two allocations and a sort.
var statusSets = func() map[dirgate.CacheStatus]metric.AddOption {
	m := map[dirgate.CacheStatus]metric.AddOption{}
	for _, st := range []dirgate.CacheStatus{dirgate.CacheHit, dirgate.CacheMiss, dirgate.CacheStale, dirgate.CacheBypass} {
		m[st] = metric.WithAttributeSet(attribute.NewSet(attribute.String("status", string(st))))
	}
	return m
}()

func statusSet(st dirgate.CacheStatus) metric.AddOption {
	if o, ok := statusSets[st]; ok {
		return o
	}
	return metric.WithAttributes(attribute.String("status", string(st)))
}
