package ldap

import (
	"context"

	"github.com/dirgate/dirgate"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// registerMetrics reports each server's connection pool, health and calls at scrape
// time, labelled with its URL (server). Call latency and errors are recorded per
// operation by the breaker package's wrapper in front of the adapter
// (dirgate_upstream_duration_seconds).
func registerMetrics(d *Directory) metric.Registration {
	m := otel.Meter("github.com/dirgate/dirgate/upstream/ldap")
	inUse, _ := m.Int64ObservableGauge("dirgate_ldap_pool_in_use", metric.WithDescription("LDAP connections lent to a call right now, per server."))
	idle, _ := m.Int64ObservableGauge("dirgate_ldap_pool_idle", metric.WithDescription("Bound LDAP connections waiting in the pool, per server."))
	size, _ := m.Int64ObservableGauge("dirgate_ldap_pool_size", metric.WithDescription("Most LDAP connections open at once per server (the pool size)."))
	dials, _ := m.Int64ObservableCounter("dirgate_ldap_dials", metric.WithDescription("LDAP connections dialled (connect, TLS, bind), per server."))
	failed, _ := m.Int64ObservableCounter("dirgate_ldap_dial_failures", metric.WithDescription("LDAP dials that failed, per server."))
	up, _ := m.Int64ObservableGauge("dirgate_ldap_server_up", metric.WithDescription("1 while a domain controller takes calls, 0 while it is marked down (a failed call or health check, until a health check succeeds) or its circuit breaker is open."))
	calls, _ := m.Int64ObservableCounter("dirgate_ldap_server_requests", metric.WithDescription("Attempts of LDAP calls per server by outcome: ok, answer (the server refused or found nothing: an answer all the same), failed (network error, busy, unavailable: the call went on to the next server), stalled (no answer within the attempt timeout), refused (its circuit breaker was open)."))
	overlaid, _ := m.Int64ObservableCounter("dirgate_ldap_overlaid_members", metric.WithDescription("Members a listing read from one DC gained or lost because a write made through dirgate on another DC had not reached it yet."))
	domainAttr := metric.WithAttributes(attribute.String("domain", domainOf(d.cfg.BaseDN)))
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		// One series per domain: with several domains each has a Directory.
		o.ObserveInt64(overlaid, d.overlaid.Load(), domainAttr)
		for _, s := range d.servers() {
			at := metric.WithAttributes(attribute.String("server", s.t.url))
			p := s.pool
			o.ObserveInt64(inUse, int64(len(p.slots))+p.detached.Load(), at) // silent ones detached included
			o.ObserveInt64(idle, int64(len(p.idle)), at)
			o.ObserveInt64(size, int64(cap(p.slots)), at)
			o.ObserveInt64(dials, p.dials.Load(), at)
			o.ObserveInt64(failed, p.dialFailures.Load(), at)
			v := int64(1)
			if s.isDown() || s.brk != nil && s.brk.Open() {
				v = 0
			}
			o.ObserveInt64(up, v, at)
			for _, c := range []struct {
				outcome string
				n       int64
			}{{"ok", s.calls.ok.Load()}, {"answer", s.calls.answer.Load()}, {"failed", s.calls.failed.Load()},
				{"stalled", s.calls.stalled.Load()}, {"refused", s.calls.refused.Load()}} {
				o.ObserveInt64(calls, c.n, metric.WithAttributes(attribute.String("server", s.t.url), attribute.String("outcome", c.outcome)))
			}
		}
		return nil
	}, inUse, idle, size, dials, failed, up, calls, overlaid)
	if err != nil {
		return nil
	}
	return reg
}

// domainOf is the DNS name of the domain of base (its DC= components), "" when it
// has none.
func domainOf(base string) string {
	dn, err := dirgate.ParseDN(base)
	if err != nil {
		return ""
	}
	return dn.DomainName()
}
