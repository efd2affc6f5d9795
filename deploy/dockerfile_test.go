package deploy

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// instruction is one Dockerfile instruction with its continuation lines joined.
type instruction struct {
	line  int
	cmd   string            // upper case: FROM, RUN, COPY, ...
	flags map[string]string // --from=build -> from: build
	args  string            // the rest of the instruction
}

// stage is one FROM and the instructions that follow it.
type stage struct {
	name, image string
	instrs      []instruction
}

func (s stage) all(cmd string) []instruction {
	var out []instruction
	for _, in := range s.instrs {
		if in.cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

// parseDockerfile reads the subset of Dockerfile syntax the repository's Dockerfiles
// use: comments, backslash continuations, --flags, and FROM ... AS name.
func parseDockerfile(text string) ([]stage, error) {
	var stages []stage
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		start := i + 1
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		for strings.HasSuffix(l, `\`) && i+1 < len(lines) {
			i++
			next := strings.TrimSpace(lines[i])
			if strings.HasPrefix(next, "#") {
				continue // comments may sit between continuation lines
			}
			l = strings.TrimSuffix(l, `\`) + " " + next
		}
		cmd, rest, _ := strings.Cut(l, " ")
		in := instruction{line: start, cmd: strings.ToUpper(cmd), flags: map[string]string{}}
		rest = strings.TrimSpace(rest)
		for strings.HasPrefix(rest, "--") {
			var flag string
			flag, rest, _ = strings.Cut(rest, " ")
			k, v, _ := strings.Cut(strings.TrimPrefix(flag, "--"), "=")
			in.flags[k] = v
			rest = strings.TrimSpace(rest)
		}
		in.args = rest
		if in.cmd == "FROM" {
			f := strings.Fields(rest)
			st := stage{image: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.name = f[2]
			} else if len(f) != 1 {
				return nil, fmt.Errorf("line %d: FROM %q: want IMAGE [AS NAME]", start, rest)
			}
			stages = append(stages, st)
		}
		if len(stages) == 0 {
			if in.cmd == "ARG" {
				continue // ARGs before the first FROM
			}
			return nil, fmt.Errorf("line %d: %s before FROM", start, in.cmd)
		}
		stages[len(stages)-1].instrs = append(stages[len(stages)-1].instrs, in)
	}
	if len(stages) == 0 {
		return nil, errors.New("no FROM")
	}
	return stages, nil
}

// shellFields splits a shell command line on blanks, honouring single and double
// quotes (no escapes or expansions: make -n prints plain words).
func shellFields(s string) []string {
	var out []string
	var cur strings.Builder
	inWord, quote := false, rune(0)
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '"' || r == '\'':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out
}

// makeBuild is what `make build` runs, as make itself expands it.
type makeBuild struct {
	command string // the go build line
	output  string // its -o path, relative to the repository
}

// buildCommand extracts the go build line from `make -n build` output and checks
// the properties the image relies on: a static binary (the final stage has no
// libc), the version stamped in, the main package.
func buildCommand(makeOutput, version string) (makeBuild, error) {
	var lines []string
	for _, l := range strings.Split(makeOutput, "\n") {
		if strings.Contains(l, "go build") {
			lines = append(lines, strings.TrimSpace(l))
		}
	}
	if len(lines) != 1 {
		return makeBuild{}, fmt.Errorf("make build runs %d go build commands, want 1:\n%s", len(lines), makeOutput)
	}
	mb := makeBuild{command: lines[0]}
	f := shellFields(lines[0])
	var errs []error
	has := func(word string) bool {
		for _, w := range f {
			if w == word {
				return true
			}
		}
		return false
	}
	if !has("CGO_ENABLED=0") {
		errs = append(errs, errors.New("make build does not set CGO_ENABLED=0: the distroless static image has no libc"))
	}
	if !has("-trimpath") {
		errs = append(errs, errors.New("make build does not pass -trimpath"))
	}
	if !strings.Contains(lines[0], "-X main.version="+version) {
		errs = append(errs, fmt.Errorf("make build does not stamp VERSION (-X main.version=%s)", version))
	}
	if !has("./cmd/dirgate") {
		errs = append(errs, errors.New("make build does not build ./cmd/dirgate"))
	}
	for i, w := range f {
		if w == "-o" && i+1 < len(f) {
			mb.output = path.Clean(f[i+1])
		}
	}
	if mb.output == "" {
		errs = append(errs, errors.New("make build names no -o output"))
	}
	return mb, errors.Join(errs...)
}

var numericUser = regexp.MustCompile(`^([0-9]+)(:[0-9]+)?$`)

// checkDockerfile checks deploy/Dockerfile against what `make build` runs and the
// image the deployments expect: the builder runs make build (so the two cannot
// drift), the final stage is distroless or scratch, non-root by number, listening
// on all interfaces on the port it exposes, started without a shell.
func checkDockerfile(stages []stage, mb makeBuild, goVersion string) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if len(stages) < 2 {
		return []error{fmt.Errorf("%d stages, want a builder and a final stage", len(stages))}
	}
	final := stages[len(stages)-1]
	var copyIn *instruction
	for _, in := range final.all("COPY") {
		if strings.HasSuffix(strings.Fields(in.args)[0], "/"+path.Base(mb.output)) {
			copyIn = &in
		}
	}
	if copyIn == nil || copyIn.flags["from"] == "" {
		return append(errs, fmt.Errorf("final stage does not COPY --from the builder the binary %s", mb.output))
	}
	var builder *stage
	for i := range stages[:len(stages)-1] {
		if stages[i].name == copyIn.flags["from"] {
			builder = &stages[i]
		}
	}
	if builder == nil {
		return append(errs, fmt.Errorf("line %d: COPY --from=%s names no earlier stage", copyIn.line, copyIn.flags["from"]))
	}

	// A digest after the tag (golang:1.26@sha256:…) pins the tag's content.
	if want, img := "golang:"+goVersion, strings.Split(builder.image, "@")[0]; img != want && !strings.HasPrefix(img, want+"-") {
		bad("builder image %s, want %s (go.mod's go version)", builder.image, want)
	}
	workdir, makeRuns := "/", 0
	for _, in := range builder.instrs {
		switch {
		case in.cmd == "WORKDIR":
			workdir = path.Join(workdir, in.args)
		case in.cmd == "RUN" && strings.Contains(in.args, "go build"):
			bad("line %d: the builder runs go build itself; it must run `make build` so the flags cannot drift", in.line)
		case in.cmd == "RUN" && strings.Contains(in.args, "make build"):
			makeRuns++
			if !strings.Contains(in.args, "VERSION=") {
				bad("line %d: make build without VERSION=: the image would say \"dev\" or fail on git describe", in.line)
			}
			if want := path.Join(workdir, mb.output); strings.Fields(copyIn.args)[0] != want {
				bad("line %d: COPY takes %s but make build in %s writes %s", copyIn.line, strings.Fields(copyIn.args)[0], workdir, want)
			}
		}
	}
	if makeRuns != 1 {
		bad("the builder runs `make build` %d times, want once", makeRuns)
	}

	if !strings.HasPrefix(final.image, "gcr.io/distroless/static") && final.image != "scratch" {
		bad("final image %s, want gcr.io/distroless/static-* or scratch", final.image)
	}
	for _, in := range final.all("RUN") {
		bad("line %d: RUN in the final stage: it has no shell", in.line)
	}
	for _, in := range final.all("HEALTHCHECK") {
		bad("line %d: HEALTHCHECK in the final stage: it has no shell or HTTP client; use orchestrator probes", in.line)
	}
	users := final.all("USER")
	if len(users) == 0 {
		bad("final stage sets no USER")
	} else if u := users[len(users)-1].args; !numericUser.MatchString(u) || strings.HasPrefix(u, "0") && numericUser.FindStringSubmatch(u)[1] == "0" {
		bad("final USER %q: want a numeric non-zero uid (runAsNonRoot checks the number)", u)
	}

	listen, metricsListen := "", ""
	for _, in := range final.all("ENV") {
		for _, kv := range strings.Fields(in.args) {
			k, v, ok := strings.Cut(kv, "=")
			if ok && k == "DIRGATE_LISTEN" {
				listen = v
			}
			if ok && k == "DIRGATE_METRICS_LISTEN" {
				metricsListen = v
			}
			// On 0.0.0.0 the embedded demo's public tokens and passwords are refused
			// unless DIRGATE_DEMO says otherwise: the image must not say so for
			// everyone who runs it (README.md, DIRGATE_DEMO).
			if ok && k == "DIRGATE_DEMO" {
				bad("line %d: the final stage sets DIRGATE_DEMO: the image would serve the demo's public credentials on 0.0.0.0", in.line)
			}
		}
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil || host != "0.0.0.0" {
		bad("final stage ENV DIRGATE_LISTEN=%q: want 0.0.0.0:PORT (the default 127.0.0.1 is unreachable from outside the container)", listen)
	}
	exposed := false
	for _, in := range final.all("EXPOSE") {
		for _, p := range strings.Fields(in.args) {
			exposed = exposed || strings.TrimSuffix(p, "/tcp") == port
		}
	}
	if !exposed {
		bad("final stage does not EXPOSE the DIRGATE_LISTEN port %q", port)
	}
	// The metrics port too, or a container's /metrics is on its own loopback only.
	host, port, err = net.SplitHostPort(metricsListen)
	if err != nil || host != "0.0.0.0" {
		bad("final stage ENV DIRGATE_METRICS_LISTEN=%q: want 0.0.0.0:PORT (the default 127.0.0.1 cannot be scraped)", metricsListen)
	}
	exposed = false
	for _, in := range final.all("EXPOSE") {
		for _, p := range strings.Fields(in.args) {
			exposed = exposed || strings.TrimSuffix(p, "/tcp") == port
		}
	}
	if !exposed {
		bad("final stage does not EXPOSE the DIRGATE_METRICS_LISTEN port %q", port)
	}

	eps := final.all("ENTRYPOINT")
	var argv []string
	if len(eps) == 0 || json.Unmarshal([]byte(eps[len(eps)-1].args), &argv) != nil || len(argv) == 0 {
		bad("final ENTRYPOINT must be the exec form [\"/path/to/dirgate\", ...]: there is no shell")
	} else if dest := strings.Fields(copyIn.args)[1]; argv[0] != dest && argv[0] != path.Join(dest, path.Base(mb.output)) {
		bad("ENTRYPOINT runs %s but the binary is copied to %s", argv[0], dest)
	}
	return errs
}

// goVersion returns go.mod's language version as major.minor (the golang image tag).
func goVersion(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go ([0-9]+)\.([0-9]+)`).FindStringSubmatch(string(data))
	if m == nil {
		t.Fatal("go.mod has no go directive")
	}
	return m[1] + "." + m[2]
}

func runIn(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, ee.Stderr)
		}
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return string(out)
}

