package policy_test

import (
	"context"
	"encoding/json"
	"errors"

	"path/filepath"
	"strings"
	"testing"

	"github.com/dirgate/dirgate/policy"
	"github.com/dirgate/dirgate/policy/internal/policytest"
)

// writeRoles writes the bundled policy with roles as data.dirgate.roles to dir.
func writeRoles(t *testing.T, dir string, roles any) {
	t.Helper()
	for name, src := range policytest.BundledModules(t) {
		policytest.WriteFile(t, filepath.Join(dir, name), src)
	}
	b, err := json.Marshal(map[string]any{"dirgate": map[string]any{"roles": roles}})
	if err != nil {
		t.Fatal(err)
	}
	policytest.WriteFile(t, filepath.Join(dir, "data.json"), string(b))
}

func viewRole(extra map[string]any) map[string]any {
	role := map[string]any{"name": "r", "trustees": []any{"CN=Help Desk,OU=Groups,DC=corp,DC=example,DC=com"},
		"permissions": []any{"view"}, "scopes": []any{map[string]any{"all": true}}}
	for k, v := range extra {
		role[k] = v
	}
	return role
}

// TestBundledRolesWithMistakesDoNotLoad: the bundled policy's data_errors names
// each mistake in its roles, and a policy with any does not load, with every
// mistake in the error.
func TestBundledRolesWithMistakesDoNotLoad(t *testing.T) {
	tests := []struct {
		name  string
		roles any
		want  []string
	}{
		{name: "misspelt key", roles: []any{viewRole(map[string]any{"subjectDomain": []any{"corp.example.com"}})},
			want: []string{`role "r" (roles[0]): unknown key "subjectDomain"`}},
		{name: "unknown scope kind", roles: []any{viewRole(map[string]any{"scopes": []any{map[string]any{"domains": "corp.example.com"}}})},
			want: []string{`role "r" (roles[0]): scopes[0] has the unknown kind "domains"`}},
		{name: "domain as a DN", roles: []any{viewRole(map[string]any{"scopes": []any{map[string]any{"domain": "DC=corp,DC=example,DC=com"}}})},
			want: []string{`role "r" (roles[0]): scopes[0].domain must be a domain's DNS name such as "corp.example.com", not "DC=corp,DC=example,DC=com"`}},
		{name: "empty domain", roles: []any{viewRole(map[string]any{"scopes": []any{map[string]any{"domain": ""}}})},
			want: []string{`scopes[0].domain must be a domain's DNS name such as "corp.example.com", not ""`}},
		{name: "subjectDomains a string", roles: []any{viewRole(map[string]any{"subjectDomains": "corp.example.com"})},
			want: []string{`role "r" (roles[0]): subjectDomains must be an array of domain names`}},
		{name: "subject domain with a trailing dot", roles: []any{viewRole(nil), viewRole(map[string]any{"name": "s", "subjectDomains": []any{"corp.example.com."}})},
			want: []string{`role "s" (roles[1]): subjectDomains[0] must be a domain's DNS name such as "corp.example.com", not "corp.example.com."`}},
		{name: "several", roles: []any{viewRole(map[string]any{"subjectDomain": []any{}, "scopes": []any{map[string]any{"domain": 3}}}), "x"},
			want: []string{`unknown key "subjectDomain"`, `scopes[0].domain must be a domain's DNS name such as "corp.example.com", not 3`, `roles[1] must be an object`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeRoles(t, dir, tt.roles)
			_, err := policy.Open(context.Background(), policy.Config{Dir: dir, Logger: policytest.QuietLogger()})
			if !errors.Is(err, policy.ErrPolicyData) {
				t.Fatalf("Open: %v, want the policy data refused", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Open: %v\nwant it to contain %q", err, w)
				}
			}
		})
	}
}

