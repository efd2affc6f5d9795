package policy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/policy"
	"github.com/dirgate/dirgate/policy/internal/policytest"
)

func TestAllowSignIn(t *testing.T) {
	admins := dirgate.Principal{DN: "CN=Ann,DC=x", GUID: "11111111-1111-1111-1111-111111111111", DomainName: "x",
		Groups: []dirgate.GroupRef{{DN: "CN=Gateway Users,DC=x", GUID: "22222222-2222-2222-2222-222222222222"}}}
	other := dirgate.Principal{DN: "CN=Bob,DC=y", GUID: "33333333-3333-3333-3333-333333333333", DomainName: "y"}
	base := "package dirgate.authz\n\nallow if input.action == \"view\"\n"
	for _, c := range []struct {
		name, rule       string
		wantAnn, wantBob bool
	}{
		{"no rule: anyone", "", true, true},
		{"a group", "signin if {\n\tsome g in input.subject.groups\n\tg.dn == \"CN=Gateway Users,DC=x\"\n}\n", true, false},
		{"a domain", "signin if input.subject.domainName == \"x\"\n", true, false},
		{"not true denies", "signin := \"yes\"\n", false, false},
		{"conflict denies", "signin := true if input.subject.dn == \"CN=Ann,DC=x\"\nsignin := false if true\n", false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			policytest.WriteFile(t, filepath.Join(dir, "authz.rego"), base+c.rule)
			var log bytes.Buffer
			a, err := policy.Open(context.Background(), policy.Config{Dir: dir, Logger: policytest.QuietLogger(), DecisionLog: policytest.LineLog(&log)})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			for _, p := range []struct {
				who  dirgate.Principal
				want bool
			}{{admins, c.wantAnn}, {other, c.wantBob}} {
				err := a.AllowSignIn(context.Background(), p.who)
				if (err == nil) != p.want || (err != nil && dirgate.ErrorCode(err) != dirgate.EFORBIDDEN) {
					t.Errorf("%s: %v, want allowed %v", p.who.DN, err, p.want)
				}
			}
			lines := strings.Split(strings.TrimSpace(log.String()), "\n")
			if len(lines) != 2 {
				t.Fatalf("decision log: %q", log.String())
			}
			var ev map[string]any
			json.Unmarshal([]byte(lines[0]), &ev)
			if ev["path"] != "dirgate/authz/signin" || ev["input"].(map[string]any)["action"] != "signin" {
				t.Errorf("decision line %s", lines[0])
			}
		})
	}
}
