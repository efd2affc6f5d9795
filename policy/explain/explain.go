package explain

// What the decisions API answers: every decision of the active policy and of the
// candidate (or a draft) on a listing, with the reasons rule's values, bounded.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/policy"
)

// Bounds of a draft policy tried through the decisions API: it comes from a
// request, so its size, its compilation and its evaluation are all bounded.
const (
	MaxDraftBytes           = 64 << 10
	DefaultDraftCompileTime = 2 * time.Second
	DefaultDraftEvalTime    = 5 * time.Second
)

// Bounds of what a policy's reasons rule and a draft's errors put in an answer: a
// draft comes from a request and could otherwise copy anything it reads (data, the
// objects) into it, as much as it likes.
const (
	// MaxReasons is the most reasons shown per object and action; the rest are
	// counted in a last "(N more)".
	MaxReasons = 16
	// MaxReasonBytes bounds one reason; a longer one is cut, ending with "…".
	MaxReasonBytes = 512
	// MaxReasonsBytes bounds the reasons of one answer; beyond it the remaining
	// objects' reasons are left empty and reasonsTruncated is set.
	MaxReasonsBytes = 256 << 10
	// MaxDraftMessageBytes bounds a draft's error message.
	MaxDraftMessageBytes = 4 << 10
)

// Query asks for every decision on a group's unfiltered listing for one
// principal (docs/policy.md, "The decisions API").
type Query struct {
	// Caller asks; the policy decides whether it may (action explain). The objects
	// are explained as the caller may see them: with the properties its own property
	// policy lets it read of the objects it may view, and none of the others
	// (policy.Authorizer's CallersView). A zero Caller (dirgate policy diff, run
	// by whoever holds the directory's credentials) sees every property.
	Caller dirgate.Principal
	// Subject is the explored principal.
	Subject dirgate.Principal
	Group   dirgate.Object
	Options dirgate.ListOptions
	// Objects is the group's unfiltered listing.
	Objects []dirgate.Object
	// Draft, when set, is a Rego module evaluated in place of the candidate: it
	// replaces the active policy's modules of its package, beside the active data.
	Draft string
}

// Explanation is the decisions API's answer.
type Explanation struct {
	Subject           dirgate.Principal `json:"subject"`
	Group             dirgate.Object    `json:"group"`
	ActiveRevision    string            `json:"activeRevision"`
	CandidateRevision string            `json:"candidateRevision,omitempty"`
	// CandidateSource is "candidate" (the configured one) or "draft".
	CandidateSource string              `json:"candidateSource,omitempty"`
	Objects         []ObjectExplanation `json:"objects"`
	// ReasonsTruncated tells that reasons were left out beyond MaxReasonsBytes.
	ReasonsTruncated bool `json:"reasonsTruncated,omitempty"`
}

// ObjectExplanation is every decision on one object of the listing.
type ObjectExplanation struct {
	GUID        string     `json:"guid"`
	DN          string     `json:"dn"`
	DisplayName string     `json:"displayName"`
	ObjectType  string     `json:"objectType"`
	Active      Decisions  `json:"active"`
	Candidate   *Decisions `json:"candidate,omitempty"`
	// Reasons are the active policy's reasons rule's values, by action, for the
	// actions it allows.
	Reasons ActionReasons `json:"reasons"`
}

// Decisions are one policy's decisions on one object.
type Decisions struct {
	View   bool `json:"view"`
	Remove bool `json:"remove"`
	// WithheldProperties are the requested properties of the object that the
	// property policy would leave out of the subject's listing (when it may view it).
	WithheldProperties []string `json:"withheldProperties,omitempty"`
	// Reasons are given for the candidate only (the active ones are the object's).
	Reasons *ActionReasons `json:"reasons,omitempty"`
}

// ActionReasons are the values of the reasons rule for each action.
type ActionReasons struct {
	View   []string `json:"view"`
	Remove []string `json:"remove"`
}

// DraftError is a draft that cannot be tried: too large, not compiling (with the
// compiler's errors, lines included), or too slow.
type DraftError struct{ Msg string }

func (e *DraftError) Error() string { return "draft: " + truncateUTF8(e.Msg, MaxDraftMessageBytes) }

