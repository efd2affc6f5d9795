package domains

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dirgate/dirgate"
)

// MemberOf returns the groups obj is a direct member of in every configured domain:
// those of its own domain, as that domain answers; the groups of each other domain
// of the same forest that hold obj's DN (dirgate.ForestGroupFinder: within one
// forest AD holds such a member by its DN, and obj's own domain lacks the
// back-link); and, for a principal of its domain (its SID's domain part is the
// domain's), the groups of each domain of another forest that hold the foreign
// security principal that domain holds for it. The member service's breadth-first
// walk over MemberOf (a caller's groups, docs/auth.md) so reaches the groups of
// other domains that hold the caller, or one of its groups, and what nests them
// there, as Windows puts them in the caller's token.
//
// The own domain's failure is the answer. Another domain's is not: its groups are
// left out and the failure logged (bounded), so that one domain's outage does not
// stop the callers of the others; a caller's groups then lack only the groups of
// the failing domain that hold it (docs/directory.md, "Limits with several
// domains").
func (r *Directory) MemberOf(ctx context.Context, obj dirgate.Object) ([]dirgate.Object, error) {
	own := r.ofObject(obj)
	if len(r.domains) == 1 {
		return own.Dir.MemberOf(ctx, obj)
	}
	// The other domains are asked while the own domain is: a principal's groups
	// cost the slower of them per group, not their sum.
	found := make([][]dirgate.Object, len(r.domains))
	var wg sync.WaitGroup
	ask := func(i int, e *domain, groups func() ([]dirgate.Object, error)) {
		wg.Go(func() {
			gs, err := groups()
			if err != nil {
				if ctx.Err() == nil {
					e.groupFailures.log(ctx, r, e, "domains: the groups of another domain that hold a principal could not be read: left out of its groups", err)
				}
				return
			}
			found[i] = gs
		})
	}
	sid, err := dirgate.ParseIdentifier(obj.SID)
	principal := err == nil && sid.Kind() == dirgate.KindSID && r.ofSID(obj.SID) == own
	// Other domains of the forest are asked by obj's DN only when it is own's
	// object: a DN no domain holds names nothing they could hold.
	var dn dirgate.DN
	if r.ofDN(obj.DN) == own {
		dn, _ = dirgate.ParseDN(obj.DN)
	}
	for i, e := range r.domains {
		switch {
		case e == own:
		case sameForest(own, e):
			// No foreign security principal stands for a member of the same
			// forest: only the DN is asked for.
			if f, ok := e.Dir.(dirgate.ForestGroupFinder); ok && !dn.IsZero() {
				ask(i, e, func() ([]dirgate.Object, error) { return r.forestGroups(ctx, e, f, dn) })
			}
		case principal:
			ask(i, e, func() ([]dirgate.Object, error) { return r.foreignGroups(ctx, e, sid) })
		}
	}
	groups, err := own.Dir.MemberOf(ctx, obj)
	if err == nil && own != r.home() {
		// Another domain's answer about its own objects is held to what it may
		// say, as its answers for FSPs are: its own groups, none carrying another
		// domain's SID or GUID.
		groups = r.ownGroups(ctx, own, groups, true)
	}
	wg.Wait()
	if err != nil {
		return nil, err
	}
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
		// A builtin group (S-1-5-32-…) carries the same SID in every domain: a
		// role naming it means the callers its own domain puts there, not those
		// another domain's administrators put in theirs.
		out = append(out, r.ownGroups(ctx, e, gs, false)...)
	}
	return out, nil
}

// forestGroups returns the groups of e, a domain of the forest of dn's domain, that
// hold dn directly, each checked as e's own (ownGroups; a builtin group is left
// out, as for foreignGroups). A directory that turns out not to say (a wrapper
// whose inner directory cannot: errors.ErrUnsupported) holds none.
func (r *Directory) forestGroups(ctx context.Context, e *domain, f dirgate.ForestGroupFinder, dn dirgate.DN) ([]dirgate.Object, error) {
	gs, err := f.GroupsHolding(ctx, []dirgate.DN{dn})
	if errors.Is(err, errors.ErrUnsupported) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return r.ownGroups(ctx, e, gs, false), nil
}

