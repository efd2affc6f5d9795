// Package breaker puts a circuit breaker in front of any dirgate.Directory (New), or
// of each server of an upstream that has several (NewServer), so that a directory
// that is down costs clients an immediate 503 instead of a timeout each, and the
// directory gets room to recover.
//
// Only infrastructure failures count against the directory: errors coded EUPSTREAM or
// ETIMEOUT. Answers such as "not found", "invalid identifier", "forbidden" or "not a
// member" prove the directory is working and count as successes; a request whose
// client went away (ECANCELED) counts as nothing at all.
package breaker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/fielderr"
	"github.com/sony/gobreaker/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Defaults for the zero values of Settings.
const (
	DefaultFailureThreshold    = 5
	DefaultOpenTimeout         = 30 * time.Second
	DefaultHalfOpenMaxRequests = 1
)

// Settings configures a breaker. Zero values take the defaults above; Validate
// refuses negative ones. cmd/dirgate binds its breaker-* settings to the fields
// FailureThreshold, OpenTimeout and HalfOpenMaxRequests (docs/settings.md).
type Settings struct {
	// Name identifies the breaker in OnStateChange (e.g. "ldap").
	Name string
	// FailureThreshold is the number of consecutive infrastructure failures that open
	// the breaker.
	FailureThreshold int
	// OpenTimeout is how long the breaker stays open, answering EUNAVAILABLE without
	// calling the directory, before it lets probes through.
	OpenTimeout time.Duration
	// HalfOpenMaxRequests is the number of probes allowed while half-open; that many
	// consecutive successes close the breaker, any failure opens it again.
	HalfOpenMaxRequests int
	// OnStateChange, if set, is called on every transition, for logs and metrics. It
	// runs synchronously while the breaker holds its lock: it must be quick and must
	// not call the Directory or State. A per-server breaker (NewServer) calls it with
	// name = Name + " " + server only when OnServerStateChange is nil.
	OnStateChange func(name string, from, to State)
	// OnServerStateChange, if set, is called instead of OnStateChange on every
	// transition of a per-server breaker (NewServer), with the server apart so that a
	// log can carry it as its own field. The same rules apply: quick, and no call to
	// the Server.
	OnServerStateChange func(name, server string, from, to State)
	// TelemetryOnly makes New's breaker never open: every call reaches the inner
	// Directory and is traced and timed as usual, and the state gauge and span
	// attribute say closed. It is for an upstream that keeps breakers of its own, one
	// per server (NewServer). Only Name then matters to New.
	TelemetryOnly bool
}

// State is the breaker's state.
type State int

// States of a breaker.
const (
	StateClosed   State = iota // requests flow; failures are counted
	StateHalfOpen              // a few probes flow; the rest get EUNAVAILABLE
	StateOpen                  // every request gets EUNAVAILABLE at once
)

func (s State) String() string {
	switch s {
	case StateClosed:
		return "closed"
	case StateHalfOpen:
		return "half-open"
	case StateOpen:
		return "open"
	}
	return fmt.Sprintf("state(%d)", int(s))
}

func fromGobreaker(s gobreaker.State) State {
	switch s {
	case gobreaker.StateHalfOpen:
		return StateHalfOpen
	case gobreaker.StateOpen:
		return StateOpen
	}
	return StateClosed
}

// Directory is a dirgate.Directory that calls its inner Directory through a circuit
// breaker.
type Directory struct {
	inner   dirgate.Directory
	cb      *gobreaker.CircuitBreaker[struct{}]
	name    string
	metrics *breakerMetrics
}

var (
	_ dirgate.Directory          = (*Directory)(nil)
	_ dirgate.ForeignMemberAdder = (*Directory)(nil)
	_ dirgate.ForestGroupFinder  = (*Directory)(nil)
)

// New wraps inner in a breaker configured by s.
func New(inner dirgate.Directory, s Settings) *Directory {
	gs := gobreakerSettings(s)
	if s.TelemetryOnly {
		gs.ReadyToTrip = func(gobreaker.Counts) bool { return false }
	}
	if hook := s.OnStateChange; hook != nil {
		gs.OnStateChange = func(name string, from, to gobreaker.State) {
			hook(name, fromGobreaker(from), fromGobreaker(to))
		}
	}
	d := &Directory{inner: inner, cb: gobreaker.NewCircuitBreaker[struct{}](gs), name: s.Name}
	d.metrics = newBreakerMetrics(d)
	return d
}

