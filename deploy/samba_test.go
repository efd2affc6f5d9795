package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// shellVars returns the `readonly NAME=value` assignments of a shell script.
func shellVars(script string) map[string]string {
	vars := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^readonly ([A-Z_]+)=(.*)$`).FindAllStringSubmatch(script, -1) {
		vars[m[1]] = m[2]
	}
	return vars
}

// shellValues runs script in bash and returns the values names then hold.
func shellValues(t *testing.T, script string, names []string) map[string]string {
	t.Helper()
	var b strings.Builder
	b.WriteString(script + "\n")
	for _, n := range names {
		fmt.Fprintf(&b, "printf '%%s\\0' \"${%s-}\"\n", n)
	}
	out, err := exec.Command("bash", "-c", b.String()).Output()
	if err != nil {
		t.Fatalf("bash: %v", err)
	}
	vals := strings.Split(string(out), "\x00")
	if len(vals) != len(names)+1 {
		t.Fatalf("bash printed %d values for %d names", len(vals)-1, len(names))
	}
	m := map[string]string{}
	for i, n := range names {
		m[n] = vals[i]
	}
	return m
}

// TestSambaImageFollowsHarness keeps deploy/samba in step with
// test/harness/samba/dc.sh, the harness the integration tests use: the same domain,
// accounts, password and lockout settings, the same provisioning options, and every
// package dc.sh installs.
func TestSambaImageFollowsHarness(t *testing.T) {
	read := func(p string) string {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	// dc.sh sources lib.sh, which holds the settings and packages it shares with
	// test/harness/samba/pair.sh: the harness is both files.
	dc := read(filepath.Join(repoRoot, "test/harness/samba/dc.sh")) + "\n" + read(filepath.Join(repoRoot, "test/harness/samba/lib.sh"))
	entry := read("samba/entrypoint.sh")

	// The domain's names are compared as bash expands them: lib.sh sets them in a
	// function (forest.sh switches between two domains), entrypoint.sh as readonly
	// assignments.
	names := []string{"REALM", "NETBIOS", "BASE_DN", "ADMIN_DN", "SVC_NAME", "SVC_DN", "SVC_GROUP_DN", "LOCKOUT_THRESHOLD", "LOCKOUT_MINUTES"}
	entryVars := shellVars(entry)
	var assignments strings.Builder
	for _, name := range names {
		fmt.Fprintf(&assignments, "readonly %s=%s\n", name, entryVars[name])
	}
	harness := shellValues(t, "source "+strconv.Quote(filepath.Join(repoRoot, "test/harness/samba/lib.sh")), names)
	image := shellValues(t, assignments.String(), names)
	for _, name := range names {
		if harness[name] == "" || harness[name] != image[name] {
			t.Errorf("%s: the harness (lib.sh) has %q, samba/entrypoint.sh %q", name, harness[name], image[name])
		}
	}

	// Options of samba-tool in dc.sh, but those that bind the DC to loopback or a
	// file: in compose other containers connect, and logs go to standard output.
	differs := map[string]bool{"interfaces": true, "bind interfaces only": true, "log file": true}
	flag := regexp.MustCompile(`--([a-z][a-z-]*)(?:="?([a-z ]+)=)?`)
	provision := func(script string) map[string]bool {
		// The body of the shell function provision(), up to its closing brace.
		body, _, _ := strings.Cut(script[strings.Index(script, "\nprovision() {")+1:], "\n}\n")
		set := map[string]bool{}
		for _, m := range flag.FindAllStringSubmatch(body, -1) {
			if m[1] == "option" && m[2] != "" {
				set["option "+m[2]] = true
			} else if m[1] != "option" {
				set[m[1]] = true
			}
		}
		return set
	}
	theirs, ours := provision(dc), provision(entry)
	for opt := range theirs {
		name := strings.TrimPrefix(opt, "option ")
		if !ours[opt] && !differs[name] {
			t.Errorf("dc.sh passes samba-tool %q, samba/entrypoint.sh does not", opt)
		}
	}
	if len(theirs) < 10 {
		t.Errorf("found only %d samba-tool options in dc.sh: the pattern no longer matches it", len(theirs))
	}

	// Packages: the image must hold what dc.sh installs on a test machine.
	m := regexp.MustCompile(`apt-get install -y -q ([a-z0-9 .+-]+?) >&2`).FindStringSubmatch(dc)
	if m == nil {
		t.Fatal("dc.sh: apt-get install line not found")
	}
	text, stages := readDockerfile(t, "samba/Dockerfile")
	for _, pkg := range strings.Fields(m[1]) {
		if !regexp.MustCompile(`\s` + regexp.QuoteMeta(pkg) + `\s`).MatchString(text) {
			t.Errorf("samba/Dockerfile does not install %s (dc.sh does)", pkg)
		}
	}
	final := stages[len(stages)-1]
	var argv []string
	eps := final.all("ENTRYPOINT")
	if len(eps) != 1 || json.Unmarshal([]byte(eps[0].args), &argv) != nil || len(argv) != 1 {
		t.Fatalf("samba/Dockerfile: want one exec-form ENTRYPOINT, got %v", eps)
	}
	copied := false
	for _, in := range final.all("COPY") {
		f := strings.Fields(in.args)
		copied = copied || len(f) == 2 && f[0] == "entrypoint.sh" && f[1] == argv[0] && in.flags["chmod"] == "0755"
	}
	if !copied {
		t.Errorf("samba/Dockerfile: ENTRYPOINT %s is not entrypoint.sh copied with --chmod=0755", argv[0])
	}
	if st, err := os.Stat("samba/entrypoint.sh"); err != nil || st.Mode().Perm()&0o111 == 0 {
		t.Errorf("samba/entrypoint.sh is not executable (%v)", err)
	}
	if _, err := strconv.Atoi(entryVars["LOCKOUT_THRESHOLD"]); err != nil {
		t.Errorf("LOCKOUT_THRESHOLD %q is not a number", entryVars["LOCKOUT_THRESHOLD"])
	}
}
