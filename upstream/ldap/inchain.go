package ldap

import (
	"context"
	"fmt"

	"github.com/dirgate/dirgate"
	goldap "github.com/go-ldap/ldap/v3"
)

// primaryChunk bounds the RIDs in one (|(primaryGroupID=…)…) filter.
const primaryChunk = 100

// TransitiveMembers returns every object below group, nested groups included, each
// once and never group itself, in any order: the same set as the member service's
// breadth-first expansion over Members. It asks the server with one
// LDAP_MATCHING_RULE_IN_CHAIN search, then one search for the objects whose primary
// group is group or any group found (the rule does not follow primaryGroupID:
// docs/directory.md, "The in-chain matching rule"). It fails with EINTERNAL unless
// Config.UseInChain is set: on Samba and large AD domains the rule is far slower than
// the expansion.
func (d *Directory) TransitiveMembers(ctx context.Context, group dirgate.Object, props []string) ([]dirgate.Object, error) {
	if !d.cfg.UseInChain {
		return nil, dirgate.WrapError(dirgate.EINTERNAL, "", fmt.Errorf("ldap: transitive members: in-chain searches are disabled (UseInChain)"))
	}
	attrs, err := attributes(props)
	if err != nil {
		return nil, err
	}
	var objs []dirgate.Object
	err = d.do(ctx, true, func(ctx context.Context, c conn, _ int) error {
		col := &collector{}
		err := search(ctx, c, query{
			base: d.cfg.BaseDN, scope: goldap.ScopeWholeSubtree,
			filter: "(memberOf:" + oidInChain + ":=" + goldap.EscapeFilter(group.DN) + ")",
			attrs:  attrs, pageSize: d.cfg.PageSize,
		}, col.add)
		if err != nil {
			return err
		}
		nested, err := d.finish(ctx, c, col, props)
		if err != nil {
			return err
		}
		var rids []int
		for _, g := range append([]dirgate.Object{group}, nested...) {
			if rid, ok := d.domainRID(g.SID); ok && g.IsGroup() {
				rids = append(rids, rid)
			}
		}
		col = &collector{}
		for len(rids) > 0 {
			n := min(len(rids), primaryChunk)
			err := search(ctx, c, query{
				base: d.cfg.BaseDN, scope: goldap.ScopeWholeSubtree,
				filter: primaryFilter(rids[:n]), attrs: attrs, pageSize: d.cfg.PageSize,
			}, col.add)
			if err != nil {
				return err
			}
			rids = rids[n:]
		}
		primary, err := d.finish(ctx, c, col, props)
		if err != nil {
			return err
		}
		objs = append(nested, primary...)
		return nil
	})
	if err != nil {
		return nil, wrap("transitive members", err)
	}
	// With a cycle the rule returns the queried group itself (docs/directory.md, "The
	// in-chain matching rule").
	return dedupe(objs, group.GUID), nil
}
