package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dirgate/dirgate/test/harness/opabundle"
)

// writeBundle packs files into a bundle file as opa build lays it out.
func writeBundle(t *testing.T, files map[string]string) string { return opabundle.File(t, files) }

// TestPolicyCommandsTakeBundles: `dirgate policy test` and `eval` read a bundle
// file as they read a directory: its tests run (a failing one fails the command),
// and its policy decides.
func TestPolicyCommandsTakeBundles(t *testing.T) {
	ctx := context.Background()
	policy := "package dirgate.authz\n\nallow if input.object.objectType == \"contact\"\n"
	pass := writeBundle(t, map[string]string{
		"authz/policy.rego":      policy,
		"authz/policy_test.rego": "package dirgate.authz_test\n\nimport data.dirgate.authz\n\ntest_contact if authz.allow with input as {\"object\": {\"objectType\": \"contact\"}}\n",
		".manifest":              `{"revision": "abc"}`,
	})
	var out bytes.Buffer
	if err := runPolicy(ctx, []string{"test", "-v", pass}, nil, &out, &out); err != nil || !strings.Contains(out.String(), "test_contact") {
		t.Fatalf("policy test on a bundle: %v\n%s", err, out.String())
	}
	fail := writeBundle(t, map[string]string{
		"authz/policy.rego":      policy,
		"authz/policy_test.rego": "package dirgate.authz_test\n\nimport data.dirgate.authz\n\ntest_user if authz.allow with input as {\"object\": {\"objectType\": \"user\"}}\n",
	})
	if err := runPolicy(ctx, []string{"test", fail}, nil, &out, &out); err == nil || !strings.Contains(err.Error(), "1 failed") {
		t.Errorf("policy test on a bundle with a failing test: %v", err)
	}
	input := writeTemp(t, t.TempDir(), "input.json", strings.Replace(helpdeskView, "%s", "contact", 1))
	out.Reset()
	if err := runPolicy(ctx, []string{"eval", "--input", input, pass}, nil, &out, &out); err != nil {
		t.Fatalf("policy eval on a bundle: %v\n%s", err, out.String())
	}
	var d struct{ Allow bool }
	if err := json.Unmarshal(out.Bytes(), &d); err != nil || !d.Allow {
		t.Errorf("policy eval on a bundle: %v %s, want the bundle's policy to allow", err, out.String())
	}
}

// bundleOfDir packs a policy directory into a bundle file.
func bundleOfDir(t *testing.T, dir string) string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return writeBundle(t, files)
}

// TestPolicyDiffTakesBundles: `dirgate policy diff` compares a bundle file as it
// compares the directory it was built from.
func TestPolicyDiffTakesBundles(t *testing.T) {
	b := bundleOfDir(t, candidatePolicy(t))
	mixed := "CN=Mixed Members,OU=Groups,DC=corp,DC=example,DC=com"
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"policy", "diff", "--subject", hugo, "--group", mixed, "", b}, noEnv, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	if !strings.Contains(stdout.String(), "2 decisions differ") || !strings.Contains(stdout.String(), "CN=Daisy Vargas") {
		t.Errorf("policy diff against a bundle printed\n%s", stdout.String())
	}
}