// truncateUTF8 cuts s to at most max bytes on a character boundary, ending with
// "…" when it cut.
func truncateUTF8(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// Engine is what an Explainer asks of the policy (policy.Authorizer): the
// policy in force and the candidate, and what the property policy shows of a
// listing.
type Engine interface {
	Active() *policy.Compiled
	Candidate() *policy.Compiled
	CallersView(ctx context.Context, c *policy.Compiled, caller dirgate.Principal, group dirgate.Object, opts dirgate.ListOptions, objs []dirgate.Object) ([]dirgate.Object, error)
	WithheldProperties(ctx context.Context, c *policy.Compiled, in policy.Input, objs []dirgate.Object, view []bool) ([][]string, error)
	AllowExplain(ctx context.Context, caller, subject dirgate.Principal, group dirgate.Object) error
}

var _ Engine = (*policy.Authorizer)(nil)

// Explainer decides every object of a listing for one principal under the
// active policy and the candidate or a draft.
type Explainer struct {
	policy Engine
	logger *slog.Logger
}

// NewExplainer returns the Explainer over p; logger receives evaluation errors
// (nil: slog.Default()).
func NewExplainer(p Engine, logger *slog.Logger) *Explainer {
	if logger == nil {
		logger = slog.Default()
	}
	return &Explainer{policy: p, logger: logger}
}

// Explain decides every object of q.Objects for q.Subject, under the active policy
// and under the candidate (or q.Draft), after the active policy has allowed
// q.Caller to explain q.Subject in q.Group. A refusal is an EFORBIDDEN error; a
// draft that cannot be tried is a *DraftError.
func (e *Explainer) Explain(ctx context.Context, q Query) (Explanation, error) {
	if err := e.policy.AllowExplain(ctx, q.Caller, q.Subject, q.Group); err != nil {
		return Explanation{}, err
	}
	return e.Compare(ctx, q)
}

// Compare is Explain without asking whether q.Caller may: for `dirgate policy
// diff`, run by whoever holds both policy directories.
func (e *Explainer) Compare(ctx context.Context, q Query) (Explanation, error) {
	v := e.policy.Active()
	var other *policy.Compiled
	source := ""
	var evalCtx = ctx
	if q.Draft != "" {
		d, err := compileDraft(ctx, v, q.Draft)
		if err != nil {
			return Explanation{}, err
		}
		other, source = d, "draft"
		var cancel context.CancelFunc
		evalCtx, cancel = context.WithTimeout(ctx, DefaultDraftEvalTime)
		defer cancel()
	} else if c := e.policy.Candidate(); c != nil {
		other, source = c, "candidate"
	}
	out := Explanation{Subject: q.Subject, Group: q.Group, ActiveRevision: v.Revision(), CandidateSource: source,
		Objects: make([]ObjectExplanation, len(q.Objects))}
	if len(q.Options.Properties) > 0 && (q.Caller.DN != "" || q.Caller.GUID != "" || q.Caller.SID != "") {
		objs, err := e.policy.CallersView(ctx, v, q.Caller, q.Group, q.Options, q.Objects)
		if err != nil {
			return Explanation{}, err
		}
		q.Objects = objs
	}
	active, err := e.explainAll(ctx, v, q)
	if err != nil {
		return Explanation{}, err
	}
	var cand []Decisions
	if other != nil {
		out.CandidateRevision = other.Revision()
		if cand, err = e.explainAll(evalCtx, other, q); err != nil {
			if q.Draft != "" && errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
				return Explanation{}, &DraftError{Msg: fmt.Sprintf("evaluation took longer than %s and was stopped", DefaultDraftEvalTime)}
			}
			if q.Draft != "" && ctx.Err() == nil {
				return Explanation{}, &DraftError{Msg: err.Error()}
			}
			return Explanation{}, err
		}
	}
	for i, o := range q.Objects {
		e := ObjectExplanation{GUID: o.GUID, DN: o.DN, DisplayName: o.DisplayName, ObjectType: o.ObjectType,
			Active: active[i], Reasons: *active[i].Reasons}
		e.Active.Reasons = nil
		if cand != nil {
			c := cand[i]
			e.Candidate = &c
		}
		out.Objects[i] = e
	}
	out.ReasonsTruncated = boundReasons(out.Objects)
	return out, nil
}

// boundReasons empties the reasons of the objects after the first MaxReasonsBytes
// of them, and reports whether it did.
func boundReasons(objs []ObjectExplanation) bool {
	total, cut := 0, false
	count := func(r *ActionReasons) {
		if r == nil {
			return
		}
		for _, l := range [][]string{r.View, r.Remove} {
			for _, s := range l {
				total += len(s)
			}
		}
		if total > MaxReasonsBytes {
			cut = true
			r.View, r.Remove = []string{}, []string{}
		}
	}
	for i := range objs {
		count(&objs[i].Reasons)
		if c := objs[i].Candidate; c != nil {
			count(c.Reasons)
		}
	}
	return cut
}

// explainAll decides view and remove of every object for q.Subject with the
// listing engine (which gives exactly the decisions of evaluating allow per
// object), and evaluates the reasons rule.
func (e *Explainer) explainAll(ctx context.Context, v *policy.Compiled, q Query) ([]Decisions, error) {
	n := len(q.Objects)
	out := make([]Decisions, n)
	view, remove := make([]bool, n), make([]bool, n)
	viewIn := policy.ListingInput(policy.ActionView, q.Subject, q.Group, q.Options)
	removeIn := policy.ListingInput(policy.ActionRemove, q.Subject, q.Group, dirgate.ListOptions{})
	if err := v.DecideListing(ctx, e.logger, viewIn, q.Objects, view); err != nil {
		return nil, err
	}
	if err := v.DecideListing(ctx, e.logger, removeIn, q.Objects, remove); err != nil {
		return nil, err
	}
	viewWhy, err := v.Reasons(ctx, viewIn, q.Objects, view)
	if err != nil {
		return nil, err
	}
	removeWhy, err := v.Reasons(ctx, removeIn, q.Objects, remove)
	if err != nil {
		return nil, err
	}
	withheld, err := e.policy.WithheldProperties(ctx, v, viewIn, q.Objects, view)
	if err != nil {
		return nil, err
	}
	for i := range out {
		out[i] = Decisions{View: view[i], Remove: remove[i], Reasons: &ActionReasons{View: reasonStrings(viewWhy[i]), Remove: reasonStrings(removeWhy[i])},
			WithheldProperties: withheld[i]}
	}
	return out, nil
}

