package telemetry

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"
)

type benchKey int

// BenchmarkHistogramExemplarFilter is one histogram measurement in a request-like
// context (eight values deep) with the SDK's default exemplar filter and with the
// always_off filter Setup installs when no spans are exported (docs/benchmarks.md,
// "Component figures").
func BenchmarkHistogramExemplarFilter(b *testing.B) {
	ctx := context.Background()
	for i := range 8 {
		ctx = context.WithValue(ctx, benchKey(i), i)
	}
	set := metric.WithAttributeSet(attribute.NewSet(attribute.String("route", "groupMembers"),
		attribute.String("method", "GET"), attribute.String("cache", "hit")))
	for _, tc := range []struct {
		name string
		opts []sdkmetric.Option
	}{
		{"default", nil},
		{"always_off", []sdkmetric.Option{sdkmetric.WithExemplarFilter(exemplar.AlwaysOffFilter)}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			mp := sdkmetric.NewMeterProvider(append(tc.opts, sdkmetric.WithReader(sdkmetric.NewManualReader()))...)
			defer mp.Shutdown(context.Background())
			h, err := mp.Meter("bench").Float64Histogram("h", metric.WithUnit("s"))
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				h.Record(ctx, 0.001, set)
			}
		})
	}
}
