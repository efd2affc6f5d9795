package changefeed

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

type feedMetrics struct {
	changes metric.Int64Counter
	resyncs metric.Int64Counter
	lag     metric.Float64ObservableGauge
	leader  metric.Int64ObservableGauge
	server  metric.Int64ObservableGauge
	reg     metric.Registration
	// domain labels every measurement when the feed follows one of several domains.
	domain []attribute.KeyValue
}

// with is the measurement option of attrs and the domain label.
func (fm *feedMetrics) with(attrs ...attribute.KeyValue) metric.MeasurementOption {
	return metric.WithAttributes(append(attrs, fm.domain...)...)
}

// meterName is the cache's: the metrics kept their instrumentation scope when the
// feed got a package of its own (docs/operations.md lists them).
const meterName = "github.com/dirgate/dirgate/cache"

func newFeedMetrics(domain string) feedMetrics {
	m := otel.Meter(meterName)
	var fm feedMetrics
	if domain != "" {
		fm.domain = []attribute.KeyValue{attribute.String("domain", domain)}
	}
	fm.changes, _ = m.Int64Counter("dirgate_changefeed_changes_total",
		metric.WithDescription("Objects changed in the directory that the change feed invalidated, by kind: group, object or deleted."))
	fm.resyncs, _ = m.Int64Counter("dirgate_changefeed_resyncs_total",
		metric.WithDescription("Times the change feed invalidated everything, by reason."))
	fm.lag, _ = m.Float64ObservableGauge("dirgate_changefeed_lag_seconds",
		metric.WithDescription("Age of the change feed's position: how far behind the directory cached entries may be."), metric.WithUnit("s"))
	fm.leader, _ = m.Int64ObservableGauge("dirgate_changefeed_leader",
		metric.WithDescription("1 on the instance that reads the directory's changes for the deployment, 0 elsewhere."))
	fm.server, _ = m.Int64ObservableGauge("dirgate_changefeed_server",
		metric.WithDescription("1 for the server (for AD: the DC's dsServiceName) whose changes the feed follows, as the latest position names it; no series before the first position."))
	return fm
}

func (fm feedMetrics) register(f *Feed) (metric.Registration, error) {
	m := otel.Meter(meterName)
	return m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		var lead int64
		if f.leader.Load() {
			lead = 1
		}
		o.ObserveInt64(fm.leader, lead, fm.with())
		if p := f.lastPos.Load(); p != nil {
			o.ObserveFloat64(fm.lag, f.cfg.now().Sub(p.Time).Seconds(), fm.with())
			// Only the current server is observed: the series of the one left
			// disappears at the next collection.
			o.ObserveInt64(fm.server, 1, fm.with(attribute.String("server", serverLabel(p.Source))))
		}
		return nil
	}, fm.lag, fm.leader, fm.server)
}

// maxServerLabel bounds the server label (a position read from Redis may name
// anything up to maxSourceBytes).
const maxServerLabel = 256

// serverOf is the server part of a position's source: for AD, the DC's
// dsServiceName before "|" and its invocationId.
func serverOf(source string) string {
	server, _, _ := strings.Cut(source, "|")
	return server
}

// serverLabel is serverOf cut to maxServerLabel bytes, without a broken rune.
func serverLabel(source string) string {
	s := serverOf(source)
	if len(s) > maxServerLabel {
		s = s[:maxServerLabel]
	}
	return strings.ToValidUTF8(s, "")
}