// TestBundledDomainRolesLoad: roles naming domains, in scopes and subjectDomains,
// in any letter case, load.
func TestBundledDomainRolesLoad(t *testing.T) {
	dir := t.TempDir()
	writeRoles(t, dir, []any{
		viewRole(map[string]any{"scopes": []any{map[string]any{"domain": "Fabrikam.Example.NET"}}, "subjectDomains": []any{"fabrikam.example.net", "CORP.example.com"}}),
		viewRole(map[string]any{"name": "empty", "subjectDomains": []any{}}),
	})
	if _, err := policy.Open(context.Background(), policy.Config{Dir: dir, Logger: policytest.QuietLogger()}); err != nil {
		t.Fatal(err)
	}
}

// TestReloadKeepsLastGoodRoles: roles with a mistake are a policy that does not
// load: the reload keeps the last good one, and Status and Ready say why.
func TestReloadKeepsLastGoodRoles(t *testing.T) {
	dir := t.TempDir()
	writeRoles(t, dir, []any{viewRole(map[string]any{"subjectDomains": []any{"fabrikam.example.net"}})})
	a, err := policy.Open(context.Background(), policy.Config{Dir: dir, Logger: policytest.QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	rev := a.Revision()
	writeRoles(t, dir, []any{viewRole(map[string]any{"subjectDomain": []any{"fabrikam.example.net"}})})
	if err := a.Reload(context.Background()); !errors.Is(err, policy.ErrPolicyData) {
		t.Fatalf("Reload: %v, want the policy data refused", err)
	}
	if st := a.Status(); st.Revision != rev || !strings.Contains(st.LastError, `unknown key "subjectDomain"`) {
		t.Errorf("status %+v: want revision %s and the mistake", st, rev)
	}
	if err := a.Ready(); err == nil {
		t.Error("Ready() = nil with roles that do not load")
	}
}

// TestDataErrorsOfAnyPolicy: any policy may name mistakes in its data through
// data_errors; one that does not define it loads whatever its data; a value that
// is not a collection of messages does not load; many messages are counted past
// the first ten.
func TestDataErrorsOfAnyPolicy(t *testing.T) {
	open := func(src string, data string) error {
		dir := t.TempDir()
		policytest.WriteFile(t, filepath.Join(dir, "p.rego"), src)
		policytest.WriteFile(t, filepath.Join(dir, "data.json"), data)
		_, err := policy.Open(context.Background(), policy.Config{Dir: dir, Logger: policytest.QuietLogger()})
		return err
	}
	// Roles the bundled policy would refuse are a custom policy's own business.
	if err := open(policytest.AllowUsers, `{"dirgate": {"roles": [{"subjectDomain": 1}]}}`); err != nil {
		t.Errorf("a policy without data_errors: %v", err)
	}
	if err := open(policytest.AllowUsers+"data_errors contains \"limit too high\" if data.limit > 10\n", `{"limit": 5}`); err != nil {
		t.Errorf("no data errors: %v", err)
	}
	err := open(policytest.AllowUsers+"data_errors contains \"limit too high\" if data.limit > 10\n", `{"limit": 50}`)
	if !errors.Is(err, policy.ErrPolicyData) || !strings.Contains(err.Error(), "limit too high") {
		t.Errorf("a data error: %v", err)
	}
	err = open(policytest.AllowUsers+"data_errors := \"limit too high\"\n", `{}`)
	if !errors.Is(err, policy.ErrPolicyData) || !strings.Contains(err.Error(), "not a set of messages") {
		t.Errorf("data_errors a string: %v", err)
	}
	err = open(policytest.AllowUsers+"data_errors contains sprintf(\"bad %02d\", [i]) if some i in numbers.range(1, 12)\n", `{}`)
	if !errors.Is(err, policy.ErrPolicyData) || !strings.Contains(err.Error(), "bad 10; and 2 more") || strings.Contains(err.Error(), "bad 11") {
		t.Errorf("twelve data errors: %v", err)
	}
}