// reasonStrings renders a reasons rule's values (policy.Compiled's Reasons): at
// most MaxReasons strings of at most MaxReasonBytes each, those that are not
// strings as JSON.
func reasonStrings(items []any) []string {
	out := make([]string, 0, min(len(items), MaxReasons+1))
	for i, it := range items {
		if i == MaxReasons {
			out = append(out, fmt.Sprintf("(%d more)", len(items)-i))
			break
		}
		s, ok := it.(string)
		if !ok {
			b, _ := json.Marshal(it)
			s = string(b)
		}
		out = append(out, truncateUTF8(s, MaxReasonBytes))
	}
	return out
}

// draftCompiles admits one draft compilation at a time: the compiler cannot be
// interrupted, so a compilation over its time is abandoned, not stopped, and must
// not be joined by others.
var draftCompiles = make(chan struct{}, 1)

// compileDraft compiles a draft module beside the active policy: it replaces the
// active modules of its package, and sees the active data. Its builtins are
// restricted (DraftCapabilities).
func compileDraft(ctx context.Context, active *policy.Compiled, text string) (*policy.Compiled, error) {
	if len(text) > MaxDraftBytes {
		return nil, &DraftError{Msg: fmt.Sprintf("the module is larger than %d bytes", MaxDraftBytes)}
	}
	caps := DraftCapabilities()
	mod, err := ast.ParseModuleWithOpts("draft.rego", text, ast.ParserOptions{RegoVersion: ast.RegoV1, Capabilities: caps})
	if err != nil {
		return nil, &DraftError{Msg: compileMessage(err)}
	}
	select {
	case draftCompiles <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("compile draft: %w", ctx.Err())
	}
	type result struct {
		v   *policy.Compiled
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer func() { <-draftCompiles }()
		v, err := active.Draft(ctx, mod, text, caps)
		done <- result{v, err}
	}()
	t := time.NewTimer(DefaultDraftCompileTime)
	defer t.Stop()
	select {
	case r := <-done:
		if r.err != nil {
			return nil, &DraftError{Msg: compileMessage(r.err)}
		}
		return r.v, nil
	case <-t.C:
		return nil, &DraftError{Msg: fmt.Sprintf("compilation took longer than %s", DefaultDraftCompileTime)}
	case <-ctx.Done():
		return nil, fmt.Errorf("compile draft: %w", ctx.Err())
	}
}

// maxDraftErrors bounds the compiler errors returned for a draft.
const maxDraftErrors = 10

// compileMessage renders compiler errors as "draft.rego:LINE: message" lines.
func compileMessage(err error) string {
	var errs ast.Errors
	if !errors.As(err, &errs) {
		return strings.TrimPrefix(err.Error(), "compile policy: ")
	}
	var lines []string
	for i, e := range errs {
		if i == maxDraftErrors {
			lines = append(lines, fmt.Sprintf("(%d more)", len(errs)-i))
			break
		}
		lines = append(lines, e.Error())
	}
	return strings.Join(lines, "\n")
}

// draftForbidden are builtins a draft may not call besides the non-deterministic
// ones (which include http.send, net.lookup_ip_addr, time.now_ns, rand.intn,
// uuid.rfc4122 and opa.runtime): named here too, so that an OPA upgrade that
// changed a flag could not let them through, and print and trace, whose output
// would go to the gateway's log.
var draftForbidden = map[string]bool{
	"http.send": true, "net.lookup_ip_addr": true, "time.now_ns": true, "rand.intn": true,
	"uuid.rfc4122": true, "uuid.v4": true, "opa.runtime": true, "print": true, "trace": true,
}

// DraftCapabilities are the builtins a draft may call: this OPA's, less every
// non-deterministic one and draftForbidden, with no network host allowed.
// Deterministic helpers (net.cidr_contains, time.parse_ns, uuid.parse, ...) stay.
func DraftCapabilities() *ast.Capabilities {
	caps := ast.CapabilitiesForThisVersion()
	kept := caps.Builtins[:0]
	for _, b := range caps.Builtins {
		if !b.Nondeterministic && !draftForbidden[b.Name] {
			kept = append(kept, b)
		}
	}
	caps.Builtins = kept
	caps.AllowNet = []string{}
	return caps
}
