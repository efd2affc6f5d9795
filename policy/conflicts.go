package policy

// Rules that may conflict, and how partial evaluation is kept from hiding their
// conflicts.

import (
	"slices"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"
)

// conflictProneRules returns the rules that can conflict: single-value rules
// (complete rules, functions and object entries) whose definitions do not all
// produce one and the same constant; every single-value rule that builds an object
// key by key (p[k] := 1, whose key is known only when it is evaluated); and every
// rule whose path overlaps another's (p[k] := 1 beside p.user := 2, p.user.x := 2 or
// p.s contains "x"), whatever its kind. OPA reports a conflict when two of them
// succeed with different values for one key, but partial evaluation inlines each
// definition on its own, which would turn that error (a denial) into an allow. Not
// inlining them keeps them as support rules, which the translator refuses, so such
// policies are evaluated in Rego. (rego.DisableInlining matches paths by prefix
// both ways, so naming an object's path also keeps the rules under it; they are
// named anyway.)
func conflictProneRules(c *ast.Compiler) []string {
	type group struct {
		path         ast.Ref
		value        *ast.Term
		single, many bool // single-value rules, multi-value rules (p contains x) at the path
		prone        bool
	}
	groups := map[string]*group{}
	var order []string
	for _, m := range c.Modules {
		for _, r := range m.Rules {
			path := r.Ref().GroundPrefix()
			key := path.String()
			g, ok := groups[key]
			if !ok {
				g = &group{path: path}
				groups[key] = g
				order = append(order, key)
			}
			if r.Head.RuleKind() != ast.SingleValue {
				g.many = true
				continue
			}
			g.single = true
			if !r.Ref().IsGround() {
				g.prone = true
			}
			if r.Default {
				continue
			}
			for rr := r; rr != nil; rr = rr.Else {
				val := rr.Head.Value
				switch {
				case val == nil || !ast.IsConstant(val.Value):
					g.prone = true
				case g.value == nil:
					g.value = val
				case !g.value.Equal(val):
					g.prone = true
				}
			}
		}
	}
	for _, g := range groups {
		if g.single && g.many {
			g.prone = true
		}
	}
	// Paths that overlap: one rule's path is a prefix of another's, whatever the
	// rules' kinds (p[k] := 1 beside p.user := 2 or p.s contains "x").
	for _, k := range order {
		g := groups[k]
		for i := 1; i < len(g.path); i++ {
			if above, ok := groups[g.path[:i].String()]; ok {
				above.prone = true
				g.prone = true
			}
		}
	}
	var out []string
	for _, k := range order {
		if groups[k].prone {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// conflictTracer watches one partial evaluation for an expression that calls or
// reads a conflict-prone rule being saved, that is, left for evaluation with the
// object. OPA evaluates a body in order, so when such an expression is evaluated
// with the object it may raise a conflict (a denial, and for the property rule
// no property at all) before a later expression over the caller alone is
// undefined. Partial evaluation saves the expression and goes on, and the later
// undefined expression then drops the whole body from the residual: nothing
// remains that could raise the conflict, and another body may allow. A plan whose
// partial evaluation saved such an expression is therefore not used; the rule is
// evaluated in full (filterRego, propertySetsRego). A conflict raised during
// partial evaluation itself fails it, which falls back to the same.
type conflictTracer struct {
	prone []ast.Ref
	saved bool
}

// newConflictTracer returns nil when no rule is conflict-prone: no tracing.
func newConflictTracer(prone []ast.Ref) *conflictTracer {
	if len(prone) == 0 {
		return nil
	}
	return &conflictTracer{prone: prone}
}

func (t *conflictTracer) Enabled() bool               { return true }
func (t *conflictTracer) Config() topdown.TraceConfig { return topdown.TraceConfig{} }
func (t *conflictTracer) TraceEvent(ev topdown.Event) {
	if t.saved || ev.Op != topdown.SaveOp || ev.Node == nil {
		return
	}
	// A ref overlaps a prone rule when either is a prefix of the other: a call of
	// it, a read of it or of a key under it, or a read of the document holding it.
	ast.WalkRefs(ev.Node, func(r ast.Ref) bool {
		g := r.GroundPrefix()
		for _, p := range t.prone {
			if g.HasPrefix(p) || p.HasPrefix(g) {
				t.saved = true
				break
			}
		}
		return t.saved
	})
}

// whyFull is the reason a plan is not used when the evaluation saved a
// conflict-prone expression, or "".
func (t *conflictTracer) whyFull() string {
	if t == nil || !t.saved {
		return ""
	}
	return "the object reaches a rule that may conflict"
}

// proneRefs parses the paths conflictProneRules returns.
func proneRefs(paths []string) []ast.Ref {
	refs := make([]ast.Ref, 0, len(paths))
	for _, p := range paths {
		refs = append(refs, ast.MustParseRef(p))
	}
	return refs
}