func readDockerfile(t *testing.T, p string) (string, []stage) {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	stages, err := parseDockerfile(string(data))
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return string(data), stages
}

// TestDockerfileRunsMakeBuild fails when deploy/Dockerfile and `make build` drift
// apart, then proves the check catches each kind of drift on altered copies.
func TestDockerfileRunsMakeBuild(t *testing.T) {
	const version = "deploytest"
	mb, err := buildCommand(runIn(t, repoRoot, "make", "-s", "-n", "build", "VERSION="+version), version)
	if err != nil {
		t.Fatal(err)
	}
	gov := goVersion(t)
	text, stages := readDockerfile(t, "Dockerfile")
	for _, err := range checkDockerfile(stages, mb, gov) {
		t.Error(err)
	}
	t.Logf("make build runs: %s", mb.command)

	tests := []struct {
		name     string
		old, new string
		want     string // part of the expected error
	}{
		// Building with go build directly is exactly the drift the test prevents.
		{name: "go build instead of make", old: `make build VERSION="${VERSION}"`,
			new: `CGO_ENABLED=0 go build -o bin/dirgate ./cmd/dirgate`, want: "runs go build itself"},
		// Without VERSION the binary reports the wrong version.
		{name: "no version", old: `make build VERSION="${VERSION}"`, new: `make build`, want: "without VERSION"},
		// An older Go than go.mod asks for would not build, or build differently.
		{name: "old go", old: "FROM golang:1.26 AS build", new: "FROM golang:1.20 AS build", want: "want golang:"},
		// Copying another path would ship a stale or missing binary.
		{name: "wrong copy path", old: "COPY --from=build /src/bin/dirgate", new: "COPY --from=build /src/dirgate", want: "COPY takes"},
		// A differently named stage breaks COPY --from.
		{name: "unknown stage", old: "COPY --from=build", new: "COPY --from=builder", want: "names no earlier stage"},
		// Root in the image: Kubernetes' runAsNonRoot would refuse a named user anyway.
		{name: "root user", old: "USER 65532:65532", new: "USER 0", want: "numeric non-zero"},
		{name: "named user", old: "USER 65532:65532", new: "USER nonroot", want: "numeric non-zero"},
		// The loopback default is unreachable from outside the container.
		{name: "loopback listen", old: "ENV DIRGATE_LISTEN=0.0.0.0:8080", new: "ENV DIRGATE_LISTEN=127.0.0.1:8080", want: "want 0.0.0.0"},
		// The demo's credentials are public: never served by the image by default.
		{name: "demo on", old: "ENV DIRGATE_LISTEN=0.0.0.0:8080", new: "ENV DIRGATE_LISTEN=0.0.0.0:8080 DIRGATE_DEMO=true", want: "sets DIRGATE_DEMO"},
		{name: "port mismatch", old: "EXPOSE 8080", new: "EXPOSE 9090", want: "does not EXPOSE"},
		{name: "metrics on loopback", old: "ENV DIRGATE_METRICS_LISTEN=0.0.0.0:9464", new: "ENV DIRGATE_METRICS_LISTEN=127.0.0.1:9464", want: "DIRGATE_METRICS_LISTEN=\"127.0.0.1:9464\""},
		{name: "metrics port not exposed", old: "EXPOSE 9464", new: "EXPOSE 9090", want: "does not EXPOSE the DIRGATE_METRICS_LISTEN port"},
		// Shell form needs /bin/sh, which distroless lacks.
		{name: "shell entrypoint", old: `ENTRYPOINT ["/usr/local/bin/dirgate"]`, new: `ENTRYPOINT /usr/local/bin/dirgate`, want: "exec form"},
		{name: "entrypoint elsewhere", old: `ENTRYPOINT ["/usr/local/bin/dirgate"]`, new: `ENTRYPOINT ["/dirgate"]`, want: "ENTRYPOINT runs"},
		// A full OS image brings a shell and packages the image does not need.
		{name: "fat final image", old: "FROM gcr.io/distroless/static-debian12:nonroot", new: "FROM debian:bookworm", want: "final image"},
		{name: "healthcheck", old: "EXPOSE 8080", new: "EXPOSE 8080\nHEALTHCHECK CMD wget -q localhost:8080/healthz", want: "HEALTHCHECK"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(text, tt.old) {
				t.Fatalf("Dockerfile no longer contains %q: update this case", tt.old)
			}
			stages, err := parseDockerfile(strings.Replace(text, tt.old, tt.new, 1))
			if err != nil {
				t.Fatal(err)
			}
			errs := checkDockerfile(stages, mb, gov)
			if !strings.Contains(fmt.Sprint(errs), tt.want) {
				t.Errorf("errors %v, want one containing %q", errs, tt.want)
			}
		})
	}
}

