package policy_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dirgate/dirgate/policy"
)

// TestBundledRegoTests runs rego/*_test.rego through OPA's tester: `go test` fails
// when a Rego test of the bundled policy fails, as `opa test rego/` would.
func TestBundledRegoTests(t *testing.T) {
	var out bytes.Buffer
	sum, err := policy.RunTests(context.Background(), "", policy.TestOptions{Verbose: true}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if !sum.OK() {
		t.Fatalf("Rego tests: %+v\n%s", sum, out.String())
	}
	t.Logf("%+v", sum)
}

// TestRunTestsReportsFailures: a failing Rego test is counted and reported, so the
// CLI can exit non-zero; a directory that does not compile is an error.
func TestRunTestsReportsFailures(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string
		want    policy.TestSummary
		wantErr bool
		report  string // text the report must contain
	}{
		{
			// One passing and one failing test: both are counted, the failure named.
			name: "failure",
			files: map[string]string{
				"p.rego":      "package dirgate.authz\nallow if input.action == \"view\"\n",
				"p_test.rego": "package dirgate.authz_test\nimport data.dirgate.authz\ntest_view if authz.allow with input as {\"action\": \"view\"}\ntest_remove if authz.allow with input as {\"action\": \"remove\"}\n",
			},
			want:   policy.TestSummary{Passed: 1, Failed: 1},
			report: "test_remove",
		},
		{
			// A test that errors (a conflict) is an error, not a pass.
			name: "error",
			files: map[string]string{
				"p.rego":      "package dirgate.authz\nx := 1 if input.a\nx := 2 if input.a\nallow if x == 1\n",
				"p_test.rego": "package dirgate.authz_test\nimport data.dirgate.authz\ntest_conflict if authz.allow with input as {\"a\": true}\n",
			},
			want: policy.TestSummary{Errored: 1},
		},
		{
			// A directory that does not compile cannot be tested.
			name:    "compile error",
			files:   map[string]string{"p.rego": "package dirgate.authz\nallow if {\n"},
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tt.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var out bytes.Buffer
			sum, err := policy.RunTests(context.Background(), dir, policy.TestOptions{}, &out)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if sum != tt.want || sum.OK() {
				t.Errorf("summary %+v (OK %v), want %+v and not OK", sum, sum.OK(), tt.want)
			}
			if !strings.Contains(out.String(), tt.report) {
				t.Errorf("report does not mention %q:\n%s", tt.report, out.String())
			}
		})
	}
}
