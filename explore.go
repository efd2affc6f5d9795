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
