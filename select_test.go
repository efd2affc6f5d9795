package dirgate_test

import (
	"context"
	"errors"
	"testing"

	"github.com/dirgate/dirgate"
)

// selector answers SelectView with sel (or err), counting how often it is asked.
type selector struct {
	hideAuthz
	sel   dirgate.Selection
	err   error
	asked int
}

func (a *selector) SelectView(context.Context, dirgate.Principal, dirgate.Object, dirgate.ListOptions, []dirgate.Object, int) (dirgate.Selection, error) {
	a.asked++
	return a.sel, a.err
}

// filterOnly is an authorizer that is not a ViewSelector.
type filterOnly struct{ hideAuthz }

// Select decides a listing as a selection only when the decision is one: no
// authorizer, or a selector that will not withhold properties. Its selection is
// exact, sizeLimit applied to a copy, never to the selector's (shared) selection.
func TestSelect(t *testing.T) {
	objs := make([]dirgate.Object, 70)
	ctx, p, g := context.Background(), dirgate.Principal{}, dirgate.Object{}
	every := dirgate.AllSelected(len(objs), 0)
	props := dirgate.ListOptions{Properties: []string{"mail"}}

	sel, ok, err := (&dirgate.MemberService{}).Select(ctx, p, g, dirgate.ListOptions{SizeLimit: 65}, objs)
	if err != nil || !ok || sel.Count() != 65 || sel.Len() != 70 || !sel.Has(64) || sel.Has(65) {
		t.Errorf("no authorizer: %d of %d selected, %v, %v; want the first 65 of 70", sel.Count(), sel.Len(), ok, err)
	}
	if _, ok, err := (&dirgate.MemberService{Authz: &filterOnly{}}).Select(ctx, p, g, dirgate.ListOptions{}, objs); ok || err != nil {
		t.Errorf("an authorizer that only filters: %v, %v; want false", ok, err)
	}
	// A selector that may withhold asked properties is asked: it selects when it
	// withholds none (ErrPropertiesWithheld otherwise, below).
	withholding := &selector{sel: every}
	if _, ok, err := (&dirgate.MemberService{Authz: withholding}).Select(ctx, p, g, props, objs); !ok || err != nil || withholding.asked != 1 {
		t.Errorf("a selector that may withhold asked properties, and withholds none: %v, %v, asked %d; want its selection", ok, err, withholding.asked)
	}
	if _, ok, err := (&dirgate.MemberService{Authz: withholding}).Select(ctx, p, g, dirgate.ListOptions{}, objs); !ok || err != nil {
		t.Errorf("a selector that may withhold, no properties asked: %v, %v; want a selection", ok, err)
	}
	changed := &selector{err: dirgate.ErrPropertiesWithheld}
	if _, ok, err := (&dirgate.MemberService{Authz: changed}).Select(ctx, p, g, props, objs); ok || err != nil {
		t.Errorf("ErrPropertiesWithheld: %v, %v; want false without an error", ok, err)
	}
	failing := &selector{err: errors.New("boom")}
	if _, _, err := (&dirgate.MemberService{Authz: failing}).Select(ctx, p, g, dirgate.ListOptions{}, objs); err == nil || err.Error() != "filter listing: boom" {
		t.Errorf("a failing selector: %v", err)
	}
	short := &selector{sel: dirgate.AllSelected(69, 0)}
	if _, _, err := (&dirgate.MemberService{Authz: short}).Select(ctx, p, g, dirgate.ListOptions{}, objs); dirgate.ErrorCode(err) != dirgate.EINTERNAL {
		t.Errorf("a selection over another length: %v, want EINTERNAL", err)
	}
	shared := dirgate.AllSelected(len(objs), 0)
	sel, ok, err = (&dirgate.MemberService{Authz: &selector{sel: shared}}).Select(ctx, p, g, dirgate.ListOptions{SizeLimit: 3}, objs)
	if err != nil || !ok || sel.Count() != 3 || shared.Count() != 70 {
		t.Errorf("limit 3 over a selection of 70: %d selected, the selector's now %d (%v, %v)", sel.Count(), shared.Count(), ok, err)
	}
}
