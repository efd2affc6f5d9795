// Package rego holds dirgate's bundled authorization policy (package dirgate.authz),
// its demo roles (data.json) and their Rego unit tests. The gateway loads it when
// no policy directory is configured; docs/policy.md describes the contract.
package rego

import "embed"

// FS holds the bundled policy directory: the policy, its data and its tests (the
// gateway skips *_test.rego files; `dirgate policy test` runs them).
//
//go:embed *.rego data.json
var FS embed.FS
