package proxy

import (
	"context"
	"net/http"
	"strconv"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// tracer is fetched per use, so spans follow whichever provider is installed now
// (tests install several; a tracer taken at init would stay with the first).
func tracer() trace.Tracer { return otel.Tracer("github.com/dirgate/dirgate/proxy") }

// metrics counts requests by route, method, status and cache outcome. OpenTelemetry's
// HTTP server histograms come from the instrumentation around the handler
// (telemetry.HTTPServer: http_server_request_duration_seconds); these add what only
// the API knows: the route name and how a listing was served.
type metrics struct {
	requests metric.Int64Counter
	duration metric.Float64Histogram
	sets     sync.Map // metricKey → *metricAttrs
}

func newMetrics() *metrics {
	m := otel.Meter("github.com/dirgate/dirgate/proxy")
	requests, _ := m.Int64Counter("dirgate_http_requests",
		metric.WithDescription("API requests by route, method, status code and cache outcome (hit, miss, stale, bypass, none)."))
	duration, _ := m.Float64Histogram("dirgate_http_request_duration", metric.WithUnit("s"),
		metric.WithDescription("Time to serve an API request, by route, method and cache outcome."))
	return &metrics{requests: requests, duration: duration}
}

// boundedMethod keeps label values to a fixed set whatever a client sends.
func boundedMethod(m string) string {
	switch m {
	case http.MethodGet, http.MethodDelete, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodOptions:
		return m
	}
	return "other"
}

func (m *metrics) record(ctx context.Context, route, method string, status int, cache string, seconds float64) {
	if cache == "" {
		cache = "none"
	}
	a := m.attrs(metricKey{route: route, method: boundedMethod(method), status: status, cache: cache})
	m.requests.Add(ctx, 1, a.requests)
	m.duration.Record(ctx, seconds, a.duration)
}

// metricKey is one combination of label values; there are few (routes, methods and
// cache outcomes are fixed sets, statuses are those the server sends).
type metricKey struct {
	route, method, cache string
	status               int
}

// metricAttrs are the attribute sets of one metricKey, built once: building and
// hashing them for every request cost about 3 µs.
type metricAttrs struct {
	requests, duration metric.MeasurementOption
}

func (m *metrics) attrs(k metricKey) *metricAttrs {
	if a, ok := m.sets.Load(k); ok {
		return a.(*metricAttrs)
	}
	a := &metricAttrs{
		requests: metric.WithAttributeSet(attribute.NewSet(attribute.String("route", k.route), attribute.String("method", k.method),
			attribute.String("status", strconv.Itoa(k.status)), attribute.String("cache", k.cache))),
		duration: metric.WithAttributeSet(attribute.NewSet(attribute.String("route", k.route),
			attribute.String("method", k.method), attribute.String("cache", k.cache))),
	}
	v, _ := m.sets.LoadOrStore(k, a)
	return v.(*metricAttrs)
}
