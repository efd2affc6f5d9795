package dirgate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"
)

// Lister produces a group's unfiltered, ordered listing. MemberService implements it
// over a Directory; a cache implements it in front of the directory (with Expand). A
// cached listing is shared between requests: callers must not modify it or its
// objects in place (a filter returns a new slice, and altered copies if it alters
// anything).
type Lister interface {
	Listing(ctx context.Context, group Object, opts ListOptions) (Listing, error)
}

// Authorizer decides what a principal may see, remove and add. Nil means everything
// is allowed (the state before policies are configured).
type Authorizer interface {
	// FilterView returns the objects of a listing that p may view, in their order.
	FilterView(ctx context.Context, p Principal, group Object, opts ListOptions, objs []Object) ([]Object, error)
	// AllowRemove returns an EFORBIDDEN error unless p may remove member from group.
	AllowRemove(ctx context.Context, p Principal, group, member Object) error
	// AllowAdd returns an EFORBIDDEN error unless p may add member to group.
	AllowAdd(ctx context.Context, p Principal, group, member Object) error
	// AllowView returns an EFORBIDDEN error unless p may view obj itself, named by
	// a request about group (obj is group when the group itself is named). The
	// service answers about an object p may not view exactly as about an unknown
	// one, so that p cannot tell the two apart (docs/api.md).
	AllowView(ctx context.Context, p Principal, group, obj Object) error
}

// ViewSelector is an Authorizer that decides a listing by choosing some of its
// objects, unaltered, which it reports as a Selection of their positions. A listing
// decided this way is answered with a body rendered once per listing, selection
// and size limit, and shared between the callers it is the answer for
// (MemberService.Select, render.Lister).
type ViewSelector interface {
	// SelectView returns the positions of objs that p may view. With limit > 0 it
	// may stop deciding once limit objects are allowed, and selects at most limit.
	// The selection may be shared with other requests: it must not be modified.
	// A selector whose FilterView may leave requested properties out answers
	// ErrPropertiesWithheld, and decides nothing, unless no requested property is
	// left out of an object it selects (it may also answer so when it does not
	// know yet).
	SelectView(ctx context.Context, p Principal, group Object, opts ListOptions, objs []Object, limit int) (Selection, error)
}

// MemberService implements the API's semantics once, over any Directory:
// nested expansion, deduplication, ordering, cycle handling, permission filtering
// before the size limit, and the removal result.
type MemberService struct {
	Dir Directory
	// Listings, when set, serves unfiltered listings (a cache); otherwise the service
	// expands them from Dir itself.
	Listings Lister
	Authz    Authorizer
	// ExpandConcurrency bounds parallel member reads while expanding one level of
	// nested groups. 0 means 4.
	ExpandConcurrency int
	// Transitive, when set, lists indirect members in one upstream query instead of
	// the breadth-first expansion (AD's in-chain matching rule: an option, as it is
	// slow on Samba and on large AD domains).
	Transitive TransitiveLister
}

// TransitiveLister lists every object below a group, nested groups and primary-group
// members included, in any order; duplicates and the group itself are tolerated and
// removed by the caller.
type TransitiveLister interface {
	TransitiveMembers(ctx context.Context, group Object, props []string) ([]Object, error)
}

// List resolves groupID and returns, in listing order, at most opts.SizeLimit objects
// that p may view.
func (s *MemberService) List(ctx context.Context, p Principal, groupID Identifier, opts ListOptions) ([]Object, error) {
	group, l, err := s.ListingFor(ctx, p, groupID, opts)
	if err != nil {
		return nil, err
	}
	return s.Filter(ctx, p, group, opts, l.Objects)
}

// ListingFor resolves groupID, a group p may view, and returns it with its
// unfiltered listing: List's answer before Filter (or Select) decides it for p. The
// listing's status is the more degraded of the group's resolution and the listing.
func (s *MemberService) ListingFor(ctx context.Context, p Principal, groupID Identifier, opts ListOptions) (Object, Listing, error) {
	group, st, err := s.viewGroup(ctx, p, groupID)
	if err != nil {
		return Object{}, Listing{}, err
	}
	l, err := s.listOf(ctx, group, opts)
	if err != nil {
		return Object{}, Listing{}, err
	}
	l.Status = l.Status.Worse(st)
	return group, l, nil
}