// ownGroups keeps the groups e answered that are e's own: a group under e's base DN,
// whose SID is of e's domain (or, with builtin, one that is no domain's: a builtin
// or well-known SID), and whose GUID no other domain holds. Every other answer is
// refused and logged, so that no domain can put a caller in a group that carries
// another domain's identifiers, which a role may name as its trustee. The member
// service keeps a builtin group's SID only for callers of the group's own domain
// (dirgate.MemberService.Principal).
func (r *Directory) ownGroups(ctx context.Context, e *domain, gs []dirgate.Object, builtin bool) []dirgate.Object {
	ok := make([]bool, len(gs))
	var wg sync.WaitGroup
	for i, g := range gs {
		switch sidDomain := r.ofSID(g.SID); {
		case !g.IsGroup() || r.ofDN(g.DN) != e:
			r.refused(ctx, e, "it answered a group that is not its own", g)
			continue
		case strings.HasPrefix(strings.ToUpper(g.SID), "S-1-5-21-") && sidDomain != e:
			r.refused(ctx, e, "it answered a group carrying a SID of another domain", g)
			continue
		case sidDomain != e && !builtin:
			continue
		}
		wg.Go(func() {
			if r.guidClash(ctx, e, g) {
				r.refused(ctx, e, "it answered a group whose GUID another domain's object carries", g)
				return
			}
			ok[i] = true
		})
	}
	wg.Wait()
	var out []dirgate.Object
	for i, g := range gs {
		if ok[i] {
			out = append(out, g)
		}
	}
	return out
}

// guidClash reports whether a domain other than e holds g's GUID, or cannot say:
// a role may name a trustee by GUID, so a group of e carrying another domain's
// group's GUID would grant a caller that group's roles. Every other domain is asked
// at once; a failure counts as a clash (the group is left out while that domain
// fails). A GUID found to be e's alone is remembered (verified), so that a
// principal's groups cost these look-ups once.
func (r *Directory) guidClash(ctx context.Context, e *domain, g dirgate.Object) bool {
	id, err := dirgate.ParseIdentifier(g.GUID)
	if err != nil || id.Kind() != dirgate.KindGUID {
		return true
	}
	if r.verified.has(id.Canonical(), e) {
		return false
	}
	var clash atomic.Bool
	var wg sync.WaitGroup
	for _, d := range r.domains {
		if d == e {
			continue
		}
		wg.Go(func() {
			r.slots <- struct{}{}
			defer func() { <-r.slots }()
			_, err := d.Dir.Lookup(ctx, id, nil)
			if dirgate.ErrorCode(err) != dirgate.ENOTFOUND {
				clash.Store(true) // held there, or unknown whether it is
			}
		})
	}
	wg.Wait()
	if !clash.Load() {
		r.verified.add(id.Canonical(), e)
	}
	return clash.Load()
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

// verifiedGUIDs remembers GUIDs found to be one domain's alone (guidClash), for
// verifiedFor, at most maxVerified at once (all forgotten when full).
type verifiedGUIDs struct {
	mu sync.Mutex
	m  map[string]verifiedGUID
}

type verifiedGUID struct {
	d  *domain
	at time.Time
}

const (
	verifiedFor = 24 * time.Hour
	maxVerified = 100000
)

func (v *verifiedGUIDs) has(guid string, d *domain) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	e, ok := v.m[guid]
	return ok && e.d == d && time.Since(e.at) < verifiedFor
}

func (v *verifiedGUIDs) add(guid string, d *domain) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.m == nil || len(v.m) >= maxVerified {
		v.m = make(map[string]verifiedGUID)
	}
	v.m[guid] = verifiedGUID{d, time.Now()}
}