func TestBuildCommand(t *testing.T) {
	tests := []struct {
		name, out string
		want      string // part of the expected error; "" for none
	}{
		// The Makefile's command as make -n prints it.
		{name: "makefile", out: `CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=v1" -o bin/dirgate ./cmd/dirgate`},
		// cgo on: the binary would need libc, which distroless static lacks.
		{name: "cgo", out: `go build -trimpath -ldflags "-X main.version=v1" -o bin/dirgate ./cmd/dirgate`, want: "CGO_ENABLED=0"},
		{name: "no version", out: `CGO_ENABLED=0 go build -trimpath -o bin/dirgate ./cmd/dirgate`, want: "stamp VERSION"},
		{name: "no output", out: `CGO_ENABLED=0 go build -trimpath -ldflags "-X main.version=v1" ./cmd/dirgate`, want: "no -o"},
		{name: "two builds", out: "CGO_ENABLED=0 go build -o a ./x\nCGO_ENABLED=0 go build -o b ./y", want: "2 go build"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := buildCommand(tt.out, "v1")
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("buildCommand: %v, want error containing %q", err, tt.want)
			}
		})
	}
}

// TestDockerignore checks deploy/Dockerfile.dockerignore, which BuildKit reads for
// `docker build -f deploy/Dockerfile .`: it must keep every file the build reads and
// leave out the repository's history, local binaries and site secrets.
func TestDockerignore(t *testing.T) {
	f, err := os.Open("Dockerfile.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	patterns, err := ignorefile.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatal(err)
	}
	ignored := func(p string) bool {
		m, err := pm.MatchesOrParentMatches(p)
		if err != nil {
			t.Fatalf("match %s: %v", p, err)
		}
		return m
	}

	// Every source and embedded file of the packages ./cmd/dirgate is built from.
	need := []string{"go.mod", "go.sum", "Makefile"}
	abs, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	out := runIn(t, repoRoot, "go", "list", "-e", "-deps", "-f",
		`{{if .Module}}{{if or .Module.Main .Module.Replace}}{{.Dir}}{{range .GoFiles}} {{.}}{{end}}{{range .EmbedFiles}} {{.}}{{end}}{{end}}{{end}}`, "./cmd/dirgate")
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		rel, err := filepath.Rel(abs, f[0])
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(rel, "..") {
			continue // a module replaced by a version, from the module cache
		}
		for _, name := range f[1:] {
			need = append(need, filepath.ToSlash(filepath.Join(rel, name)))
		}
	}
	for _, dir := range localReplacements(t) {
		need = append(need, dir+"/go.mod")
	}
	if len(need) < 10 {
		t.Fatalf("go list found only %v: not the build inputs", need)
	}
	for _, p := range need {
		if ignored(p) {
			t.Errorf("%s is needed by make build but Dockerfile.dockerignore leaves it out", p)
		}
	}
	for _, p := range []string{".git/config", "bin/dirgate", "dirgate", "ldap.test", ".samba/dc/x", "deploy/kubernetes/site/tokens.yaml"} {
		if !ignored(p) {
			t.Errorf("%s is sent to the builder: add it to Dockerfile.dockerignore", p)
		}
	}
}

