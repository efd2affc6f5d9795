package load

import (
	"context"
	"fmt"

	"github.com/dirgate/dirgate"
)

// Expect computes the answer to every listing of w with ref, and returns a Checker
// holding them. ref must be uncached and independent of the gateway under test: a
// dirgate.MemberService over its own connection to the directory (or its own copy
// of an in-memory one), with an Authorizer loaded from the same policy. It also
// records each listing's unfiltered DNs (what a direct directory search must find)
// and checks that every removal group holds its members, the state a run starts in.
func Expect(ctx context.Context, ref *dirgate.MemberService, w Workload) (*Checker, error) {
	c := NewChecker()
	principals := map[int]dirgate.Principal{}
	principal := func(i int) (dirgate.Principal, error) {
		if p, ok := principals[i]; ok {
			return p, nil
		}
		id, err := dirgate.ParseIdentifier(w.Callers[i].Subject)
		if err != nil {
			return dirgate.Principal{}, fmt.Errorf("expect: caller %s: %w", w.Callers[i].Name, err)
		}
		p, err := ref.Principal(ctx, id)
		if err != nil {
			return dirgate.Principal{}, fmt.Errorf("expect: caller %s: %w", w.Callers[i].Name, err)
		}
		principals[i] = p
		return p, nil
	}
	listing := func(caller int, q Query) error {
		if c.HasListing(caller, q) {
			return nil
		}
		p, err := principal(caller)
		if err != nil {
			return err
		}
		id, opts, err := q.options()
		if err != nil {
			return err
		}
		objs, err := ref.List(ctx, p, id, opts)
		switch {
		case dirgate.ErrorCode(err) == dirgate.ENOTFOUND:
			// A group the caller may not view is answered as an unknown one.
			c.SetHidden(caller, q)
		case err != nil:
			return fmt.Errorf("expect: list %s as %s: %w", q.RawQuery(), w.Callers[caller].Name, err)
		default:
			if err := c.SetListing(caller, q, objs); err != nil {
				return err
			}
		}
		group, err := ref.Dir.Lookup(ctx, id, nil)
		if err != nil {
			return fmt.Errorf("expect: look up %s: %w", q.Group, err)
		}
		opts.SizeLimit = 0
		listing, err := ref.Listing(ctx, group, opts)
		if err != nil {
			return fmt.Errorf("expect: unfiltered listing of %s: %w", q.RawQuery(), err)
		}
		all := listing.Objects
		dns := make([]string, len(all))
		for i, o := range all {
			dns[i] = o.DN
		}
		c.SetDNs(q, dns)
		return nil
	}
	for _, op := range w.Ops {
		if op.Kind == OpList {
			if err := listing(op.Caller, op.Query); err != nil {
				return nil, err
			}
			continue
		}
		for _, g := range w.Removals {
			if err := listing(op.Caller, Query{Group: g.Group}); err != nil {
				return nil, err
			}
		}
	}
	for _, g := range w.Removals {
		if err := checkRemovalGroup(ctx, ref, g); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// checkRemovalGroup fails unless every member to be cycled is a direct member of
// the group, so that a run never starts from a state its checks do not describe.
func checkRemovalGroup(ctx context.Context, ref *dirgate.MemberService, g RemovalGroup) error {
	id, err := dirgate.ParseIdentifier(g.Group)
	if err != nil {
		return fmt.Errorf("expect: removal group %q: %w", g.Group, err)
	}
	group, err := ref.Dir.Lookup(ctx, id, nil)
	if err != nil {
		return fmt.Errorf("expect: removal group %s: %w", g.Group, err)
	}
	members, err := ref.Dir.Members(ctx, group, nil)
	if err != nil {
		return fmt.Errorf("expect: members of %s: %w", g.Group, err)
	}
	have := map[string]bool{}
	for _, m := range members {
		have[dnKey(m.DN)] = true
	}
	for _, m := range g.Members {
		if !have[dnKey(m)] {
			return fmt.Errorf("expect: removal group %s lacks member %s (restore it before a run)", g.Group, m)
		}
	}
	return nil
}

// options turns a query into the service's parameters, as dirgate's HTTP layer does.
func (q Query) options() (dirgate.Identifier, dirgate.ListOptions, error) {
	id, err := dirgate.ParseIdentifier(q.Group)
	if err != nil {
		return dirgate.Identifier{}, dirgate.ListOptions{}, fmt.Errorf("query group %q: %w", q.Group, err)
	}
	opts := dirgate.ListOptions{IncludeIndirect: q.Indirect, SizeLimit: q.SizeLimit}
	if len(q.Properties) > 0 {
		if opts.Properties, err = dirgate.NormalizeProperties(q.Properties); err != nil {
			return dirgate.Identifier{}, dirgate.ListOptions{}, fmt.Errorf("query properties: %w", err)
		}
	}
	return id, opts, nil
}
