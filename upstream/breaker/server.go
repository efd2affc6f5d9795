package breaker

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/dirgate/dirgate"
	"github.com/sony/gobreaker/v2"
	"go.opentelemetry.io/otel/metric"
)

// Server is the circuit breaker of one directory server (a domain controller), for
// an upstream that spreads its calls over several servers and asks each server's
// breaker before sending it a call, so that a dead server is skipped at once while
// the others keep serving. Its Settings mean what they mean for New: consecutive
// infrastructure failures (IsInfrastructureFailure) open it, answers count as
// successes, cancellations (ECANCELED) count as nothing and free a half-open probe.
//
// Unlike Directory it does not make the call, so it records no span or duration:
// the upstream's telemetry-only wrapper (Settings.TelemetryOnly) does, once per call
// whatever the servers tried.
type Server struct {
	// cb is replaced by a closed one when the server passes a health check (Reset).
	cb     atomic.Pointer[gobreaker.TwoStepCircuitBreaker[struct{}]]
	gs     gobreaker.Settings
	name   string
	server string
	// changed reports state changes, Reset's included.
	changed func(from, to State)

	closeOnce sync.Once
	reg       metric.Registration
}

// NewServer returns the breaker of server (its URL, e.g. "ldaps://dc1:636"),
// configured by s (s.TelemetryOnly does not apply), and reports its state on the
// dirgate_upstream_breaker_state gauge with the labels upstream=s.Name and
// server=server until Close.
func NewServer(s Settings, server string) *Server {
	gs := gobreakerSettings(s)
	var changed func(from, to State)
	switch {
	case s.OnServerStateChange != nil:
		hook := s.OnServerStateChange
		changed = func(from, to State) { hook(gs.Name, server, from, to) }
	case s.OnStateChange != nil:
		hook := s.OnStateChange
		changed = func(from, to State) { hook(gs.Name+" "+server, from, to) }
	}
	if changed != nil {
		gs.OnStateChange = func(_ string, from, to gobreaker.State) { changed(fromGobreaker(from), fromGobreaker(to)) }
	}
	b := &Server{gs: gs, name: s.Name, server: server, changed: changed}
	b.cb.Store(gobreaker.NewTwoStepCircuitBreaker[struct{}](gs))
	// A meter that cannot take the callback costs the series, never the breaker.
	b.reg, _ = registerServer(b)
	return b
}

// Allow asks to send one call to the server. A refusal (open, or half-open with
// every probe taken) is an EUNAVAILABLE error whose client message names no server
// and whose wrapped error names it and wraps gobreaker.ErrOpenState or
// gobreaker.ErrTooManyRequests. Otherwise done must be called exactly once with the
// call's outcome (nil, or its error, classified as for New); a later call of the
// same done is ignored, so that an outcome is never counted twice. A done never
// called holds its half-open probe for good: the caller must call it even when the
// call panics.
func (b *Server) Allow() (done func(err error), err error) {
	report, err := b.cb.Load().Allow()
	if err != nil {
		return nil, dirgate.WrapError(dirgate.EUNAVAILABLE, "The directory is unavailable; try again later.",
			fmt.Errorf("breaker: %s %s: %w", b.name, b.server, err))
	}
	var reported atomic.Bool
	return func(err error) {
		if reported.CompareAndSwap(false, true) {
			report(err)
		}
	}, nil
}

// Open reports whether the breaker refuses every call right now. A half-open
// breaker is not open, even with its probes taken: the server is being tried.
func (b *Server) Open() bool { return b.State() == StateOpen }

// State returns the breaker's state; an open breaker whose OpenTimeout has passed
// turns half-open here.
func (b *Server) State() State { return fromGobreaker(b.cb.Load().State()) }

// Reset closes the breaker: the upstream calls it when the server passed a health
// check of its own (a new connection, a bind, a read), which says more of the server
// now than the failures that opened the breaker. Without it a DC back from an outage
// stays out of rotation until OpenTimeout has passed and a trial call succeeded, and
// with every other DC's breaker open too, every call is refused meanwhile.
func (b *Server) Reset() {
	old := b.cb.Swap(gobreaker.NewTwoStepCircuitBreaker[struct{}](b.gs))
	if from := fromGobreaker(old.State()); from != StateClosed && b.changed != nil {
		b.changed(from, StateClosed)
	}
}

// Server returns the server the breaker guards.
func (b *Server) Server() string { return b.server }

// Close stops reporting the breaker on the state gauge, for a server the upstream no
// longer uses (DNS no longer names it). The breaker itself keeps working, so a call
// in flight may still report its outcome. Close may be called more than once.
func (b *Server) Close() error {
	var err error
	b.closeOnce.Do(func() {
		if b.reg != nil {
			err = b.reg.Unregister()
		}
	})
	if err != nil {
		return fmt.Errorf("breaker: %s %s: unregister the state gauge: %w", b.name, b.server, err)
	}
	return nil
}
