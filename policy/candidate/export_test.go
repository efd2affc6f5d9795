package candidate

// SetTestHook makes f run before each candidate evaluation until the returned
// function restores the previous hook.
func SetTestHook(f func(action string)) (restore func()) {
	prev := testHook
	testHook = f
	return func() { testHook = prev }
}
