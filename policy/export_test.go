package policy

import "github.com/dirgate/dirgate"

// SetCandidateTestHook makes f run before each candidate evaluation until the
// returned function restores the previous hook.
func SetCandidateTestHook(f func(action string)) (restore func()) {
	prev := candidateTestHook
	candidateTestHook = f
	return func() { candidateTestHook = prev }
}

// MayWithhold reports whether the policy in force may leave some of opts's
// properties out (the check SelectView makes before it looks for a remembered
// property outcome).
func (a *Authorizer) MayWithhold(_ dirgate.Principal, opts dirgate.ListOptions) bool {
	return a.mayWithhold(a.current.Load(), opts.Properties)
}
