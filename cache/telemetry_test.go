package cache

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// TestListingStatusesStartAtZero: every status of dirgate_cache_listings_total is
// reported from the cache's creation at 0, before any listing, so that Prometheus
// sees the first bypass or stale answer as an increase.
func TestListingStatusesStartAtZero(t *testing.T) {
	// Instruments made before any provider was installed (by caches other tests
	// made) report to the first one installed: a throw-away provider takes that
	// place, so that the reader below sees these instruments alone.
	prev := otel.GetMeterProvider()
	otel.SetMeterProvider(sdkmetric.NewMeterProvider())
	r := sdkmetric.NewManualReader()
	otel.SetMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(r)))
	t.Cleanup(func() { otel.SetMeterProvider(prev) })
	newCacheMetrics()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "dirgate_cache_listings" {
				continue
			}
			for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
				st, _ := p.Attributes.Value("status")
				got[st.AsString()] = p.Value
			}
		}
	}
	for _, st := range []string{"hit", "miss", "stale", "bypass"} {
		if v, ok := got[st]; !ok || v != 0 {
			t.Errorf("status %q: %d (present %v), want 0 from the start", st, v, ok)
		}
	}
}
