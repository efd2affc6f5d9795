package dirgate

import (
	"context"
	"time"
)

// DecisionEvent is one policy decision as a decision-log service receives it:
// the members of OPA's decision event that dirgate's decision line fills
// (docs/policy.md, "Decisions to OPA's decision-log service"), masked as the
// line is (DIRGATE_DECISION_LOG_MASK). Input, Result and Custom's values are
// JSON documents in the form encoding/json decodes them into an any
// (map[string]any, []any, string, float64, bool, nil), which OPA's mask and
// drop policies read. A member a mask erased is zero.
type DecisionEvent struct {
	ID      string
	Path    string
	Time    time.Time
	TraceID string
	SpanID  string
	Input   any
	Result  any
	// Custom holds the line's other members: engine, candidate, duration_ms,
	// erased, revision.
	Custom map[string]any
}

// DecisionRecord is one decision handed to a DecisionSink: Event builds its
// event. Building it costs more than deciding a cached listing, so a sink builds
// it on a goroutine of its own, not on the request that made the decision.
type DecisionRecord interface {
	Event() DecisionEvent
}

// DecisionSink receives the policy's decisions (package opaconfig sends them to
// OPA's decision-log service). LogDecision is called on the request that made
// the decision: it must not wait.
type DecisionSink interface {
	LogDecision(ctx context.Context, d DecisionRecord)
}
