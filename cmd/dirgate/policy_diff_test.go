package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestPolicyDiff: `dirgate policy diff` against the configured (here the demo)
// directory prints each decision the new policy changes, and only those.
func TestPolicyDiff(t *testing.T) {
	newDir := candidatePolicy(t)
	mixed := "CN=Mixed Members,OU=Groups,DC=corp,DC=example,DC=com"
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"policy", "diff", "--subject", hugo, "--group", mixed, "", newDir},
		func(string) string { return "" }, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(stdout.String()), "\n")[1:] {
		f := strings.Fields(l)
		got = append(got, f[0]+" "+f[1]+" "+strings.Join(f[3:], " "))
	}
	want := []string{
		"remove newly_allowed CN=Daisy Vargas,OU=HR,OU=Staff,DC=corp,DC=example,DC=com",
		"view newly_denied CN=WS-0001,OU=Workstations,DC=corp,DC=example,DC=com",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") || !strings.Contains(stdout.String(), "2 decisions differ") {
		t.Errorf("policy diff printed\n%s\nwant the lines\n%s", stdout.String(), strings.Join(want, "\n"))
	}
	// Against itself: nothing differs, and --fail-on-difference passes.
	stdout.Reset()
	err = run(context.Background(), []string{"policy", "diff", "--fail-on-difference", "--subject", hugo, "--group", mixed, newDir, newDir},
		func(string) string { return "" }, &stdout, &stderr)
	if err != nil || !strings.Contains(stdout.String(), "0 decisions differ") {
		t.Errorf("a policy against itself: %v\n%s", err, stdout.String())
	}
	err = run(context.Background(), []string{"policy", "diff", "--fail-on-difference", "--subject", hugo, "--group", mixed, "", newDir},
		func(string) string { return "" }, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "2 decisions differ") {
		t.Errorf("--fail-on-difference with differences: %v", err)
	}
}

// noEnv is an empty environment.
func noEnv(string) string { return "" }