// gobreakerSettings applies s's defaults and the rules of what counts, shared by the
// whole-directory breaker (New) and the per-server one (NewServer).
// Validate reports every problem of s at once, each a *fielderr.Error naming its
// field.
func (s Settings) Validate() error {
	var errs []error
	for field, neg := range map[string]bool{"FailureThreshold": s.FailureThreshold < 0,
		"OpenTimeout": s.OpenTimeout < 0, "HalfOpenMaxRequests": s.HalfOpenMaxRequests < 0} {
		if neg {
			errs = append(errs, fielderr.New(field, "must be positive"))
		}
	}
	return fielderr.Join(errs...)
}

func gobreakerSettings(s Settings) gobreaker.Settings {
	if s.FailureThreshold <= 0 {
		s.FailureThreshold = DefaultFailureThreshold
	}
	if s.OpenTimeout <= 0 {
		s.OpenTimeout = DefaultOpenTimeout
	}
	if s.HalfOpenMaxRequests <= 0 {
		s.HalfOpenMaxRequests = DefaultHalfOpenMaxRequests
	}
	threshold := uint32(s.FailureThreshold)
	return gobreaker.Settings{
		Name:        s.Name,
		MaxRequests: uint32(s.HalfOpenMaxRequests),
		Timeout:     s.OpenTimeout,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= threshold },
		IsSuccessful: func(err error) bool {
			return !IsInfrastructureFailure(err)
		},
		// A client that went away tells nothing about the directory; excluding the
		// request also frees its half-open slot.
		IsExcluded: func(err error) bool { return dirgate.ErrorCode(err) == dirgate.ECANCELED },
	}
}

// IsInfrastructureFailure reports whether err says the directory itself failed
// (EUPSTREAM, ETIMEOUT), the only errors that count against it. The removal and
// addition sentinels are checked first: they are answers, whatever an adapter coded them as.
func IsInfrastructureFailure(err error) bool {
	if err == nil || errors.Is(err, dirgate.ErrNotMember) || errors.Is(err, dirgate.ErrPrimaryGroup) || errors.Is(err, dirgate.ErrAlreadyMember) {
		return false
	}
	switch dirgate.ErrorCode(err) {
	case dirgate.EUPSTREAM, dirgate.ETIMEOUT:
		return true
	}
	return false
}

// State returns the breaker's current state.
func (d *Directory) State() State { return fromGobreaker(d.cb.State()) }

// call runs f through the breaker inside a client span named after the operation,
// and records its duration and outcome. A request the breaker refuses never reaches
// the inner Directory and fails with EUNAVAILABLE.
func call[T any](ctx context.Context, d *Directory, op string, f func(context.Context) (T, error)) (T, error) {
	ctx, span := tracer().Start(ctx, "upstream "+op, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("dirgate.upstream", d.name),
			attribute.String("dirgate.breaker.state", d.State().String())))
	defer span.End()
	start := time.Now()
	var out T
	ran := false
	_, err := d.cb.Execute(func() (struct{}, error) {
		ran = true
		var err error
		out, err = f(ctx)
		return struct{}{}, err
	})
	if err != nil && !ran {
		var zero T
		out, err = zero, dirgate.WrapError(dirgate.EUNAVAILABLE, "The directory is unavailable; try again later.",
			fmt.Errorf("breaker: %s: %w", op, err))
	}
	outcome := "ok"
	switch {
	case err == nil:
	case errors.Is(err, dirgate.ErrNotMember), errors.Is(err, dirgate.ErrPrimaryGroup), errors.Is(err, dirgate.ErrAlreadyMember):
		outcome = "no_change"
	case dirgate.ErrorCode(err) == dirgate.ENOTFOUND:
		// An answer like any other: a look-up of an object the caller may not view
		// succeeds where one of an unknown object does not, and both are answered the
		// same 404, so an outcome of its own would tell them apart on /metrics.
		span.SetAttributes(attribute.Bool("dirgate.not_found", true))
	default:
		outcome = dirgate.ErrorCode(err)
		if IsInfrastructureFailure(err) || outcome == dirgate.EUNAVAILABLE {
			span.SetStatus(codes.Error, outcome)
		}
	}
	span.SetAttributes(attribute.String("dirgate.outcome", outcome))
	d.metrics.duration.Record(ctx, time.Since(start).Seconds(), metric.WithAttributes(
		attribute.String("upstream", d.name), attribute.String("operation", op), attribute.String("outcome", outcome)))
	return out, err
}

