package ldap

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
)

// registerPoolMetrics reports the connection pool's figures at scrape time. Call
// latency and errors are recorded per operation by the breaker in front of the
// adapter (dirgate_upstream_duration_seconds).
func registerPoolMetrics(p *pool) metric.Registration {
	m := otel.Meter("github.com/dirgate/dirgate/upstream/ldap")
	inUse, _ := m.Int64ObservableGauge("dirgate_ldap_pool_in_use", metric.WithDescription("LDAP connections lent to a call right now."))
	idle, _ := m.Int64ObservableGauge("dirgate_ldap_pool_idle", metric.WithDescription("Bound LDAP connections waiting in the pool."))
	size, _ := m.Int64ObservableGauge("dirgate_ldap_pool_size", metric.WithDescription("Most LDAP connections open at once (DIRGATE_LDAP_POOL_SIZE)."))
	dials, _ := m.Int64ObservableCounter("dirgate_ldap_dials", metric.WithDescription("LDAP connections dialled (connect, TLS, bind)."))
	failed, _ := m.Int64ObservableCounter("dirgate_ldap_dial_failures", metric.WithDescription("LDAP dials that failed."))
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(inUse, int64(len(p.slots)))
		o.ObserveInt64(idle, int64(len(p.idle)))
		o.ObserveInt64(size, int64(cap(p.slots)))
		o.ObserveInt64(dials, p.dials.Load())
		o.ObserveInt64(failed, p.dialFailures.Load())
		return nil
	}, inUse, idle, size, dials, failed)
	if err != nil {
		return nil
	}
	return reg
}
