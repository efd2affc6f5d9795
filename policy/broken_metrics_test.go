package policy_test

import (
	"context"
	"path/filepath"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/dirgate/dirgate/policy"
	"github.com/dirgate/dirgate/policy/internal/policytest"
)

// metricPoint is metricValue that also tells whether the point exists at all.
func metricPoint(t *testing.T, r *sdkmetric.ManualReader, name string, attrs ...attribute.KeyValue) (int64, bool) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	want := attribute.NewSet(attrs...)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			var points []metricdata.DataPoint[int64]
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				points = d.DataPoints
			case metricdata.Gauge[int64]:
				points = d.DataPoints
			}
			for _, p := range points {
				if p.Attributes.Equals(&want) {
					return p.Value, true
				}
			}
		}
	}
	return 0, false
}

// TestPolicyBrokenMetrics: both reload outcomes exist from Open at 0 (Prometheus
// sees no increase in a series that first appears at 1, so an alert on the first
// failed reload would never fire: deploy/prometheus/alerts.yaml), and
// dirgate_policy_broken is 1 exactly while the directory does not load;
// dirgate_policy_info names the revision in force, and only it. After Close the
// gauges are no longer reported.
func TestPolicyBrokenMetrics(t *testing.T) {
	// Instruments made before any provider was installed (by Authorizers that other
	// tests leave open) report to the first one installed: a throw-away provider
	// takes that place, so that the reader below sees this test's Authorizer alone.
	otel.SetMeterProvider(sdkmetric.NewMeterProvider())
	reader := newMetricReader(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "authz.rego")
	policytest.WriteFile(t, file, policytest.AllowUsers)
	a, err := policy.Open(context.Background(), policy.Config{Dir: dir, Logger: policytest.QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	check := func(when string, failed, ok, broken int64) {
		t.Helper()
		for _, c := range []struct {
			name  string
			attrs []attribute.KeyValue
			want  int64
		}{
			{"dirgate_policy_reloads", []attribute.KeyValue{attribute.String("outcome", "failed")}, failed},
			{"dirgate_policy_reloads", []attribute.KeyValue{attribute.String("outcome", "ok")}, ok},
			{"dirgate_policy_broken", nil, broken},
		} {
			got, present := metricPoint(t, reader, c.name, c.attrs...)
			if !present || got != c.want {
				t.Errorf("%s: %s%v = %d (present %v), want %d", when, c.name, c.attrs, got, present, c.want)
			}
		}
	}
	check("after Open", 0, 0, 0)

	policytest.WriteFile(t, file, policytest.BrokenPolicy)
	if err := a.Reload(context.Background()); err == nil {
		t.Fatal("a broken policy reloaded")
	}
	check("after a failed reload", 1, 0, 1)

	policytest.WriteFile(t, file, policytest.AllowUsers+"# fixed\n")
	if err := a.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	check("after the fix", 1, 1, 0)
	if v, ok := metricPoint(t, reader, "dirgate_policy_info", attribute.String("revision", a.Revision())); !ok || v != 1 {
		t.Errorf("dirgate_policy_info{revision=%q} = %d (present %v), want 1", a.Revision(), v, ok)
	}
	if n := revisionPoints(t, reader); n != 1 {
		t.Errorf("dirgate_policy_info has %d series, want only the revision in force", n)
	}

	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, present := metricPoint(t, reader, "dirgate_policy_broken"); present {
		t.Error("dirgate_policy_broken is still reported after Close")
	}
}

// revisionPoints counts dirgate_policy_info's series.
func revisionPoints(t *testing.T, r *sdkmetric.ManualReader) int {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if g, ok := m.Data.(metricdata.Gauge[int64]); ok && m.Name == "dirgate_policy_info" {
				n += len(g.DataPoints)
			}
		}
	}
	return n
}

// newMetricReader installs a meter provider read by hand. The policy makes its
// instruments at Open, so an Authorizer opened afterwards counts into it.
func newMetricReader(t *testing.T) *sdkmetric.ManualReader {
	t.Helper()
	r := sdkmetric.NewManualReader()
	otel.SetMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(r)))
	return r
}

// metricValue reads the int64 counter or gauge name's point with exactly attrs (0
// when there is none).
func metricValue(t *testing.T, r *sdkmetric.ManualReader, name string, attrs ...attribute.KeyValue) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	want := attribute.NewSet(attrs...)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			var points []metricdata.DataPoint[int64]
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				points = d.DataPoints
			case metricdata.Gauge[int64]:
				points = d.DataPoints
			default:
				t.Fatalf("%s is a %T", name, m.Data)
			}
			for _, p := range points {
				if p.Attributes.Equals(&want) {
					return p.Value
				}
			}
		}
	}
	return 0
}
