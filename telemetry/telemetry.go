// Package telemetry sets up OpenTelemetry for dirgate: traces exported as the
// standard OTEL_* environment variables say (off when no exporter is configured),
// metrics exposed in Prometheus format, and a slog handler that stamps every log
// record with the trace and span of its context.
//
// Other packages instrument themselves through the global OpenTelemetry API
// (otel.Tracer, otel.Meter); only cmd/dirgate calls Setup.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Telemetry holds the providers Setup installed globally.
type Telemetry struct {
	// Tracing reports whether spans are exported.
	Tracing bool
	// Metrics serves the Prometheus exposition of every metric.
	Metrics http.Handler

	shutdown []func(context.Context) error
}

// Options adjust Setup; the zero value reads everything from the environment.
type Options struct {
	Version string
	// SpanExporter, when set, receives the spans instead of the exporter the
	// environment names (tests use an in-memory exporter).
	SpanExporter sdktrace.SpanExporter
	// Getenv reads the environment; nil means os.Getenv.
	Getenv func(string) string
}

// TracesConfigured reports whether the OTEL_* variables ask for trace export: an
// OTLP endpoint is set, or OTEL_TRACES_EXPORTER names an exporter other than none.
func TracesConfigured(getenv func(string) string) bool {
	switch getenv("OTEL_TRACES_EXPORTER") {
	case "none":
		return false
	case "":
		return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	}
	return true
}

// Setup installs the global tracer provider, meter provider and propagator. W3C
// trace context and baggage are always accepted from clients, so a client's trace id
// reaches the logs even when dirgate exports no spans.
func Setup(ctx context.Context, opts Options) (*Telemetry, error) {
	getenv := opts.Getenv
	if getenv == nil {
		getenv = osGetenv
	}
	t := &Telemetry{}
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))

	// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override the defaults given here:
	// later detectors win.
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName("dirgate"), semconv.ServiceVersion(opts.Version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK(), resource.WithHost())
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}

	exp := opts.SpanExporter
	if exp == nil && TracesConfigured(getenv) {
		if exp, err = autoexport.NewSpanExporter(ctx); err != nil {
			return nil, fmt.Errorf("telemetry: trace exporter: %w", err)
		}
	}
	if exp != nil {
		// The sampler comes from OTEL_TRACES_SAMPLER (default: parent-based, always on).
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
		if opts.SpanExporter != nil {
			tp = sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithResource(res))
		}
		otel.SetTracerProvider(tp)
		t.Tracing = true
		t.shutdown = append(t.shutdown, tp.Shutdown)
	} else {
		otel.SetTracerProvider(noop.NewTracerProvider())
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	promExp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, fmt.Errorf("telemetry: prometheus exporter: %w", err)
	}
	mopts := []sdkmetric.Option{sdkmetric.WithReader(promExp), sdkmetric.WithResource(res), sdkmetric.WithView(latencyBuckets)}
	if !t.Tracing && getenv("OTEL_METRICS_EXEMPLAR_FILTER") == "" {
		// The default filter (trace_based) looks for a sampled span in every
		// measurement's context; without tracing there never is one, and the look-up
		// walked each request's context five times.
		mopts = append(mopts, sdkmetric.WithExemplarFilter(exemplar.AlwaysOffFilter))
	}
	mp := sdkmetric.NewMeterProvider(mopts...)
	otel.SetMeterProvider(mp)
	t.shutdown = append(t.shutdown, mp.Shutdown)
	t.Metrics = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	return t, nil
}

// latencyBuckets gives every duration histogram (unit "s") boundaries from 0.5 ms
// to 30 s: cached listings take about a millisecond, directory reads up to seconds.
func latencyBuckets(i sdkmetric.Instrument) (sdkmetric.Stream, bool) {
	if i.Kind != sdkmetric.InstrumentKindHistogram || i.Unit != "s" {
		return sdkmetric.Stream{}, false
	}
	return sdkmetric.Stream{Name: i.Name, Description: i.Description, Unit: i.Unit,
		Aggregation: sdkmetric.AggregationExplicitBucketHistogram{
			Boundaries: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}}, true
}

// Shutdown flushes spans and stops the providers.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	var errs []error
	for _, f := range t.shutdown {
		if err := f(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	t.shutdown = nil
	return errors.Join(errs...)
}

// TraceID returns the trace id of ctx's span, or "".
func TraceID(ctx context.Context) string {
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		return sc.TraceID().String()
	}
	return ""
}
