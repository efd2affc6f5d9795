package policy

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dirgate/dirgate"
)

// DecisionLog receives every decision the Authorizer makes, one record each
// (docs/policy.md, "Decision log"): package policy/decisionlog writes them as
// JSON lines and hands them to OPA's decision-log service. The records are
// passed by value and hold the request's data shared, not copied: a DecisionLog
// reads them before it returns and keeps nothing of them.
type DecisionLog interface {
	Listing(ctx context.Context, d ListingDecision)
	Change(ctx context.Context, d ChangeDecision)
	// MaxNamed bounds the GUIDs a record's line names per list: the candidate's
	// comparison names no more (negative: none).
	MaxNamed() int
}

// The decisions' paths as the decision log names them, OPA's way.
var (
	logPath       = strings.ReplaceAll(strings.TrimPrefix(decisionPath, "data."), ".", "/")
	signInLogPath = strings.ReplaceAll(strings.TrimPrefix(signInPath, "data."), ".", "/")
)

// ListingDecision is what the Authorizer decided for one listing.
type ListingDecision struct {
	Revision string
	Input    Input
	Elapsed  time.Duration
	// Path is the rule decided, as the log names it (dirgate/authz/allow).
	Path string
	// Objects is the listing, shared: never modified.
	Objects []dirgate.Object
	// Allowed are the decisions of Objects[:Decided] (its length is that of
	// Objects), shared: never modified.
	Allowed []bool
	// NAllowed counts the true ones.
	NAllowed int
	// Decided is how many objects, from the first, were decided: fewer than
	// len(Objects) when a size limit was reached first.
	Decided int
	// Mode is how the listing was decided (predicate, residual, rego,
	// rego-per-object, none); CachedPlan that its plan was cached, Reused that
	// the plan's remembered decisions of this listing were reused.
	Mode       string
	CachedPlan bool
	Reused     bool
	// Errors counts the objects whose evaluation failed (denied).
	Errors int
	// Memo, when the plan remembers these decisions (Decided is then
	// len(Objects)), is kept with them for the log: what it works out from
	// them once serves every request that reuses them. nil otherwise.
	Memo *Memo
	// Candidate is what the candidate policy decided differently (nil: it did
	// not decide this listing).
	Candidate *CandidateDiff
	// WithheldObjects counts the objects the property rule left properties out
	// of, WithheldFailures those it failed on (every requested property left
	// out); WithheldProperties names the properties left out of at least one
	// object, sorted.
	WithheldObjects, WithheldFailures int
	WithheldProperties                []string
}

// ChangeDecision is a decision on one object: a removal, an addition, a view
// refused or compared, an explain, a sign-in.
type ChangeDecision struct {
	Revision string
	Input    Input
	Elapsed  time.Duration
	// Path is the rule decided, as the log names it (dirgate/authz/allow, or
	// dirgate/authz/signin).
	Path    string
	Allowed bool
	// Failed: the evaluation failed (the detail is in the application log).
	Failed bool
	// Defined, for the sign-in rule only: whether the rule was defined.
	Defined *bool
	// Candidate is what the candidate policy decided differently (nil: it did
	// not decide).
	Candidate *CandidateDiff
}

// CandidateDiff is what the candidate policy decided differently for one
// request: the objects it would allow that the active policy denied, and the
// reverse.
type CandidateDiff struct {
	Revision     string
	NewlyAllowed []string
	NewlyDenied  []string
	// NAllowed and NDenied count them; the two lists name at most the decision
	// log's MaxNamed objects in all.
	NAllowed, NDenied int
}

// Memo is a value worked out once from decisions a plan remembers, by whoever
// reads them (the decision log's deniedGuids), and kept with them: the same
// caller listing the same cached listing again reuses it. Its methods do
// nothing on a nil Memo. A Memo holds one type of value.
type Memo struct{ v atomic.Value }

// Load returns the value stored, or nil.
func (m *Memo) Load() any {
	if m == nil {
		return nil
	}
	return m.v.Load()
}

// Store replaces the value.
func (m *Memo) Store(x any) {
	if m != nil {
		m.v.Store(x)
	}
}

// logListing records a listing's decisions in the decision log.
func (a *Authorizer) logListing(ctx context.Context, revision string, in Input, objs []dirgate.Object, allowed []bool, n int,
	st filterStats, start time.Time, cand *CandidateDiff, wh *withheld) {
	if a.dlog == nil {
		return
	}
	ld := ListingDecision{Revision: revision, Input: in, Elapsed: time.Since(start), Path: logPath, Objects: objs,
		Allowed: allowed, NAllowed: n, Decided: st.decided, Mode: st.mode, CachedPlan: st.cached, Reused: st.reused,
		Errors: st.errors, Candidate: cand}
	if d := st.from; d != nil && st.decided == d.n {
		ld.Memo = &d.memo
	}
	if wh != nil {
		ld.WithheldObjects, ld.WithheldFailures, ld.WithheldProperties = wh.count, wh.errors, wh.names
	}
	a.dlog.Listing(ctx, ld)
}

// logChange records a decision on one object in the decision log; err is the
// evaluation's error (a denial), whose detail the application log has.
func (a *Authorizer) logChange(ctx context.Context, revision string, in Input, allowed bool, err error, start time.Time, cand *CandidateDiff) {
	if a.dlog == nil {
		return
	}
	a.dlog.Change(ctx, ChangeDecision{Revision: revision, Input: in, Elapsed: time.Since(start), Path: logPath,
		Allowed: allowed, Failed: err != nil, Candidate: cand})
}