// Lookup implements dirgate.Directory.
func (d *Directory) Lookup(ctx context.Context, id dirgate.Identifier, props []string) (dirgate.Object, error) {
	return call(ctx, d, "lookup", func(ctx context.Context) (dirgate.Object, error) { return d.inner.Lookup(ctx, id, props) })
}

// Members implements dirgate.Directory.
func (d *Directory) Members(ctx context.Context, group dirgate.Object, props []string) ([]dirgate.Object, error) {
	return call(ctx, d, "members", func(ctx context.Context) ([]dirgate.Object, error) { return d.inner.Members(ctx, group, props) })
}

// MemberOf implements dirgate.Directory.
func (d *Directory) MemberOf(ctx context.Context, obj dirgate.Object) ([]dirgate.Object, error) {
	return call(ctx, d, "member_of", func(ctx context.Context) ([]dirgate.Object, error) { return d.inner.MemberOf(ctx, obj) })
}

// RemoveMember implements dirgate.Directory.
func (d *Directory) RemoveMember(ctx context.Context, group, member dirgate.Object) error {
	_, err := call(ctx, d, "remove_member", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, d.inner.RemoveMember(ctx, group, member)
	})
	return err
}

// AddMember implements dirgate.Directory.
func (d *Directory) AddMember(ctx context.Context, group, member dirgate.Object) error {
	_, err := call(ctx, d, "add_member", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, d.inner.AddMember(ctx, group, member)
	})
	return err
}

// AddForeignMember passes an addition by SID through the breaker when the inner
// directory offers one (dirgate.ForeignMemberAdder), timed as an addition. When it
// does not, the error wraps errors.ErrUnsupported, for the caller to add the member
// otherwise.
func (d *Directory) AddForeignMember(ctx context.Context, group dirgate.Object, sid dirgate.Identifier) error {
	f, ok := d.inner.(dirgate.ForeignMemberAdder)
	if !ok {
		return fmt.Errorf("breaker: the upstream adds no member by SID: %w", errors.ErrUnsupported)
	}
	_, err := call(ctx, d, "add_member", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, f.AddForeignMember(ctx, group, sid)
	})
	return err
}

// GroupsHolding passes a search for the groups that hold an object of another domain
// of the forest through the breaker when the inner directory offers one
// (dirgate.ForestGroupFinder), timed as member_of: it answers an object's groups.
// When it does not, the error wraps errors.ErrUnsupported, for the caller to take
// the directory as one that cannot say.
func (d *Directory) GroupsHolding(ctx context.Context, dns []dirgate.DN) ([]dirgate.Object, error) {
	f, ok := d.inner.(dirgate.ForestGroupFinder)
	if !ok {
		return nil, fmt.Errorf("breaker: the upstream finds no groups holding an object of its forest: %w", errors.ErrUnsupported)
	}
	return call(ctx, d, "member_of", func(ctx context.Context) ([]dirgate.Object, error) { return f.GroupsHolding(ctx, dns) })
}

// TransitiveMembers passes an in-chain listing through the breaker when the inner
// directory offers one (dirgate.TransitiveLister).
func (d *Directory) TransitiveMembers(ctx context.Context, group dirgate.Object, props []string) ([]dirgate.Object, error) {
	t, ok := d.inner.(dirgate.TransitiveLister)
	if !ok {
		return nil, dirgate.WrapError(dirgate.EINTERNAL, "", errors.New("breaker: the upstream has no transitive listing"))
	}
	return call(ctx, d, "transitive_members", func(ctx context.Context) ([]dirgate.Object, error) {
		return t.TransitiveMembers(ctx, group, props)
	})
}