// listing resolves groupID and returns its unfiltered listing, whoever asks.
func (s *MemberService) listing(ctx context.Context, groupID Identifier, opts ListOptions) (Object, []Object, error) {
	group, err := s.resolveGroup(ctx, groupID)
	if err != nil {
		return Object{}, nil, err
	}
	l, err := s.listOf(ctx, group, opts)
	if err != nil {
		return Object{}, nil, err
	}
	return group, l.Objects, nil
}

// listOf lists a resolved group's members, through the cache when there is one.
func (s *MemberService) listOf(ctx context.Context, group Object, opts ListOptions) (Listing, error) {
	lister := s.Listings
	if lister == nil {
		lister = s
	}
	l, err := lister.Listing(ctx, group, opts)
	if err != nil {
		return Listing{}, fmt.Errorf("list members: %w", err)
	}
	return l, nil
}

// Filter applies the authorizer, then the size limit, to a listing ListingFor
// returned.
func (s *MemberService) Filter(ctx context.Context, p Principal, group Object, opts ListOptions, objs []Object) ([]Object, error) {
	var err error
	if s.Authz != nil {
		if objs, err = s.Authz.FilterView(ctx, p, group, opts, objs); err != nil {
			return nil, fmt.Errorf("filter listing: %w", err)
		}
	}
	if opts.SizeLimit > 0 && len(objs) > opts.SizeLimit {
		objs = objs[:opts.SizeLimit]
	}
	return objs, nil
}

// Select decides a listing ListingFor returned as the Selection of the positions p
// receives, sizeLimit applied, when its decision can be one: there is no authorizer,
// or it is a ViewSelector that withholds no requested property from p. false means
// that the listing must be decided by Filter, whose objects may be altered copies.
// The selection is exact, so a renderer may share one body between the callers
// whose selections are equal (render.Lister); it may be shared with other requests
// and must not be modified.
func (s *MemberService) Select(ctx context.Context, p Principal, group Object, opts ListOptions, objs []Object) (Selection, bool, error) {
	if s.Authz == nil {
		return AllSelected(len(objs), opts.SizeLimit), true, nil
	}
	sel, ok := s.Authz.(ViewSelector)
	if !ok {
		return Selection{}, false, nil
	}
	// A selector that may withhold some of the requested properties selects only
	// when it withholds none of them for p;
	// otherwise callers selecting the same objects may be shown different
	// properties of them, and each gets the objects FilterView returns.
	chosen, err := sel.SelectView(ctx, p, group, opts, objs, opts.SizeLimit)
	if errors.Is(err, ErrPropertiesWithheld) {
		return Selection{}, false, nil
	} else if err != nil {
		return Selection{}, false, fmt.Errorf("filter listing: %w", err)
	}
	if chosen.Len() != len(objs) {
		return Selection{}, false, WrapError(EINTERNAL, "", fmt.Errorf("filter listing: a selection over %d objects for a listing of %d", chosen.Len(), len(objs)))
	}
	if opts.SizeLimit > 0 && chosen.Count() > opts.SizeLimit {
		// A selector that selected more than asked: trim a copy (its selection may
		// be shared).
		chosen = chosen.Clone()
		chosen.Limit(opts.SizeLimit)
	}
	return chosen, true, nil
}

// Listing expands group's members from the service's Directory (Expand).
func (s *MemberService) Listing(ctx context.Context, group Object, opts ListOptions) (Listing, error) {
	objs, err := Expand(ctx, Expansion{Dir: s.Dir, Transitive: s.Transitive, Concurrency: s.ExpandConcurrency}, group, opts)
	if err != nil {
		return Listing{}, err
	}
	return Listing{Objects: objs}, nil
}

// Expansion is where Expand reads a listing from: a cache passes a Directory that
// records the version of each group before its members are read.
type Expansion struct {
	Dir Directory
	// Transitive, when set, lists indirect members in one query (MemberService).
	Transitive TransitiveLister
	// Concurrency bounds parallel member reads of one level; 0 means 4.
	Concurrency int
}

