package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bundled "github.com/dirgate/dirgate/rego"
)

// helpdeskView is an input document as the gateway builds it: the demo help desk
// viewing a user of OU=Staff, which the bundled policy allows.
const helpdeskView = `{
  "action": "view",
  "subject": {
    "dn": "CN=Hugo Helpdesk,OU=IT,OU=Staff,DC=corp,DC=example,DC=com",
    "guid": "73e0a89b-84f0-4f42-8cbd-40e4e51f1673",
    "sid": "S-1-5-21-2113472910-3286130475-1853229740-1125",
    "displayName": "Hugo Helpdesk",
    "domainName": "corp.example.com",
    "groups": [{"dn": "CN=Help Desk,OU=Groups,DC=corp,DC=example,DC=com", "guid": "54eb12b6-fd0c-491e-88d0-8fa7ba12b04b", "sid": "S-1-5-21-2113472910-3286130475-1853229740-1153"}]
  },
  "object": {"guid": "00000000-0000-0000-0000-000000000001", "dn": "CN=Hazel Zhou,OU=HR,OU=Staff,DC=corp,DC=example,DC=com",
    "displayName": "Hazel Zhou", "objectType": "%s", "objectTypeCode": 0, "domainName": "corp.example.com", "directoryType": 1, "properties": {}},
  "group": {"guid": "e2fafa62-2fd5-441f-be0b-2d2f35feb898", "dn": "CN=Newsletter,OU=Groups,DC=corp,DC=example,DC=com",
    "displayName": "Newsletter", "objectType": "group", "objectTypeCode": 0, "domainName": "corp.example.com", "directoryType": 1, "properties": {}},
  "request": {"includeIndirect": false, "properties": [], "sizeLimit": 0}
}`

// bundledPolicy is the bundled policy's module.
func bundledPolicy(t *testing.T) string {
	t.Helper()
	b, err := bundled.FS.ReadFile("authz.rego")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeTemp(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPolicyEval(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name      string
		input     string
		policyDir string
		data      string // data.json beside policyDir
		wantAllow bool
		wantErr   string
	}{
		// The bundled policy lets the help desk see a user of OU=Staff ...
		{name: "allowed", input: strings.Replace(helpdeskView, "%s", "user", 1), wantAllow: true},
		// ... and not a contact.
		{name: "denied", input: strings.Replace(helpdeskView, "%s", "contact", 1), wantAllow: false},
		// A policy directory given as DIR is used instead of the bundled one.
		{name: "directory", input: strings.Replace(helpdeskView, "%s", "contact", 1), wantAllow: true,
			policyDir: "package dirgate.authz\nallow if input.object.objectType == \"contact\"\n"},
		// A misspelt member would silently be absent: refused.
		{name: "unknown member", input: `{"action": "view", "subjekt": {}}`, wantErr: "unknown field"},
		// Only the gateway's actions.
		{name: "bad action", input: `{"action": "delete"}`, wantErr: "action must be"},
		// Not JSON.
		{name: "not json", input: `{`, wantErr: "input"},
		// The subject's domain is a member of the input.
		{name: "subject domain", input: strings.Replace(helpdeskView, "%s", "contact", 1), wantAllow: true,
			policyDir: "package dirgate.authz\nallow if input.subject.domainName == \"corp.example.com\"\n"},
		// The bundled policy with roles it names a mistake in does not load.
		{name: "roles with a mistake", input: strings.Replace(helpdeskView, "%s", "user", 1), policyDir: bundledPolicy(t),
			data:    `{"dirgate": {"roles": [{"name": "r", "trustees": [], "permissions": ["view"], "scopes": [{"domain": "DC=corp,DC=example,DC=com"}]}]}}`,
			wantErr: `role "r" (roles[0]): scopes[0].domain must be a domain's DNS name`},
		// A broken policy is an error, not a denial.
		{name: "broken policy", input: strings.Replace(helpdeskView, "%s", "user", 1), policyDir: "package dirgate.authz\nallow if {\n", wantErr: "rego_parse_error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"eval", "--input", writeTemp(t, dir, strings.ReplaceAll(tt.name, " ", "_")+".json", tt.input)}
			if tt.policyDir != "" {
				pd := t.TempDir()
				writeTemp(t, pd, "authz.rego", tt.policyDir)
				if tt.data != "" {
					writeTemp(t, pd, "data.json", tt.data)
				}
				args = append(args, pd)
			}
			var stdout, stderr bytes.Buffer
			err := runPolicy(context.Background(), args, noEnv, &stdout, &stderr)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("%v\n%s", err, stderr.String())
			}
			var d struct {
				Allow    bool   `json:"allow"`
				Defined  bool   `json:"defined"`
				Revision string `json:"revision"`
			}
			if err := json.Unmarshal(stdout.Bytes(), &d); err != nil {
				t.Fatalf("output %q: %v", stdout.String(), err)
			}
			if d.Allow != tt.wantAllow || d.Defined != tt.wantAllow || d.Revision == "" {
				t.Errorf("decision %+v, want allow %v", d, tt.wantAllow)
			}
		})
	}
}

func TestPolicyTest(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string // nil: the bundled policy
		args    []string
		wantErr string
		want    string // in stdout
	}{
		// The bundled policy's tests pass.
		{name: "bundled", args: []string{"-v"}, want: "PASS"},
		// --run selects tests; none matching is a failure (nothing was checked).
		{name: "no match", args: []string{"--run", "no_such_test"}, wantErr: "no tests ran"},
		// A failing test fails the command and is reported.
		{name: "failing", files: map[string]string{
			"p.rego":      "package dirgate.authz\nallow if input.x\n",
			"p_test.rego": "package dirgate.authz_test\nimport data.dirgate.authz\ntest_x if authz.allow with input as {}\n",
		}, wantErr: "1 failed", want: "test_x"},
		// Data the policy names a mistake in fails the run, the tests passing.
		{name: "roles with a mistake", files: map[string]string{
			"authz.rego":  bundledPolicy(t),
			"data.json":   `{"dirgate": {"roles": [{"name": "r", "subjectDomain": ["corp.example.com"]}]}}`,
			"p_test.rego": "package dirgate.authz_test\ntest_x if true\n",
		}, wantErr: `policy data is invalid: role "r" (roles[0]): unknown key "subjectDomain"`, want: "PASS"},
		// Too many arguments.
		{name: "two dirs", args: []string{"a", "b"}, wantErr: "at most one directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"test"}, tt.args...)
			if tt.files != nil {
				dir := t.TempDir()
				for name, content := range tt.files {
					writeTemp(t, dir, name, content)
				}
				args = append(args, dir)
			}
			var stdout, stderr bytes.Buffer
			err := runPolicy(context.Background(), args, noEnv, &stdout, &stderr)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
			if !strings.Contains(stdout.String(), tt.want) {
				t.Errorf("output does not contain %q:\n%s", tt.want, stdout.String())
			}
		})
	}
}

func TestPolicyUsage(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr bool
	}{
		// No subcommand: usage and an error.
		{name: "none", args: nil, wantErr: true},
		// An unknown subcommand.
		{name: "unknown", args: []string{"build"}, wantErr: true},
		// help is not an error.
		{name: "help", args: []string{"help"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := runPolicy(context.Background(), tt.args, noEnv, &stdout, &stderr)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if !strings.Contains(stdout.String()+stderr.String(), "dirgate policy test") {
				t.Errorf("no usage printed")
			}
		})
	}
}
