package policy

import (
	"context"
	"fmt"
	"slices"

	"github.com/dirgate/dirgate"
)

// Decision is the outcome of Decide.
type Decision struct {
	// Allow is the gateway's decision: true only when the policy's decision is the
	// boolean true and its evaluation succeeded.
	Allow bool `json:"allow"`
	// Result is the value of data.dirgate.authz.allow; absent when undefined.
	Result any `json:"result,omitempty"`
	// Defined tells whether the decision was defined.
	Defined  bool   `json:"defined"`
	Revision string `json:"revision"`
	// Error is the evaluation error, which denies.
	Error string `json:"error,omitempty"`
	// Properties is, for an allowed view when the policy has the property rule, the
	// rule's value for the object (sorted): the attributes the caller may read of it
	// ("*": every one that is neither secret nor DN-valued).
	Properties []string `json:"properties,omitempty"`
}

// Decide evaluates data.dirgate.authz.allow for one input document, as
// `dirgate policy eval` does. A view of an object is also decided the way listings
// are (residual predicate or batch evaluation); Allow is false if the two ever
// disagreed, which would be a bug that Decide reports as an error.
func (a *Authorizer) Decide(ctx context.Context, input Input) (Decision, error) {
	v := a.current.Load()
	in := input.normalize()
	d := Decision{Revision: v.revision}
	val, _, err := astValue(in)
	if err != nil {
		return d, err
	}
	out, err := v.decide(ctx, val)
	if err != nil {
		d.Error = err.Error()
		return d, nil
	}
	allowed := out.allowed
	d.Allow, d.Result, d.Defined = out.allowed, out.result, out.defined
	if in.Action == ActionView && in.Object != nil {
		listed := make([]bool, 1)
		base := in
		base.Object = nil
		if _, err := v.filterView(ctx, a.logger, base, []dirgate.Object{*in.Object}, listed, 0); err != nil {
			return d, err
		}
		if listed[0] != allowed {
			return d, fmt.Errorf("policy: the listing engine decided %v where evaluation decided %v", listed[0], allowed)
		}
		if allowed && v.hasPropertyRule {
			objs := []dirgate.Object{*in.Object}
			evaluated, failed, err := v.propertySetsRego(ctx, a.logger, base, objs, []int{0}, make([]propSet, 1))
			if err != nil || failed > 0 {
				d.Error = "the property rule's evaluation failed (see the log); every requested property is withheld"
				return d, err
			}
			listedSets, _, err := v.propertySets(ctx, a.logger, base, objs, []int{0})
			if err != nil {
				return d, err
			}
			d.Properties = evaluated[0].sorted()
			if got := listedSets[0].sorted(); !slices.Equal(got, d.Properties) {
				return d, fmt.Errorf("policy: the listing engine's properties %v differ from evaluation's %v", got, d.Properties)
			}
		}
	}
	return d, nil
}
