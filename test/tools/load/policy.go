package load

import (
	"fmt"
	"os"

	bundled "github.com/dirgate/dirgate/rego"
)

// WritePolicy writes the policy of a load run to dir: the bundled policy and its
// roles, plus one role that lets the setup's CallerHalf view the objects below
// HalfSubtrees, and one that lets the help desk and CallerHalf view the load groups
// (the groups they list, and the load groups nested in them). The other callers'
// rights are the bundled policy's.
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
	// A caller lists only groups it may view (docs/policy.md, "Objects named by a
	// request"): the help desk and the half caller view the load groups themselves
	// (and so the load groups nested in them), or their listings would be 404s.
	groups := []string{}
	for _, g := range []string{s.Small, s.Medium, s.Thousand, s.Large} {
		if g != "" {
			groups = append(groups, g)
		}
	}
	err := bundled.WriteWithRoles(dir, map[string]any{
		"name":        "load-half",
		"description": "The load run's half caller views the users of two of the four staff OUs.",
		"trustees":    []string{s.Callers[CallerHalf].Subject}, "permissions": []string{"view"}, "scopes": scopes,
	}, map[string]any{
		"name":        "load-groups",
		"description": "The help desk and the half caller view the load groups they list.",
		"trustees":    []string{s.Callers[CallerHelpdesk].Subject, s.Callers[CallerHalf].Subject},
		"permissions": []string{"view"}, "scopes": []any{map[string]any{"membersOf": groups}}, "objectTypes": []string{"group"},
	})
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	return nil
}
