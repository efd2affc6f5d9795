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
)

const (
	allowUsers     = "package dirgate.authz\nallow if input.object.objectType == \"user\"\n"
	allowComputers = "package dirgate.authz\nallow if input.object.objectType == \"computer\"\n"
	brokenPolicy   = "package dirgate.authz\nallow if {\n" // does not parse
)

var (
	reloadUser     = dirgate.Object{GUID: "u", DN: "CN=u,DC=x", ObjectType: dirgate.TypeUser}
	reloadComputer = dirgate.Object{GUID: "c", DN: "CN=c,DC=x", ObjectType: dirgate.TypeComputer}
)

// visible lists the GUIDs of the test objects the policy in force lets anybody see.
func visible(t *testing.T, a *policy.Authorizer) string {
	t.Helper()
	got, err := a.FilterView(context.Background(), dirgate.Principal{}, dirgate.Object{}, dirgate.ListOptions{},
		[]dirgate.Object{reloadUser, reloadComputer})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, o := range got {
		ids = append(ids, o.GUID)
	}
	return strings.Join(ids, ",")
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestReloadKeepsLastGoodPolicy: an edit takes effect on reload; a broken edit
// keeps the last good version and shows in Status and Ready until it is fixed.
func TestReloadKeepsLastGoodPolicy(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "authz.rego")
	writeFile(t, file, allowUsers)
	a, err := policy.Open(context.Background(), policy.Config{Dir: dir, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	rev1 := a.Revision()
	if got := visible(t, a); got != "u" {
		t.Fatalf("initial policy shows %q", got)
	}

	writeFile(t, file, allowComputers)
	if err := a.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := visible(t, a); got != "c" {
		t.Errorf("after an edit the listing shows %q, want c", got)
	}
	rev2 := a.Revision()
	if rev2 == rev1 {
		t.Errorf("revision did not change: %s", rev2)
	}

	writeFile(t, file, brokenPolicy)
	if err := a.Reload(context.Background()); err == nil {
		t.Fatal("a broken policy reloaded without error")
	}
	if got := visible(t, a); got != "c" {
		t.Errorf("after a broken edit the listing shows %q, want the last good policy's c", got)
	}
	if st := a.Status(); st.Revision != rev2 || st.LastError == "" {
		t.Errorf("status %+v: want revision %s and the load error", st, rev2)
	}
	if err := a.Ready(); err == nil || !strings.Contains(err.Error(), rev2) {
		t.Errorf("Ready() = %v, want an error naming the revision still enforced", err)
	}

	writeFile(t, file, allowUsers)
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
		{name: "parse error", files: map[string]string{"a.rego": brokenPolicy}, want: "rego_parse_error"},
		// A type error.
		{name: "compile error", files: map[string]string{"a.rego": "package dirgate.authz\nallow if lower(1)\n"}, want: "rego_type_error"},
		// No decision at all: probably the wrong directory.
		{name: "no decision", files: map[string]string{"a.rego": "package other\nallow := true\n"}, want: "no rule defines data.dirgate.authz.allow"},
		// Data that collides with a rule.
		{name: "data conflict", files: map[string]string{"a.rego": allowUsers, "data.json": `{"dirgate": {"authz": {"allow": 1}}}`}, want: "conflict"},
		// Malformed data.
		{name: "bad data", files: map[string]string{"a.rego": allowUsers, "data.json": `{"dirgate": `}, want: "data.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tt.files {
				writeFile(t, filepath.Join(dir, name), content)
			}
			_, err := policy.Open(context.Background(), policy.Config{Dir: dir, Logger: quietLogger()})
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
	writeFile(t, filepath.Join(dir, "authz.rego"), "package dirgate.authz\nallow if input.object.objectType in data.dirgate.types.visible\nallow if input.object.guid in data.extra\n")
	writeFile(t, filepath.Join(dir, "dirgate", "types", "data.yaml"), "visible: [user]\n")
	writeFile(t, filepath.Join(dir, "data.json"), `{"extra": ["c"]}`)
	// A test file that does not even compile against the policy: the gateway skips it.
	writeFile(t, filepath.Join(dir, "authz_test.rego"), "package dirgate.authz\nallow := 42\n")
	// Editor and VCS files are ignored.
	writeFile(t, filepath.Join(dir, ".#authz.rego"), "not rego")
	writeFile(t, filepath.Join(dir, ".git", "x.rego"), "not rego")
	a, err := policy.Open(context.Background(), policy.Config{Dir: dir, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if got := visible(t, a); got != "u,c" {
		t.Errorf("listing shows %q, want u,c", got)
	}
}

// TestWatchReloadsOnChange: an edit in the watched directory takes effect without
// a restart; a broken edit does not, and is reported.
func TestWatchReloadsOnChange(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "authz.rego")
	writeFile(t, file, allowUsers)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := policy.Open(ctx, policy.Config{Dir: dir, Logger: quietLogger(), ReloadDebounce: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Watch(ctx); err != nil {
		t.Fatal(err)
	}
	defer a.Close()

	writeFile(t, file, allowComputers)
	waitFor(t, "the edit to take effect", func() bool { return visible(t, a) == "c" })

	writeFile(t, file, brokenPolicy)
	waitFor(t, "the broken edit to be reported", func() bool { return a.Ready() != nil })
	if got := visible(t, a); got != "c" {
		t.Errorf("after a broken edit the listing shows %q, want c", got)
	}

	// A new file in a new subdirectory is picked up too.
	writeFile(t, file, allowComputers)
	sub := filepath.Join(dir, "more")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the fix to be loaded", func() bool { return a.Ready() == nil })
	writeFile(t, filepath.Join(sub, "users.rego"), "package dirgate.authz\nallow if input.object.objectType == \"user\"\n")
	waitFor(t, "the new file to take effect", func() bool { return visible(t, a) == "u,c" })
}

// waitFor polls cond: file system notification is asynchronous. The deadline only
// bounds a failing test; it asserts nothing about speed.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
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
		writeFile(t, filepath.Join(dir, name, "authz.rego"), content)
	}
	version("..2025_01_01_v1", allowUsers)
	if err := os.Symlink("..2025_01_01_v1", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("..data", "authz.rego"), filepath.Join(dir, "authz.rego")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := policy.Open(ctx, policy.Config{Dir: dir, Logger: quietLogger(), ReloadDebounce: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if got := visible(t, a); got != "u" {
		t.Fatalf("initial policy shows %q (the hidden directory must not be loaded twice)", got)
	}
	if err := a.Watch(ctx); err != nil {
		t.Fatal(err)
	}
	defer a.Close()

	version("..2025_01_02_v2", allowComputers)
	if err := os.Symlink("..2025_01_02_v2", filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the swapped ConfigMap to take effect", func() bool { return visible(t, a) == "c" })
}

// TestConcurrentListingsAndReloads: listings share cached plans and the policy is
// swapped under them; each listing sees one whole version (run with -race).
func TestConcurrentListingsAndReloads(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "authz.rego")
	writeFile(t, file, allowUsers)
	a, err := policy.Open(context.Background(), policy.Config{Dir: dir, Logger: quietLogger()})
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
				got, err := a.FilterView(context.Background(), caller, dirgate.Object{}, dirgate.ListOptions{}, []dirgate.Object{reloadUser, reloadComputer})
				if err != nil || len(got) != 1 {
					errs <- "a listing did not see exactly one version's single object"
					return
				}
			}
		}()
	}
	for i := range 20 {
		writeFile(t, file, []string{allowComputers, allowUsers}[i%2])
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
