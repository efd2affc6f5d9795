package dirgate

import "context"

// Unfiltered resolves groupID and returns the group and its unfiltered listing:
// every member, before the authorizer and the size limit. It is for those who
// must see what a policy decides on each member (the decisions API), never for
// answering a caller.
func (s *MemberService) Unfiltered(ctx context.Context, groupID Identifier, opts ListOptions) (Object, []Object, error) {
	opts.SizeLimit = 0
	return s.listing(ctx, groupID, opts)
}

// Group resolves groupID to a group (a 400 for any other object), without listing
// it: the decisions API asks the policy before it lists anything.
func (s *MemberService) Group(ctx context.Context, groupID Identifier) (Object, error) {
	return s.resolveGroup(ctx, groupID)
}

// UnfilteredOf is Unfiltered for a group already resolved by Group.
func (s *MemberService) UnfilteredOf(ctx context.Context, group Object, opts ListOptions) ([]Object, error) {
	opts.SizeLimit = 0
	l, err := s.listOf(ctx, group, opts)
	return l.Objects, err
}

// DecisionsQuery is a validated query of the decisions API (docs/policy.md, "The
// decisions API"): every decision on a group's unfiltered listing for one
// principal.
type DecisionsQuery struct {
	// Subject is the explored principal, by DN, GUID or SID.
	Subject Identifier
	Group   Identifier
	// Options are the listing's includeIndirect and properties.
	Options ListOptions
	// Draft is a POST's Rego module ("" for a GET).
	Draft string
}
