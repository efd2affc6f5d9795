package breaker

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Every upstream call passes through a breaker, so this is where upstream latency,
// errors and the breaker's state are observed, whatever the upstream.
// tracer is fetched per use, so spans follow whichever provider is installed now
// (tests install several; a tracer taken at init would stay with the first).
func tracer() trace.Tracer { return otel.Tracer("github.com/dirgate/dirgate/upstream/breaker") }

type breakerMetrics struct {
	duration metric.Float64Histogram
}

func newBreakerMetrics(d *Directory) *breakerMetrics {
	m := otel.Meter("github.com/dirgate/dirgate/upstream/breaker")
	duration, _ := m.Float64Histogram("dirgate_upstream_duration", metric.WithUnit("s"),
		metric.WithDescription("Upstream calls by upstream, operation and outcome (ok, no_change, or the dirgate error code: upstreamError, upstreamTimeout, upstreamUnavailable when the breaker refused, notFound, ...)."))
	// The gauge is read at scrape time, so it is never stale.
	m.Int64ObservableGauge("dirgate_upstream_breaker_state",
		metric.WithDescription("Circuit breaker state: 0 closed, 1 half-open, 2 open."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(int64(d.State()), metric.WithAttributes(attribute.String("upstream", d.name)))
			return nil
		}))
	return &breakerMetrics{duration: duration}
}
