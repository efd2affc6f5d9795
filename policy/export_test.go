package policy

// SetCandidateTestHook makes f run before each candidate evaluation until the
// returned function restores the previous hook.
func SetCandidateTestHook(f func(action string)) (restore func()) {
	prev := candidateTestHook
	candidateTestHook = f
	return func() { candidateTestHook = prev }
}
