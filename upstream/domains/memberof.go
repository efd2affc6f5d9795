package domains

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/dirgate/dirgate"
)

// MemberOf returns the groups obj is a direct member of in every configured domain:
// those of its own domain, as that domain answers, and, for a principal of that
// domain (its SID's domain part is the domain's), the groups of each other domain
// that hold the foreign security principal that domain holds for it. The member
// service's breadth-first walk over MemberOf (a caller's groups, docs/auth.md) so
// reaches the domain-local groups of other domains that hold the caller, or one of
// its groups, through an FSP, and what nests them there, as a Windows resource
// domain puts them in the caller's token.
//
// The own domain's failure is the answer. Another domain's is not: its groups are
// left out and the failure logged (bounded), so that one domain's outage does not
// stop the callers of the others; a caller's groups then lack only the groups of
// the failing domain that hold it (docs/directory.md, "Limits with several
// domains").
func (r *Directory) MemberOf(ctx context.Context, obj dirgate.Object) ([]dirgate.Object, error) {
	own := r.ofObject(obj)
	groups, err := own.Dir.MemberOf(ctx, obj)
	if err != nil || len(r.domains) == 1 || obj.SID == "" || r.ofSID(obj.SID) != own {
		return groups, err
	}
	sid, err := dirgate.ParseIdentifier(obj.SID)
	if err != nil || sid.Kind() != dirgate.KindSID {
		return groups, nil
	}
	found := make([][]dirgate.Object, len(r.domains))
	var wg sync.WaitGroup
	for i, e := range r.domains {
		if e == own {
			continue
		}
		wg.Go(func() {
			gs, err := r.foreignGroups(ctx, e, sid)
			if err != nil {
				if ctx.Err() == nil {
					e.groupFailures.log(ctx, r, e, "domains: the groups of another domain that hold a principal could not be read: left out of its groups", err)
				}
				return
			}
			found[i] = gs
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("domains: member of: %w", err)
	}
	seen := make(map[string]bool, len(groups))
	for _, g := range groups {
		seen[g.GUID] = true
	}
	for _, gs := range found {
		for _, g := range gs {
			if !seen[g.GUID] {
				seen[g.GUID] = true
				groups = append(groups, g)
			}
		}
	}
	return groups, nil
}

// foreignGroups returns the groups of e that directly hold the foreign security
// principal e holds for sid, none when it holds none. With a ForeignChangeSource
// (one search, which finds nothing for most principals) the FSP is found by it and
// read by GUID; otherwise it is looked up by SID (e's DC answers a foreign SID with
// its FSP). Every object e answers must be its own (checkAnswer), the FSP an FSP and
// the groups groups.
func (r *Directory) foreignGroups(ctx context.Context, e *domain, sid dirgate.Identifier) ([]dirgate.Object, error) {
	var fsps []dirgate.Object
	if e.Foreign != nil {
		chs, err := e.Foreign.ForeignChanges(ctx, []string{sid.Canonical()})
		if err != nil {
			return nil, err
		}
		for _, ch := range chs {
			if !strings.EqualFold(ch.SID, sid.Canonical()) {
				continue
			}
			id, err := dirgate.ParseIdentifier(ch.GUID)
			if err != nil || id.Kind() != dirgate.KindGUID {
				continue
			}
			fsp, err := r.lookupChecked(ctx, e, id)
			if err != nil {
				return nil, err
			}
			fsps = append(fsps, fsp)
		}
	} else {
		fsp, err := r.lookupChecked(ctx, e, sid)
		if dirgate.ErrorCode(err) == dirgate.ENOTFOUND {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		fsps = append(fsps, fsp)
	}
	var out []dirgate.Object
	for _, fsp := range fsps {
		if fsp.ObjectType != dirgate.TypeForeignPrincipal || !strings.EqualFold(fsp.SID, sid.Canonical()) {
			r.refused(ctx, e, "it answered a principal's SID with an object that is not its foreign security principal", fsp)
			continue
		}
		gs, err := e.Dir.MemberOf(ctx, fsp)
		if err != nil {
			return nil, err
		}
		for _, g := range gs {
			switch {
			case !g.IsGroup() || r.ofDN(g.DN) != e:
				r.refused(ctx, e, "it answered a group of a foreign security principal that is not its own group", g)
			case r.ofSID(g.SID) != e:
				// A builtin group (S-1-5-32-…) carries the same SID in every domain:
				// a role naming it means the callers its own domain puts there, not
				// those another domain's administrators put in theirs.
			case r.guidClash(ctx, e, g):
				r.refused(ctx, e, "it answered a group whose GUID another domain's object carries", g)
			default:
				out = append(out, g)
			}
		}
	}
	return out, nil
}

// guidClash reports whether another domain than e holds g's GUID, or e's answer for
// it is not g: a role may name a trustee by GUID, so a group of e that carried a
// home group's GUID would grant a caller that group's roles. Asked of every
// domain at once, as a GUID look-up is (lookupGUID).
func (r *Directory) guidClash(ctx context.Context, e *domain, g dirgate.Object) bool {
	id, err := dirgate.ParseIdentifier(g.GUID)
	if err != nil || id.Kind() != dirgate.KindGUID {
		return true
	}
	held, err := r.lookupGUID(ctx, id, nil)
	return err != nil || r.ofDN(held.DN) != e || !strings.EqualFold(held.DN, g.DN)
}

// lookupChecked looks id up in e, whichever domain e is, and refuses an object
// that cannot be e's (checkAnswer).
func (r *Directory) lookupChecked(ctx context.Context, e *domain, id dirgate.Identifier) (dirgate.Object, error) {
	obj, err := e.Dir.Lookup(ctx, id, nil)
	if err != nil {
		return dirgate.Object{}, err
	}
	if err := r.checkAnswer(ctx, e, id, obj); err != nil {
		return dirgate.Object{}, dirgate.WrapError(dirgate.EUPSTREAM, "", fmt.Errorf("domains: lookup in %s: %w", e.name, err))
	}
	return obj, nil
}

// log logs a failure of e at most once per refusalEvery, counting those left out.
func (l *refusalLog) log(ctx context.Context, r *Directory, e *domain, msg string, err error) {
	ok, skipped := l.due()
	if !ok {
		return
	}
	r.log.WarnContext(ctx, msg, "domain", e.name, "err", err, "unlogged", skipped)
}
