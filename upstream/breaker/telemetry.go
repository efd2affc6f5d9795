package breaker

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

const scope = "github.com/dirgate/dirgate/upstream/breaker"

// Every upstream call passes through a breaker, so this is where upstream latency,
// errors and the breaker's state are observed, whatever the upstream.
// tracer is fetched per use, so spans follow whichever provider is installed now
// (tests install several; a tracer taken at init would stay with the first).
func tracer() trace.Tracer { return otel.Tracer(scope) }

type breakerMetrics struct {
	duration metric.Float64Histogram
}

// stateGauge is the one state gauge of the whole-directory and per-server breakers:
// the same name and description return the same instrument, whose series differ by
// their labels ({upstream} or {upstream, server}). It is read at scrape time, so it
// is never stale.
func stateGauge(m metric.Meter, opts ...metric.Int64ObservableGaugeOption) (metric.Int64ObservableGauge, error) {
	opts = append([]metric.Int64ObservableGaugeOption{
		metric.WithDescription("Circuit breaker state: 0 closed, 1 half-open, 2 open."),
	}, opts...)
	return m.Int64ObservableGauge("dirgate_upstream_breaker_state", opts...)
}

func newBreakerMetrics(d *Directory) *breakerMetrics {
	m := otel.Meter(scope)
	duration, _ := m.Float64Histogram("dirgate_upstream_duration", metric.WithUnit("s"),
		metric.WithDescription("Upstream calls by upstream, operation and outcome (ok: an answer, found or not found; no_change; or the dirgate error code of a failure: upstreamError, upstreamTimeout, upstreamUnavailable when the breaker refused, ...)."))
	// Registered apart from the instrument: a callback passed when the instrument is
	// created is dropped if a per-server breaker created it first.
	if g, err := stateGauge(m); err == nil {
		_, _ = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
			o.ObserveInt64(g, int64(d.State()), metric.WithAttributes(attribute.String("upstream", d.name)))
			return nil
		}, g)
	}
	return &breakerMetrics{duration: duration}
}

// registerServer reports s's state on the gauge until the returned registration is
// unregistered (Server.Close). A callback registered apart from the instrument is
// what can be unregistered; one given with WithInt64Callback lives as long as the
// meter provider.
func registerServer(s *Server) (metric.Registration, error) {
	m := otel.Meter(scope)
	g, err := stateGauge(m)
	if err != nil {
		return nil, err
	}
	attrs := metric.WithAttributes(attribute.String("upstream", s.name), attribute.String("server", s.server))
	return m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(g, int64(s.State()), attrs)
		return nil
	}, g)
}
