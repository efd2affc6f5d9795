// Package rego holds dirgate's bundled authorization policy (package dirgate.authz),
// its demo roles (data.json) and their Rego unit tests. The gateway loads it when
// no policy directory is configured; docs/policy.md describes the contract.
package rego

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// FS holds the bundled policy directory: the policy, its data and its tests (the
// gateway skips *_test.rego files; `dirgate policy test` runs them).
//
//go:embed *.rego data.json
var FS embed.FS

// WriteWithRoles writes the bundled policy and its data to dir with extraRoles
// appended to data.dirgate.roles: the bundled rules, plus rights that a test or a
// load run needs for a caller of its own.
func WriteWithRoles(dir string, extraRoles ...any) error {
	err := fs.WalkDir(FS, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(p) != ".rego" {
			return err
		}
		b, err := fs.ReadFile(FS, p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, p), b, 0o600)
	})
	if err != nil {
		return fmt.Errorf("rego: write policy: %w", err)
	}
	raw, err := fs.ReadFile(FS, "data.json")
	if err != nil {
		return fmt.Errorf("rego: write policy: %w", err)
	}
	var data struct {
		Dirgate map[string][]any `json:"dirgate"`
	}
	if err := json.Unmarshal(raw, &data); err != nil {
		return fmt.Errorf("rego: policy data: %w", err)
	}
	data.Dirgate["roles"] = append(data.Dirgate["roles"], extraRoles...)
	out, err := json.MarshalIndent(data, "", "  ")
	if err != nil {
		return fmt.Errorf("rego: policy data: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data.json"), out, 0o600); err != nil {
		return fmt.Errorf("rego: write policy: %w", err)
	}
	return nil
}
