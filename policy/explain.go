package policy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/dirgate/dirgate"
)

// ActionExplain is input.action when a caller asks for another principal's
// decisions (the decisions API): input.subject is the caller, input.object the
// explored principal, input.group the group.
const ActionExplain = "explain"

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

// reasonsPath is the optional rule that says what granted a decision.
const reasonsPath = packagePath + ".reasons"

// ExplainQuery asks for every decision on a group's unfiltered listing for one
// principal (docs/policy.md, "The decisions API").
type ExplainQuery struct {
	// Caller asks; the policy decides whether it may (action explain). The objects
	// are explained as the caller may see them: with the properties its own property
	// policy lets it read of the objects it may view, and none of the others
	// (callersView). A zero Caller (dirgate policy diff, run by whoever holds the
	// directory's credentials) sees every property.
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

// Explain decides every object of q.Objects for q.Subject, under the active policy
// and under the candidate (or q.Draft), after the active policy has allowed
// q.Caller to explain q.Subject in q.Group. A refusal is an EFORBIDDEN error; a
// draft that cannot be tried is a *DraftError.
func (a *Authorizer) Explain(ctx context.Context, q ExplainQuery) (Explanation, error) {
	if err := a.allowExplain(ctx, a.current.Load(), q, true); err != nil {
		return Explanation{}, err
	}
	return a.Compare(ctx, q)
}

// AllowExplain asks the active policy whether q.Caller may explain q.Subject in
// q.Group (q.Objects is not needed): the decisions API asks before it lists.
func (a *Authorizer) AllowExplain(ctx context.Context, q ExplainQuery) error {
	return a.allowExplain(ctx, a.current.Load(), q, true)
}

// AllowExplainNamed is AllowExplain asked before the subject is looked up, with
// q.Subject only as the request names it (its DN, GUID or SID as typed): the
// decisions API refuses a caller denied there without reading the directory about
// the subject. A policy that needs more of the subject (its groups, or its DN when
// it is named by GUID or SID) to allow denies here: fail closed. Only a denial is logged;
// an allowed caller is asked again on the resolved subject, and that is logged.
func (a *Authorizer) AllowExplainNamed(ctx context.Context, q ExplainQuery) error {
	return a.allowExplain(ctx, a.current.Load(), q, false)
}

// Compare is Explain without asking whether q.Caller may: for `dirgate policy
// diff`, run by whoever holds both policy directories.
func (a *Authorizer) Compare(ctx context.Context, q ExplainQuery) (Explanation, error) {
	v := a.current.Load()
	var other *version
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
	} else if a.shadow != nil {
		if c := a.shadow.Current(); c != nil {
			other, source = c.v, "candidate"
		}
	}
	out := Explanation{Subject: q.Subject, Group: q.Group, ActiveRevision: v.revision, CandidateSource: source,
		Objects: make([]ObjectExplanation, len(q.Objects))}
	if len(q.Options.Properties) > 0 && (q.Caller.DN != "" || q.Caller.GUID != "" || q.Caller.SID != "") {
		objs, err := a.callersView(ctx, v, q)
		if err != nil {
			return Explanation{}, err
		}
		q.Objects = objs
	}
	active, err := v.explainAll(ctx, a, q)
	if err != nil {
		return Explanation{}, err
	}
	var cand []Decisions
	if other != nil {
		out.CandidateRevision = other.revision
		if cand, err = other.explainAll(evalCtx, a, q); err != nil {
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

// callersView returns q.Objects as q.Caller may see them in the group's listing:
// those it may view with the properties its property policy lets it read, the
// others with none. The decisions API shows the objects' decisions and reasons,
// which a policy (a draft above all) can compute from input.object.properties, so
// the caller must not be able to learn through them a property it may not read.
func (a *Authorizer) callersView(ctx context.Context, v *version, q ExplainQuery) ([]dirgate.Object, error) {
	in := Input{Action: ActionView, Subject: q.Caller, Group: q.Group, Request: requestOf(q.Options)}.normalize()
	allowed := make([]bool, len(q.Objects))
	if _, err := v.filterView(ctx, a.logger, in, q.Objects, allowed, 0); err != nil {
		return nil, err
	}
	wh, err := a.withhold(ctx, v, in, q.Objects, allowed, 0)
	if err != nil {
		return nil, err
	}
	out := make([]dirgate.Object, len(q.Objects))
	j := 0
	for i, o := range q.Objects {
		if allowed[i] {
			out[i] = wh.objs[j]
			j++
			continue
		}
		if len(o.Properties) > 0 {
			o.Properties = map[string][]string{}
		}
		out[i] = o
	}
	return out, nil
}

// explainInput is the input of an explain decision: the object is a principal.
type explainInput struct {
	Action  string            `json:"action"`
	Subject dirgate.Principal `json:"subject"`
	Object  dirgate.Principal `json:"object"`
	Group   dirgate.Object    `json:"group"`
	Request Request           `json:"request"`
}

func (a *Authorizer) allowExplain(ctx context.Context, v *version, q ExplainQuery, logAllowed bool) error {
	start := time.Now()
	in := explainInput{Action: ActionExplain, Subject: Input{Subject: q.Caller}.normalize().Subject,
		Object: Input{Subject: q.Subject}.normalize().Subject, Group: q.Group, Request: requestOf(dirgate.ListOptions{})}
	val, _, err := astValue(in)
	if err != nil {
		return err
	}
	o, err := v.decide(ctx, val)
	if err != nil {
		if isContextErr(err) && ctx.Err() != nil {
			return fmt.Errorf("policy: %w", err)
		}
		a.logger.Error("policy: evaluation failed; explain denied", "revision", v.revision, "err", err)
	}
	allowed := err == nil && o.allowed
	// Logged like a removal: the explored principal is the object.
	logged := Input{Action: ActionExplain, Subject: q.Caller, Object: &dirgate.Object{DN: q.Subject.DN, GUID: q.Subject.GUID},
		Group: q.Group, Request: requestOf(dirgate.ListOptions{})}.normalize()
	if !allowed || logAllowed {
		a.logChange(ctx, v.revision, logged, allowed, err, start, nil)
	}
	if !allowed {
		return &dirgate.Error{Code: dirgate.EFORBIDDEN, Message: "You are not allowed to see this principal's decisions in this group.", Err: err}
	}
	return nil
}

// explainAll decides view and remove of every object for q.Subject with the
// listing engine (which gives exactly the decisions of evaluating allow per
// object), and evaluates the reasons rule.
func (v *version) explainAll(ctx context.Context, a *Authorizer, q ExplainQuery) ([]Decisions, error) {
	n := len(q.Objects)
	out := make([]Decisions, n)
	view, remove := make([]bool, n), make([]bool, n)
	viewIn := Input{Action: ActionView, Subject: q.Subject, Group: q.Group, Request: requestOf(q.Options)}.normalize()
	removeIn := Input{Action: ActionRemove, Subject: q.Subject, Group: q.Group, Request: requestOf(dirgate.ListOptions{})}.normalize()
	if _, err := v.filterView(ctx, a.logger, viewIn, q.Objects, view, 0); err != nil {
		return nil, err
	}
	if _, err := v.filterView(ctx, a.logger, removeIn, q.Objects, remove, 0); err != nil {
		return nil, err
	}
	viewWhy, err := v.reasons(ctx, viewIn, q.Objects, view)
	if err != nil {
		return nil, err
	}
	removeWhy, err := v.reasons(ctx, removeIn, q.Objects, remove)
	if err != nil {
		return nil, err
	}
	withheld, err := v.withheldNames(ctx, a, viewIn, q.Objects, view)
	if err != nil {
		return nil, err
	}
	for i := range out {
		out[i] = Decisions{View: view[i], Remove: remove[i], Reasons: &ActionReasons{View: viewWhy[i], Remove: removeWhy[i]},
			WithheldProperties: withheld[i]}
	}
	return out, nil
}

// withheldNames returns, for each object viewed, the names of its properties the
// property policy leaves out for in.Subject (nil when none, and for objects not
// viewed).
func (v *version) withheldNames(ctx context.Context, a *Authorizer, in Input, objs []dirgate.Object, view []bool) ([][]string, error) {
	out := make([][]string, len(objs))
	if !a.mayWithhold(v, in.Request.Properties) {
		return out, nil
	}
	var idx []int
	for i, ok := range view {
		if ok {
			idx = append(idx, i)
		}
	}
	sets, _, err := v.propertySets(ctx, a.logger, in, objs, idx)
	if err != nil {
		return nil, err
	}
	secret := a.secretFunc()
	for j, i := range idx {
		for k := range objs[i].Properties {
			if !sets[j].allows(k, secret) {
				out[i] = append(out[i], k)
			}
		}
		slices.Sort(out[i])
	}
	return out, nil
}

// reasonsQuery evaluates the reasons rule for every object in one evaluation.
const reasonsQuery = `reasons := {i: r |
	some i, obj in input.objects
	doc := object.union(input.base, {"object": obj})
	r := data.dirgate.authz.reasons with input as doc
}`

// reasons returns, per object, the values of the policy's reasons rule for the
// allowed objects (empty when the policy has none, when it is undefined for the
// object, and for denied objects: nothing granted them, and evaluating the rule in
// Rego costs about as much as the decision itself). A rule whose values are not
// strings is rendered as JSON.
func (v *version) reasons(ctx context.Context, in Input, all []dirgate.Object, allowed []bool) ([][]string, error) {
	out := make([][]string, len(all))
	var objs []dirgate.Object
	var index []int // objs[j] is all[index[j]]
	for i := range out {
		out[i] = []string{}
		if allowed[i] {
			objs, index = append(objs, all[i]), append(index, i)
		}
	}
	if len(objs) == 0 || len(v.compiler.GetRulesForVirtualDocument(ast.MustParseRef(reasonsPath))) == 0 {
		return out, nil
	}
	base, _, err := astValue(in)
	if err != nil {
		return nil, err
	}
	list, _, err := astValue(objs)
	if err != nil {
		return nil, err
	}
	if len(v.nondeterministic) == 0 {
		if rq, err := v.reasonsResidual(ctx, base); err == nil {
			return v.reasonsFromResidual(ctx, rq, base, list, index, out)
		} else if ctx.Err() != nil {
			return nil, fmt.Errorf("reasons: %w", ctx.Err())
		}
	}
	pq, err := rego.New(rego.Compiler(v.compiler), rego.Store(v.store), rego.Query(reasonsQuery)).PrepareForEval(ctx)
	if err != nil {
		return nil, fmt.Errorf("prepare reasons query: %w", err)
	}
	doc := ast.NewObject(
		[2]*ast.Term{ast.InternedTerm("base"), ast.NewTerm(base)},
		[2]*ast.Term{ast.InternedTerm("objects"), ast.NewTerm(list)},
	)
	rs, err := pq.Eval(ctx, rego.EvalParsedInput(doc))
	if err != nil {
		return nil, fmt.Errorf("evaluate %s: %w", reasonsPath, err)
	}
	if len(rs) != 1 {
		return out, nil
	}
	byIndex, _ := rs[0].Bindings["reasons"].(map[string]any)
	for k, val := range byIndex {
		var i int
		if _, err := fmt.Sscan(k, &i); err != nil || i < 0 || i >= len(index) {
			continue
		}
		out[index[i]] = reasonStrings(val)
	}
	return out, nil
}

// reasonsResidualPackage holds the reasons rule partially evaluated for one
// caller (see residualPackage).
const reasonsResidualPackage = "data.__dirgate_reasons__"

// reasonsResidual partially evaluates the reasons rule with input.object unknown,
// as listings do with allow: the caller's part (which roles it holds) is folded
// into constants once, instead of once per object.
func (v *version) reasonsResidual(ctx context.Context, base ast.Value) (*rego.PreparedEvalQuery, error) {
	pq, err := v.partialWith(ctx, rego.Compiler(v.compiler), rego.Store(v.store), rego.StrictBuiltinErrors(false),
		rego.Query("reason = "+reasonsPath+"[_]"), rego.Unknowns([]string{"input.object"}),
		rego.ParsedInput(base))
	if err != nil {
		return nil, fmt.Errorf("partially evaluate reasons: %w", err)
	}
	mod := &ast.Module{Package: &ast.Package{Path: ast.MustParseRef(reasonsResidualPackage)}}
	for _, q := range pq.Queries {
		mod.Rules = append(mod.Rules, &ast.Rule{Head: ast.NewHead(ast.Var("reasons"), ast.VarTerm("reason")), Body: q.Copy(), Module: mod})
	}
	q, err := v.prepareBeside(ctx, mod, pq.Support, "__dirgate_reasons_support_%d__", reasonsResidualPackage+".reasons")
	if err != nil {
		return nil, fmt.Errorf("reasons: %w", err)
	}
	return q, nil
}

// reasonsFromResidual evaluates the residual reasons for each object of list,
// whose reasons go to out[index[j]].
func (v *version) reasonsFromResidual(ctx context.Context, q *rego.PreparedEvalQuery, base, list ast.Value, index []int, out [][]string) ([][]string, error) {
	baseObj, ok := base.(ast.Object)
	arr, ok2 := list.(*ast.Array)
	if !ok || !ok2 || arr.Len() != len(index) {
		return nil, errors.New("reasons: unexpected input shape")
	}
	objectKey := ast.InternedTerm("object")
	for j := range index {
		input := ast.NewObject()
		baseObj.Foreach(func(k, v *ast.Term) { input.Insert(k, v) })
		input.Insert(objectKey, arr.Elem(j))
		rs, err := q.Eval(ctx, rego.EvalParsedInput(input))
		if err != nil {
			return nil, fmt.Errorf("evaluate %s: %w", reasonsPath, err)
		}
		if len(rs) == 1 {
			out[index[j]] = reasonStrings(rs[0].Expressions[0].Value)
		}
	}
	return out, nil
}

// reasonStrings renders a reasons rule's value: at most MaxReasons strings of at
// most MaxReasonBytes each.
func reasonStrings(val any) []string {
	items, ok := val.([]any)
	if !ok {
		items = []any{val}
	}
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
func compileDraft(ctx context.Context, active *version, text string) (*version, error) {
	if len(text) > MaxDraftBytes {
		return nil, &DraftError{Msg: fmt.Sprintf("the module is larger than %d bytes", MaxDraftBytes)}
	}
	caps := DraftCapabilities()
	mod, err := ast.ParseModuleWithOpts("draft.rego", text, ast.ParserOptions{RegoVersion: ast.RegoV1, Capabilities: caps})
	if err != nil {
		return nil, &DraftError{Msg: compileMessage(err)}
	}
	modules := make(map[string]*ast.Module, len(active.modules)+1)
	for p, m := range active.modules {
		if !m.Package.Path.Equal(mod.Package.Path) {
			modules[p] = m.Copy()
		}
	}
	modules["draft.rego"] = mod
	sum := sha256.Sum256([]byte(text))
	src := &source{modules: modules, data: active.data, revision: "draft-" + hex.EncodeToString(sum[:])[:10]}
	select {
	case draftCompiles <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("compile draft: %w", ctx.Err())
	}
	type result struct {
		v   *version
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer func() { <-draftCompiles }()
		v, err := compileWith(context.WithoutCancel(ctx), src, 64, caps)
		if v != nil {
			v.draft = true
		}
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
