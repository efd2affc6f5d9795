package policy

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// tracer is fetched per use, so spans follow whichever provider is installed now
// (tests install several; a tracer taken at init would stay with the first).
func tracer() trace.Tracer { return otel.Tracer("github.com/dirgate/dirgate/policy") }

type policyMetrics struct{ decisions, reloads metric.Int64Counter }

func newPolicyMetrics() policyMetrics {
	m := otel.Meter("github.com/dirgate/dirgate/policy")
	decisions, _ := m.Int64Counter("dirgate_policy_decisions",
		metric.WithDescription("Per-object authorization decisions by action (view, remove, add) and decision (allow, deny)."))
	reloads, _ := m.Int64Counter("dirgate_policy_reloads",
		metric.WithDescription("Policy reloads by outcome (ok, failed); a failed reload keeps the last good policy."))
	return policyMetrics{decisions: decisions, reloads: reloads}
}

// The attributes of a listing's decision counts, built once rather than per listing.
var (
	viewAllowed = metric.WithAttributeSet(attribute.NewSet(attribute.String("action", ActionView), attribute.String("decision", "allow")))
	viewDenied  = metric.WithAttributeSet(attribute.NewSet(attribute.String("action", ActionView), attribute.String("decision", "deny")))
)
