package policy_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/policy"
	"github.com/dirgate/dirgate/policy/internal/policytest"
)

// TestReloadKeepsLastGoodPolicy: an edit takes effect on reload; a broken edit
// keeps the last good version and shows in Status and Ready until it is fixed.
func TestReloadKeepsLastGoodPolicy(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "authz.rego")
	policytest.WriteFile(t, file, policytest.AllowUsers)
	a, err := policy.Open(context.Background(), policy.Config{Dir: dir, Logger: policytest.QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	rev1 := a.Revision()
	if got := policytest.Visible(t, a); got != "u" {
		t.Fatalf("initial policy shows %q", got)
	}

	policytest.WriteFile(t, file, policytest.AllowComputers)
	if err := a.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := policytest.Visible(t, a); got != "c" {
		t.Errorf("after an edit the listing shows %q, want c", got)
	}
	rev2 := a.Revision()
	if rev2 == rev1 {
		t.Errorf("revision did not change: %s", rev2)
	}

	policytest.WriteFile(t, file, policytest.BrokenPolicy)
	if err := a.Reload(context.Background()); err == nil {
		t.Fatal("a broken policy reloaded without error")
	}
	if got := policytest.Visible(t, a); got != "c" {
		t.Errorf("after a broken edit the listing shows %q, want the last good policy's c", got)
	}
	if st := a.Status(); st.Revision != rev2 || st.LastError == "" {
		t.Errorf("status %+v: want revision %s and the load error", st, rev2)
	}
	if err := a.Ready(); err == nil || !strings.Contains(err.Error(), rev2) {
		t.Errorf("Ready() = %v, want an error naming the revision still enforced", err)
	}

	policytest.WriteFile(t, file, policytest.AllowUsers)
	if err := a.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := a.Ready(); err != nil {
		t.Errorf("Ready() = %v after the policy was fixed", err)
	}
	if a.Revision() != rev1 {
		t.Errorf("the same content has revision %s, was %s", a.Revision(), rev1)
	}
}

// TestOpenRefusesBrokenPolicy: start-up fails on a policy it cannot enforce.
func TestOpenRefusesBrokenPolicy(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  string
	}{
		// A syntax error.
		{name: "parse error", files: map[string]string{"a.rego": policytest.BrokenPolicy}, want: "rego_parse_error"},
		// A type error.
		{name: "compile error", files: map[string]string{"a.rego": "package dirgate.authz\nallow if lower(1)\n"}, want: "rego_type_error"},
		// No decision at all: probably the wrong directory.
		{name: "no decision", files: map[string]string{"a.rego": "package other\nallow := true\n"}, want: "no rule defines data.dirgate.authz.allow"},
		// Data that collides with a rule.
		{name: "data conflict", files: map[string]string{"a.rego": policytest.AllowUsers, "data.json": `{"dirgate": {"authz": {"allow": 1}}}`}, want: "conflict"},
		// Malformed data.
		{name: "bad data", files: map[string]string{"a.rego": policytest.AllowUsers, "data.json": `{"dirgate": `}, want: "data.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tt.files {
				policytest.WriteFile(t, filepath.Join(dir, name), content)
			}
			_, err := policy.Open(context.Background(), policy.Config{Dir: dir, Logger: policytest.QuietLogger()})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Open: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestLoaderFollowsBundleConventions: data.json / data.yaml at the path of their
// directory, tests and hidden files left out.
func TestLoaderFollowsBundleConventions(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "dirgate", "types"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	policytest.WriteFile(t, filepath.Join(dir, "authz.rego"), "package dirgate.authz\nallow if input.object.objectType in data.dirgate.types.visible\nallow if input.object.guid in data.extra\n")
	policytest.WriteFile(t, filepath.Join(dir, "dirgate", "types", "data.yaml"), "visible: [user]\n")
	policytest.WriteFile(t, filepath.Join(dir, "data.json"), `{"extra": ["c"]}`)
	// A test file that does not even compile against the policy: the gateway skips it.
	policytest.WriteFile(t, filepath.Join(dir, "authz_test.rego"), "package dirgate.authz\nallow := 42\n")
	// Editor and VCS files are ignored.
	policytest.WriteFile(t, filepath.Join(dir, ".#authz.rego"), "not rego")
	policytest.WriteFile(t, filepath.Join(dir, ".git", "x.rego"), "not rego")
	a, err := policy.Open(context.Background(), policy.Config{Dir: dir, Logger: policytest.QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if got := policytest.Visible(t, a); got != "u,c" {
		t.Errorf("listing shows %q, want u,c", got)
	}
}

// TestWatchReloadsOnChange: an edit in the watched directory takes effect without
// a restart; a broken edit does not, and is reported.
func TestWatchReloadsOnChange(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "authz.rego")
	policytest.WriteFile(t, file, policytest.AllowUsers)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := policy.Open(ctx, policy.Config{Dir: dir, Logger: policytest.QuietLogger(), ReloadDebounce: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Watch(ctx); err != nil {
		t.Fatal(err)
	}
	defer a.Close()

	policytest.WriteFile(t, file, policytest.AllowComputers)
	policytest.WaitFor(t, "the edit to take effect", func() bool { return policytest.Visible(t, a) == "c" })

	policytest.WriteFile(t, file, policytest.BrokenPolicy)
	policytest.WaitFor(t, "the broken edit to be reported", func() bool { return a.Ready() != nil })
	if got := policytest.Visible(t, a); got != "c" {
		t.Errorf("after a broken edit the listing shows %q, want c", got)
	}

	// A new file in a new subdirectory is picked up too.
	policytest.WriteFile(t, file, policytest.AllowComputers)
	sub := filepath.Join(dir, "more")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	policytest.WaitFor(t, "the fix to be loaded", func() bool { return a.Ready() == nil })
	policytest.WriteFile(t, filepath.Join(sub, "users.rego"), "package dirgate.authz\nallow if input.object.objectType == \"user\"\n")
	policytest.WaitFor(t, "the new file to take effect", func() bool { return policytest.Visible(t, a) == "u,c" })
}

// TestWatchConfigMapVolume: Kubernetes mounts a ConfigMap as symlinks into a hidden
// timestamped directory and updates it by swapping the ..data symlink atomically;
// the policy follows the symlinks and reloads on the swap.
func TestWatchConfigMapVolume(t *testing.T) {
	dir := t.TempDir()
	version := func(name, content string) {
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		policytest.WriteFile(t, filepath.Join(dir, name, "authz.rego"), content)
	}
	version("..2025_01_01_v1", policytest.AllowUsers)
	if err := os.Symlink("..2025_01_01_v1", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("..data", "authz.rego"), filepath.Join(dir, "authz.rego")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := policy.Open(ctx, policy.Config{Dir: dir, Logger: policytest.QuietLogger(), ReloadDebounce: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if got := policytest.Visible(t, a); got != "u" {
		t.Fatalf("initial policy shows %q (the hidden directory must not be loaded twice)", got)
	}
	if err := a.Watch(ctx); err != nil {
		t.Fatal(err)
	}
	defer a.Close()

	version("..2025_01_02_v2", policytest.AllowComputers)
	if err := os.Symlink("..2025_01_02_v2", filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	policytest.WaitFor(t, "the swapped ConfigMap to take effect", func() bool { return policytest.Visible(t, a) == "c" })
}

// TestConcurrentListingsAndReloads: listings share cached plans and the policy is
// swapped under them; each listing sees one whole version (run with -race).
func TestConcurrentListingsAndReloads(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "authz.rego")
	policytest.WriteFile(t, file, policytest.AllowUsers)
	a, err := policy.Open(context.Background(), policy.Config{Dir: dir, Logger: policytest.QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	errs := make(chan string, 4) // one result per worker
	for w := range 4 {
		go func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					errs <- ""
					return
				default:
				}
				caller := dirgate.Principal{DN: "CN=c" + strings.Repeat("x", (w+i)%3)}
				got, err := a.FilterView(context.Background(), caller, dirgate.Object{}, dirgate.ListOptions{}, []dirgate.Object{policytest.ReloadUser, policytest.ReloadComputer})
				if err != nil || len(got) != 1 {
					errs <- "a listing did not see exactly one version's single object"
					return
				}
			}
		}()
	}
	for i := range 20 {
		policytest.WriteFile(t, file, []string{policytest.AllowComputers, policytest.AllowUsers}[i%2])
		if err := a.Reload(context.Background()); err != nil {
			t.Error(err)
		}
	}
	close(done)
	for range 4 {
		if msg := <-errs; msg != "" {
			t.Error(msg)
		}
	}
}
