package policy

import "github.com/dirgate/dirgate"

// MayWithhold reports whether the policy in force may leave some of opts's
// properties out (the check SelectView makes before it looks for a remembered
// property outcome).
func (a *Authorizer) MayWithhold(_ dirgate.Principal, opts dirgate.ListOptions) bool {
	return a.mayWithhold(a.current.Load(), opts.Properties)
}