// localReplacements are the directories go.mod replaces modules with, relative to
// the repository root (third_party/asn1-ber).
func localReplacements(t *testing.T) []string {
	t.Helper()
	var dirs []string
	out := runIn(t, repoRoot, "go", "list", "-m", "-f", `{{with .Replace}}{{if not .Version}}{{.Path}}{{end}}{{end}}`, "all")
	for _, d := range strings.Fields(out) {
		dirs = append(dirs, strings.TrimPrefix(filepath.ToSlash(filepath.Clean(d)), "./"))
	}
	return dirs
}

// TestDockerfileCopiesLocalReplacements: the builder downloads modules before it
// copies the source, and that download reads the go.mod of every directory go.mod
// replaces a module with; each must be copied before it.
func TestDockerfileCopiesLocalReplacements(t *testing.T) {
	dirs := localReplacements(t)
	if len(dirs) == 0 {
		t.Skip("go.mod replaces no module with a directory")
	}
	text, _ := readDockerfile(t, "Dockerfile")
	before, _, ok := strings.Cut(text, "go mod download")
	if !ok {
		t.Fatal("the Dockerfile no longer runs go mod download: update this test")
	}
	var copied []string // sources of the COPY lines before the download
	for _, l := range strings.Split(before, "\n") {
		if f := strings.Fields(l); len(f) > 2 && f[0] == "COPY" {
			for _, src := range f[1 : len(f)-1] {
				copied = append(copied, strings.TrimSuffix(strings.TrimPrefix(src, "./"), "/"))
			}
		}
	}
	for _, d := range dirs {
		if !slices.ContainsFunc(copied, func(src string) bool { return d == src || strings.HasPrefix(d, src+"/") }) {
			t.Errorf("Dockerfile: COPY %s/ before go mod download (go.mod replaces a module with it)", d)
		}
	}
}