// Expand reads group's members from x.Dir: with IncludeIndirect, the nested groups
// themselves and all their members, breadth first, each object once (by GUID), never
// the group itself, terminating on cycles. The result is in listing order
// (SortObjects).
func Expand(ctx context.Context, x Expansion, group Object, opts ListOptions) ([]Object, error) {
	visited := map[string]bool{group.GUID: true}
	var out []Object
	if opts.IncludeIndirect && x.Transitive != nil {
		objs, err := x.Transitive.TransitiveMembers(ctx, group, opts.Properties)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			if !visited[o.GUID] {
				visited[o.GUID] = true
				out = append(out, o)
			}
		}
		SortObjects(out)
		return out, nil
	}
	level := []Object{group}
	for len(level) > 0 {
		members, err := readLevel(ctx, x, level, opts.Properties)
		if err != nil {
			return nil, err
		}
		level = level[:0:0]
		total := 0
		for _, ms := range members {
			total += len(ms)
		}
		// A group of 100,000 members: one allocation each, not twenty. The visited set
		// holds only the group until the first level, whose one slice is kept in place
		// (it is this call's: Directory.Members) rather than copied, 14 MB for 100,000
		// members; each member is written at or before where it was read.
		if len(out) == 0 && len(members) == 1 {
			out = members[0][:0]
		} else {
			out = slices.Grow(out, total)
		}
		if len(visited) == 1 {
			visited = make(map[string]bool, total+1)
			visited[group.GUID] = true
		}
		for _, ms := range members {
			for _, m := range ms {
				if visited[m.GUID] {
					continue
				}
				visited[m.GUID] = true
				out = append(out, m)
				if opts.IncludeIndirect && m.IsGroup() {
					level = append(level, m)
				}
			}
		}
	}
	SortObjects(out)
	return out, nil
}

// readLevel reads the direct members of every group of one level concurrently; the
// results keep the level's order so that expansion is deterministic.
func readLevel(ctx context.Context, x Expansion, groups []Object, props []string) ([][]Object, error) {
	out := make([][]Object, len(groups))
	g, gctx := errgroup.WithContext(ctx)
	n := x.Concurrency
	if n <= 0 {
		n = 4
	}
	g.SetLimit(n)
	for i, grp := range groups {
		g.Go(func() error {
			ms, err := x.Dir.Members(gctx, grp, props)
			if err != nil {
				return fmt.Errorf("members of %s: %w", grp.GUID, err)
			}
			out[i] = ms
			return nil
		})
	}
	return out, g.Wait()
}

// Remove removes memberID from groupID and reports the outcome as the product does:
// a member that is not a direct member is "no changes", not an error.
func (s *MemberService) Remove(ctx context.Context, p Principal, groupID, memberID Identifier) (OperationResult, error) {
	group, member, err := s.resolveChange(ctx, p, groupID, memberID, "member")
	if err != nil {
		return OperationResult{}, err
	}
	if s.Authz != nil {
		if err := s.Authz.AllowRemove(ctx, p, group, member); err != nil {
			return OperationResult{}, s.refusal(ctx, p, group, member, "member", err)
		}
	}
	res := changeResult(group)
	err = s.Dir.RemoveMember(ctx, group, member)
	switch {
	case err == nil:
		res.ResultType = ResultSucceeded
	case errors.Is(err, ErrNotMember):
		res.ResultType, res.NoChanges = ResultSucceeded, true
	case errors.Is(err, ErrPrimaryGroup):
		res.ResultType, res.NoChanges = ResultFailed, true
		res.Exception = &OperationError{Message: "The group is the member's primary group; change the member's primary group before removing it."}
	default:
		return OperationResult{}, fmt.Errorf("remove member: %w", err)
	}
	return res, nil
}

