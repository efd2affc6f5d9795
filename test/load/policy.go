package load

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	bundled "github.com/dirgate/dirgate/rego"
)

// WritePolicy writes the policy of a load run to dir: the bundled policy and its
// roles, plus one role that lets the setup's CallerHalf view the objects below
// HalfSubtrees. The other callers' rights are the bundled policy's.
func (s Setup) WritePolicy(dir string) error {
	if len(s.Callers) <= CallerHalf {
		return fmt.Errorf("load: the setup has no caller %d", CallerHalf)
	}
	err := fs.WalkDir(bundled.FS, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(p) != ".rego" {
			return err
		}
		b, err := fs.ReadFile(bundled.FS, p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, p), b, 0o600)
	})
	if err != nil {
		return fmt.Errorf("load: policy: %w", err)
	}
	raw, err := fs.ReadFile(bundled.FS, "data.json")
	if err != nil {
		return fmt.Errorf("load: policy: %w", err)
	}
	var data struct {
		Dirgate map[string][]any `json:"dirgate"`
	}
	if err := json.Unmarshal(raw, &data); err != nil {
		return fmt.Errorf("load: policy data: %w", err)
	}
	var scopes []any
	for _, st := range HalfSubtrees {
		scopes = append(scopes, map[string]string{"subtree": st})
	}
	data.Dirgate["roles"] = append(data.Dirgate["roles"], map[string]any{
		"name":        "load-half",
		"description": "The load run's half caller views the users of two of the four staff OUs.",
		"trustees":    []string{s.Callers[CallerHalf].Subject}, "permissions": []string{"view"}, "scopes": scopes,
	})
	out, err := json.MarshalIndent(data, "", "  ")
	if err != nil {
		return fmt.Errorf("load: policy data: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data.json"), out, 0o600); err != nil {
		return fmt.Errorf("load: policy: %w", err)
	}
	return nil
}
