// Package ci holds the rule every integration test follows when something it needs
// (the harness domain controller, redis-server, chromium, a setting of the binary
// under test, the project fixture) is missing: it skips on a developer's machine and
// fails under CI=true, where a skip would let the run pass without running the test.
//
// Tests only: it imports testing.
package ci

import (
	"os"
	"strconv"
	"testing"
)

// Strict reports whether getenv("CI") asks for strict runs: "true" or "1" (and the
// other spellings strconv.ParseBool takes), as CI systems set it. Unset, empty,
// "false" or unparsable means a developer's machine.
func Strict(getenv func(string) string) bool {
	b, err := strconv.ParseBool(getenv("CI"))
	return err == nil && b
}

// SkipOrFail skips t with reason on a developer's machine, and fails it with reason
// under CI=true. reason says what is missing and how to get it.
func SkipOrFail(t testing.TB, reason string) {
	t.Helper()
	SkipOrFailFrom(t, os.Getenv, reason)
}

// SkipOrFailFrom is SkipOrFail with CI read through getenv, for helpers whose own
// tests pass the environment in.
func SkipOrFailFrom(t testing.TB, getenv func(string) string, reason string) {
	t.Helper()
	if Strict(getenv) {
		t.Fatalf("%s; CI must not skip integration tests (CI=%s)", reason, getenv("CI"))
		return
	}
	t.Skipf("%s; skipping (CI=true would fail)", reason)
}