// Add adds memberID to groupID and reports the outcome in the shape of a removal: a
// member that is a direct member already (or belongs through its primary group) is
// "no changes", not an error. The policy decides before the directory is touched.
func (s *MemberService) Add(ctx context.Context, p Principal, groupID, memberID Identifier) (OperationResult, error) {
	group, member, err := s.resolveChange(ctx, p, groupID, memberID, "newMember")
	if err != nil {
		return OperationResult{}, err
	}
	if member.GUID == group.GUID {
		// Samba accepts it (measured), and every nested listing through the group
		// would then list the group itself: no client means that, so it is refused
		// alike on every upstream.
		return OperationResult{}, InvalidParam("newMember", "A group cannot be a member of itself.")
	}
	if s.Authz != nil {
		if err := s.Authz.AllowAdd(ctx, p, group, member); err != nil {
			return OperationResult{}, s.refusal(ctx, p, group, member, "newMember", err)
		}
	}
	res := changeResult(group)
	switch err := s.Dir.AddMember(ctx, group, member); {
	case err == nil:
		res.ResultType = ResultSucceeded
	case errors.Is(err, ErrAlreadyMember):
		res.ResultType, res.NoChanges = ResultSucceeded, true
	default:
		return OperationResult{}, fmt.Errorf("add member: %w", err)
	}
	return res, nil
}

// Principal resolves a token's subject into a principal with its account's status
// and its transitive groups, found breadth first through MemberOf (primary groups
// included). The subject is read from the directory itself, never from a cached
// resolution: its status (disabled, locked out) must follow the directory within
// the principal's refresh bound, not the cache's TTL (docs/auth.md).
func (s *MemberService) Principal(ctx context.Context, subject Identifier) (Principal, error) {
	obj, _, err := s.lookup(ctx, subject, true)
	if err != nil {
		return Principal{}, fmt.Errorf("resolve subject: %w", err)
	}
	p := Principal{DN: obj.DN, GUID: obj.GUID, SID: obj.SID, DisplayName: obj.DisplayName, DomainName: obj.DomainName, Groups: []GroupRef{},
		AccountStatus: obj.AccountStatus.Clone()}
	visited := map[string]bool{obj.GUID: true}
	queue := []Object{obj}
	for len(queue) > 0 {
		o := queue[0]
		queue = queue[1:]
		groups, err := s.Dir.MemberOf(ctx, o)
		if err != nil {
			return Principal{}, fmt.Errorf("groups of subject: %w", err)
		}
		for _, g := range groups {
			if visited[g.GUID] {
				continue
			}
			visited[g.GUID] = true
			ref := GroupRef{DN: g.DN, GUID: g.GUID, SID: g.SID}
			if !strings.HasPrefix(strings.ToUpper(g.SID), "S-1-5-21-") && g.DomainName != "" && obj.DomainName != "" &&
				!strings.EqualFold(g.DomainName, obj.DomainName) {
				// A builtin group (S-1-5-32-544, Administrators) carries the same SID in
				// every domain: another domain's holds the subject through a foreign
				// security principal, and a trustee named by that SID means the
				// subject's own domain's. Named by DN or GUID it is still that group.
				ref.SID = ""
			}
			p.Groups = append(p.Groups, ref)
			queue = append(queue, g)
		}
	}
	slices.SortFunc(p.Groups, func(a, b GroupRef) int { return strings.Compare(strings.ToLower(a.DN), strings.ToLower(b.DN)) })
	return p, nil
}

// resolveGroup resolves id, which must name a group.
func (s *MemberService) resolveGroup(ctx context.Context, id Identifier) (Object, error) {
	group, _, err := s.resolve(ctx, id, "group", false)
	if err != nil {
		return Object{}, err
	}
	return group, checkGroup(group)
}

// checkGroup refuses an object that is not a group where a group is expected.
func checkGroup(group Object) error {
	if !group.IsGroup() {
		return InvalidParam("group", "The group parameter names a %s, not a group.", group.ObjectType)
	}
	return nil
}

// viewGroup resolves id, which must name a group p may view. An object p may not
// view is answered as an unknown group before anything else is said about it:
// that it is not a group (400) only to a caller that may view it.
func (s *MemberService) viewGroup(ctx context.Context, p Principal, id Identifier) (Object, CacheStatus, error) {
	return s.viewGroupAs(ctx, p, id, false)
}

