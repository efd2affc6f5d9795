package policy

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// tracer is fetched per use, so spans follow whichever provider is installed now
// (tests install several; a tracer taken at init would stay with the first).
func tracer() trace.Tracer { return otel.Tracer("github.com/dirgate/dirgate/policy") }

type policyMetrics struct {
	decisions, reloads metric.Int64Counter
	broken, info       metric.Int64ObservableGauge
}

func newPolicyMetrics() policyMetrics {
	m := otel.Meter("github.com/dirgate/dirgate/policy")
	decisions, _ := m.Int64Counter("dirgate_policy_decisions",
		metric.WithDescription("Requests decided by the policy, by action and the decision the caller was told: view allow per listing answered (not per object), remove or add allow or deny (a refusal answered as an unknown member is not counted)."))
	reloads, _ := m.Int64Counter("dirgate_policy_reloads",
		metric.WithDescription("Policy reloads by outcome (ok, failed); a failed reload keeps the last good policy."))
	// Both outcomes exist from start-up at 0: a series that first appears at 1 has no
	// increase for Prometheus, so an alert on the first failure would never fire.
	for _, o := range []string{"ok", "failed"} {
		reloads.Add(context.Background(), 0, metric.WithAttributes(attribute.String("outcome", o)))
	}
	broken, _ := m.Int64ObservableGauge("dirgate_policy_broken",
		metric.WithDescription("1 while the policy directory does not load (the last good policy is enforced), else 0."))
	info, _ := m.Int64ObservableGauge("dirgate_policy_info",
		metric.WithDescription("1, labelled with the revision of the policy in force."))
	return policyMetrics{decisions: decisions, reloads: reloads, broken: broken, info: info}
}

// observeState reports a's dirgate_policy_broken and dirgate_policy_info at every
// scrape until the registration is unregistered (Close). Observed rather than set,
// so that only the revision in force has a series.
func (pm policyMetrics) observeState(a *Authorizer) metric.Registration {
	m := otel.Meter("github.com/dirgate/dirgate/policy")
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		var v int64
		if a.broken.Load() {
			v = 1
		}
		o.ObserveInt64(pm.broken, v)
		if cur := a.current.Load(); cur != nil {
			o.ObserveInt64(pm.info, 1, metric.WithAttributes(attribute.String("revision", cur.revision)))
		}
		return nil
	}, pm.broken, pm.info)
	if err != nil {
		return nil
	}
	return reg
}

// viewAllowed is the attribute set of a listing's count, built once rather than per
// listing.
var viewAllowed = metric.WithAttributeSet(attribute.NewSet(attribute.String("action", ActionView), attribute.String("decision", "allow")))
