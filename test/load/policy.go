package load

import (
	"fmt"
	"os"

	bundled "github.com/dirgate/dirgate/rego"
)

// WritePolicy writes the policy of a load run to dir: the bundled policy and its
// roles, plus one role that lets the setup's CallerHalf view the objects below
// HalfSubtrees. The other callers' rights are the bundled policy's.
func (s Setup) WritePolicy(dir string) error {
	if len(s.Callers) <= CallerHalf {
		return fmt.Errorf("load: the setup has no caller %d", CallerHalf)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("load: %w", err)
	}
	var scopes []any
	for _, st := range HalfSubtrees {
		scopes = append(scopes, map[string]string{"subtree": st})
	}
	err := bundled.WriteWithRoles(dir, map[string]any{
		"name":        "load-half",
		"description": "The load run's half caller views the users of two of the four staff OUs.",
		"trustees":    []string{s.Callers[CallerHalf].Subject}, "permissions": []string{"view"}, "scopes": scopes,
	})
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	return nil
}