// viewGroupAs is viewGroup resolving from the directory itself when fresh, and
// saying how the resolution was served.
func (s *MemberService) viewGroupAs(ctx context.Context, p Principal, id Identifier, fresh bool) (Object, CacheStatus, error) {
	group, st, err := s.resolve(ctx, id, "group", fresh)
	if err != nil {
		return Object{}, "", err
	}
	if err := s.allowView(ctx, p, group, group, "group"); err != nil {
		return Object{}, "", err
	}
	return group, st, checkGroup(group)
}

// resolveChange resolves both sides of a membership change from the directory itself
// (a change acts on the current DN and primary group, not on a resolution cached
// before a rename or move), the member named in errors as memberParam (the query's
// "member", the body's "newMember"). A group p may not view is answered as unknown
// before the member is looked up, as it is for an unknown group; the member's turn
// comes with the change's decision (refusal).
func (s *MemberService) resolveChange(ctx context.Context, p Principal, groupID, memberID Identifier, memberParam string) (group, member Object, err error) {
	if group, _, err = s.viewGroupAs(ctx, p, groupID, true); err != nil {
		return Object{}, Object{}, err
	}
	if member, _, err = s.resolve(ctx, memberID, memberParam, true); err != nil {
		return Object{}, Object{}, err
	}
	return group, member, nil
}

// refusal is the answer to a change the authorizer refused with err: its 403 to a
// caller that may view the member, and to any other the answer about an unknown
// member. A change the policy allows goes ahead whether or not p may view the
// member (a role may grant removing contacts it does not list): p learns nothing
// its policy does not grant, and allowed changes cost no second decision.
func (s *MemberService) refusal(ctx context.Context, p Principal, group, member Object, param string, err error) error {
	if ErrorCode(err) != EFORBIDDEN {
		return err
	}
	if verr := s.allowView(ctx, p, group, member, param); verr != nil {
		return verr
	}
	return err
}

// allowView answers an object p may not view exactly as resolve answers an
// unknown one: same code, parameter and message (the refusal is kept for the log).
func (s *MemberService) allowView(ctx context.Context, p Principal, group, obj Object, param string) error {
	if s.Authz == nil {
		return nil
	}
	err := s.Authz.AllowView(ctx, p, group, obj)
	switch ErrorCode(err) {
	case "":
		return nil
	case EFORBIDDEN:
		return notFound(param, err)
	}
	return fmt.Errorf("view %s: %w", param, err)
}

// notFound is the answer about an unknown object named by param.
func notFound(param string, err error) *Error {
	return &Error{Code: ENOTFOUND, Param: param, Message: fmt.Sprintf("The %s was not found.", param), Err: err}
}

// changeResult is the result of a change to group before its outcome is known: the
// collections empty, never null (docs/compatibility.md, "Operation results").
func changeResult(group Object) OperationResult {
	return OperationResult{InnerMessages: []InnerMessage{}, ActualObjectDN: group.DN, ExtraInfo: map[string]string{}}
}

// resolve looks an identifier up (from the directory itself when fresh) and rewrites
// "not found" so the client learns which parameter named the unknown object.
func (s *MemberService) resolve(ctx context.Context, id Identifier, param string, fresh bool) (Object, CacheStatus, error) {
	obj, st, err := s.lookup(ctx, id, fresh)
	switch ErrorCode(err) {
	case "":
		return obj, st, nil
	case ENOTFOUND:
		return Object{}, "", notFound(param, err)
	case EINVALID:
		return Object{}, "", &Error{Code: EINVALID, Param: param, Message: fmt.Sprintf("The %s parameter is not an identifier the directory accepts.", param), Err: err}
	}
	return Object{}, "", fmt.Errorf("resolve %s: %w", param, err)
}

// lookup resolves id through Dir, from the directory itself when fresh and Dir caches
// resolutions, and says how a cache served it.
func (s *MemberService) lookup(ctx context.Context, id Identifier, fresh bool) (Object, CacheStatus, error) {
	c, ok := s.Dir.(CachingDirectory)
	switch {
	case !ok:
		o, err := s.Dir.Lookup(ctx, id, nil)
		return o, "", err
	case fresh:
		o, err := c.LookupFresh(ctx, id, nil)
		return o, "", err
	}
	return c.LookupServed(ctx, id)
}
