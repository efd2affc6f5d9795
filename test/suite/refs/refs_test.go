// Package refs checks that what comments and docs cite exists: a file path
// (cache/fill.go, ../test/harness/samba/README.md), a section of a doc
// (docs/cache.md#leases, or docs/cache.md, "Redis failovers"), and a test, benchmark
// or fuzz target (TestX, BenchmarkX, FuzzX); and that every image under docs/img is
// shown by a doc. A reference that no longer resolves sends a reader looking for
// something that moved or never was.
package refs

import (
	"bytes"
	"fmt"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"unicode"
)

// skipDirs are not walked: vendored code cites its own upstream's files, and
// testdata holds inputs, not prose.
var skipDirs = map[string]bool{"third_party": true, "testdata": true, "node_modules": true}

// repo is what the walk found: every file and directory (slash paths from the root),
// every test, benchmark, fuzz and example function, and each Markdown file's anchors.
type repo struct {
	root     string
	paths    map[string]bool
	base     map[string]bool // every file's and directory's name
	funcs    map[string]bool
	anchors  map[string]map[string]bool // .md path -> anchor -> present
	heads    map[string]map[string]bool // .md path -> lower-case heading text -> present
	goFiles  []string
	docFiles []string
}

var (
	// testFuncDef also takes types: policy.TestSummary is cited by its name.
	testFuncDef = regexp.MustCompile(`(?m)^(?:func|type) ((?:Test|Benchmark|Fuzz|Example)\w*)[( ]`)
	// testFuncRef is a cited test: the name, and no more (a sub-benchmark's
	// "/members=1000" is the benchmark's business).
	testFuncRef = regexp.MustCompile(`\b((?:Test|Benchmark|Fuzz)[A-Z0-9_]\w*)`)
	// pathRef is a cited file: a relative path ending in one of the extensions the
	// repository's prose cites, with an optional #anchor.
	pathRef = regexp.MustCompile(`(?:^|[\s(\x60"'\[,;:])((?:\.{1,2}/)*[A-Za-z0-9_][A-Za-z0-9_./-]*\.(?:go|md|sh|rego|yaml|yml|mk|json|ldif|conf|py))(#[A-Za-z0-9_-]+)?\b`)
	// quotedSection is the other way comments cite a doc's section:
	// docs/cache.md, "Redis failovers" or docs/cache.md ("Redis failovers").
	quotedSection = regexp.MustCompile(`([A-Za-z0-9_./-]+\.md)(?:,? |\s\()\\?"([^"\\]+)\\?"`)
	mdLink        = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	heading       = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *#*$`)
	// boldLead opens a paragraph that docs cite like a section: "**Writes laid over
	// listings.** A write goes to one DC".
	boldLead = regexp.MustCompile(`(?m)^\*\*([^*]+?)\.?\*\*`)
	fence    = regexp.MustCompile("(?ms)^ *```.*?^ *```")
)

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("repository root not found from the test's directory: %v", err)
	}
	return dir
}

var (
	loadOnce sync.Once
	loaded   *repo
	loadErr  error
)

// load walks the repository once for all the tests.
func load(t *testing.T) *repo {
	t.Helper()
	loadOnce.Do(func() { loaded, loadErr = walk(repoRoot(t)) })
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	return loaded
}

func walk(root string) (*repo, error) {
	r := &repo{root: root, paths: map[string]bool{}, base: map[string]bool{}, funcs: map[string]bool{},
		anchors: map[string]map[string]bool{}, heads: map[string]map[string]bool{}}
	err := filepath.WalkDir(r.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(r.root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		r.paths[rel] = true
		r.base[d.Name()] = true
		if skipped(rel) {
			// Cited, never read: vendored code cites its upstream's files, testdata
			// holds inputs, and this package's own tests cite broken references on
			// purpose.
			return nil
		}
		switch {
		case strings.HasSuffix(rel, ".go"):
			r.goFiles = append(r.goFiles, rel)
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, line := range bytes.Split(b, []byte("\n")) {
				if defines(line) {
					if m := testFuncDef.FindSubmatch(line); m != nil {
						r.funcs[string(m[1])] = true
					}
				}
			}
		case strings.HasSuffix(rel, ".md"):
			r.docFiles = append(r.docFiles, rel)
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			r.anchors[rel], r.heads[rel] = anchorsOf(b)
		}
		return nil
	})
	return r, err
}

// defines reports whether a line may define a test, benchmark, fuzz target or
// example (or a type named like one), before the regular expression says which.
func defines(line []byte) bool {
	for _, p := range []string{"func Test", "func Benchmark", "func Fuzz", "func Example", "type Test", "type Benchmark", "type Fuzz"} {
		if bytes.HasPrefix(line, []byte(p)) {
			return true
		}
	}
	return false
}

// skipped reports whether rel is in a directory whose files are not read.
func skipped(rel string) bool {
	if strings.HasPrefix(rel, "test/suite/refs/") {
		return true
	}
	for _, part := range strings.Split(rel, "/") {
		if skipDirs[part] {
			return true
		}
	}
	return false
}

// anchorsOf returns the anchors GitHub gives a document's headings (lower case;
// letters, digits, '-' and '_' kept; spaces made '-'; a repeated one numbered) and
// the headings' texts in lower case.
func anchorsOf(b []byte) (map[string]bool, map[string]bool) {
	anchors, heads := map[string]bool{}, map[string]bool{}
	seen := map[string]int{}
	b = fence.ReplaceAll(b, nil)
	for _, m := range heading.FindAllSubmatch(b, -1) {
		text := string(m[1])
		heads[strings.ToLower(text)] = true
		var s strings.Builder
		for _, c := range strings.ToLower(text) {
			switch {
			case c == ' ':
				s.WriteByte('-')
			case c == '-' || c == '_' || unicode.IsLetter(c) || unicode.IsDigit(c):
				s.WriteRune(c)
			}
		}
		a := s.String()
		if n := seen[a]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	for _, m := range boldLead.FindAllSubmatch(b, -1) {
		heads[strings.ToLower(string(m[1]))] = true
	}
	return anchors, heads
}

// resolve finds a cited path: from the citing file's directory, or from the root. A
// bare name a Go file cites with .go is a file of its own package; any other bare
// name is a file's name somewhere in the repository (prose names kustomization.yaml
// or dc.sh where the context says which).
func (r *repo) resolve(from, cited string) (string, bool) {
	dir := filepath.ToSlash(filepath.Dir(from))
	for _, c := range []string{filepath.ToSlash(filepath.Join(dir, cited)), filepath.ToSlash(filepath.Clean(cited))} {
		if r.paths[c] {
			return c, true
		}
	}
	if !strings.Contains(cited, "/") && !(strings.HasSuffix(from, ".go") && strings.HasSuffix(cited, ".go")) && r.base[cited] {
		return cited, true
	}
	return "", false
}

// notInRepo are names prose cites that are not the repository's files: OPA's
// conventions and the sources of OPA it explains, files a command or a reader makes,
// and configuration files of other programs.
var notInRepo = map[string]bool{
	"data.yaml": true, "input.json": true, "draft.rego": true, // OPA's bundle layout, a draft's module name, an example input
	"ast/compile.go": true, "topdown/eval.go": true, // OPA's source
	"roles/data.yaml": true, "overlay/kustomization.yaml": true, // examples of a reader's files
	"run.json": true, "large.json": true, "large-64.json": true, // the load tool's output
	"initial.json": true, "report.json": true, "history.jsonl": true, // a chaos run's files
	"sentinel.conf": true, "resolv.conf": true, "STATE_DIR/pair.conf": true, // other programs' and the harness's run-time files
	"smb.conf": true, "krb5.conf": true, "STATE_DIR/forest.conf": true,
}

func (r *repo) checkPath(from, cited, anchor string) string {
	if strings.Contains(cited, "...") || notInRepo[cited] {
		return ""
	}
	p, ok := r.resolve(from, cited)
	if !ok {
		return fmt.Sprintf("%s: %s does not exist", from, cited)
	}
	if anchor != "" && strings.HasSuffix(p, ".md") {
		if !r.anchors[p][strings.TrimPrefix(anchor, "#")] {
			return fmt.Sprintf("%s: %s has no section %s", from, p, anchor)
		}
	}
	return ""
}

// hasHeading reports whether the doc at p has a heading that begins with text, in
// any case, code marks ignored: a comment may cite "Trying a change in shadow" for
// "Trying a change in shadow: the candidate policy".
func (r *repo) hasHeading(p, text string) bool {
	text = strings.ToLower(strings.ReplaceAll(text, "`", ""))
	for h := range r.heads[p] {
		if strings.HasPrefix(strings.ReplaceAll(h, "`", ""), text) {
			return true
		}
	}
	return false
}

// citedExts are the extensions pathRef looks for: a line without one of them cites
// no file, and the regular expressions (slow under the race detector) skip it.
var citedExts = []string{".go", ".md", ".sh", ".rego", ".yaml", ".yml", ".mk", ".json", ".ldif", ".conf", ".py"}

// continued is a line with the lines that continue it, joined as one: a citation may
// break across lines of a comment or a paragraph.
func continued(lines []string, i int) string {
	var b strings.Builder
	for j := i; j < len(lines) && j < i+3; j++ {
		l := strings.TrimSpace(lines[j])
		if j > i {
			l = strings.TrimSpace(strings.TrimPrefix(l, "//"))
			b.WriteByte(' ')
		}
		b.WriteString(l)
	}
	return b.String()
}

func (r *repo) checkText(from, text string, problems map[string]bool) {
	add := func(s string) {
		if s != "" {
			problems[s] = true
		}
	}
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		if strings.Contains(line, "Test") || strings.Contains(line, "Benchmark") || strings.Contains(line, "Fuzz") {
			for _, m := range testFuncRef.FindAllStringSubmatch(line, -1) {
				if !r.funcs[m[1]] {
					add(fmt.Sprintf("%s: %s is not a test, benchmark or fuzz target in the repository", from, m[1]))
				}
			}
		}
		for _, ext := range citedExts {
			if strings.Contains(line, ext) {
				r.checkPaths(from, line, add)
				break
			}
		}
		if strings.Contains(line, ".md") {
			r.checkSections(from, continued(lines, i), add)
		}
	}
}

func (r *repo) checkPaths(from, line string, add func(string)) {
	for _, m := range pathRef.FindAllStringSubmatch(line, -1) {
		if strings.Contains(m[1], "://") {
			continue
		}
		add(r.checkPath(from, m[1], m[2]))
	}
}

// checkSections checks the sections text cites by name. text is a line joined with
// its continuation, so a citation that starts on the line is seen whole; one that
// starts on a later line is checked when that line's turn comes.
func (r *repo) checkSections(from, text string, add func(string)) {
	for _, m := range quotedSection.FindAllStringSubmatch(text, -1) {
		p, ok := r.resolve(from, m[1])
		if !ok {
			add(fmt.Sprintf("%s: %s does not exist", from, m[1]))
			continue
		}
		if !r.hasHeading(p, m[2]) {
			add(fmt.Sprintf("%s: %s has no section %q", from, p, m[2]))
		}
	}
}

// goText is a Go file's comments, and those of its string literals that cite docs/
// (log and error messages that send an operator to a section).
func goText(src []byte) string {
	var out bytes.Buffer
	fset := token.NewFileSet()
	f := fset.AddFile("", fset.Base(), len(src))
	var s scanner.Scanner
	s.Init(f, src, nil, scanner.ScanComments)
	for {
		_, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok == token.COMMENT || (tok == token.STRING && strings.Contains(lit, "docs/")) {
			out.WriteString(lit)
			out.WriteByte('\n')
		}
	}
	return out.String()
}

func TestReferencesResolve(t *testing.T) {
	r := load(t)
	problems := map[string]bool{}
	for _, f := range r.goFiles {
		src, err := os.ReadFile(filepath.Join(r.root, f))
		if err != nil {
			t.Fatal(err)
		}
		r.checkText(f, goText(src), problems)
	}
	for _, f := range r.docFiles {
		b, err := os.ReadFile(filepath.Join(r.root, f))
		if err != nil {
			t.Fatal(err)
		}
		r.checkText(f, string(b), problems)
		for _, m := range mdLink.FindAllStringSubmatch(string(b), -1) {
			link := m[1]
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			target, anchor, _ := strings.Cut(link, "#")
			if target == "" {
				if !r.anchors[f][anchor] {
					problems[fmt.Sprintf("%s: no section #%s", f, anchor)] = true
				}
				continue
			}
			if s := r.checkPath(f, target, map[bool]string{true: "#" + anchor}[anchor != ""]); s != "" {
				problems[s] = true
			}
		}
	}
	var list []string
	for p := range problems {
		list = append(list, p)
	}
	sort.Strings(list)
	for _, p := range list {
		t.Error(p)
	}
}

// TestChecksCatchBrokenReferences holds the checks to their purpose: each kind of
// broken reference is reported, and the working ones are not.
func TestChecksCatchBrokenReferences(t *testing.T) {
	r := &repo{
		paths:   map[string]bool{"cache": true, "cache/fill.go": true, "docs": true, "docs/cache.md": true},
		funcs:   map[string]bool{"TestFill": true},
		anchors: map[string]map[string]bool{"docs/cache.md": {"leases": true}},
		heads:   map[string]map[string]bool{"docs/cache.md": {"leases": true}},
	}
	for _, c := range []struct {
		from, text string
		broken     bool
	}{
		{"cache/x.go", "// see cache/fill.go and TestFill", false},
		{"cache/x.go", "// see fill.go", false},
		{"cache/x.go", "// docs/cache.md#leases", false},
		{"cache/x.go", `// (docs/cache.md, "Leases")`, false},
		{"cache/x.go", `// docs/cache.md ("Leases") says`, false},
		{"cache/x.go", `// docs/cache.md ("Gone") says`, true},
		{"cache/x.go", "// docs/cache.md,\n// \"Leases\"", false},
		{"cache/x.go", "// docs/cache.md,\n// \"Gone\"", true},
		{"docs/api.md", "[cache](cache.md#leases)", false},
		{"cache/x.go", "// see changefeed.go", true},
		{"cache/x.go", "// see cache/feed.go", true},
		{"cache/x.go", "// TestGone checks it", true},
		{"cache/x.go", "// docs/cache.md#gone", true},
		{"cache/x.go", `// docs/cache.md, "Gone"`, true},
		{"docs/api.md", "[cache](cache.md#gone)", true},
	} {
		problems := map[string]bool{}
		r.checkText(c.from, c.text, problems)
		if got := len(problems) > 0; got != c.broken {
			t.Errorf("%s %q: reported %v, want %v (%v)", c.from, c.text, got, c.broken, problems)
		}
	}
	anchors, _ := anchorsOf([]byte("# The named group's visibility\n## Change feed: from a change on the DC\n## Leases\n## Leases\n"))
	for _, a := range []string{"the-named-groups-visibility", "change-feed-from-a-change-on-the-dc", "leases", "leases-1"} {
		if !anchors[a] {
			t.Errorf("anchor %q missing from %v", a, anchors)
		}
	}
}

// TestEveryImageIsShown: an image under docs/img that no doc shows is a figure
// nobody reads, or one a doc stopped showing when its figures changed.
func TestEveryImageIsShown(t *testing.T) {
	r := load(t)
	var docs strings.Builder
	for _, f := range r.docFiles {
		b, err := os.ReadFile(filepath.Join(r.root, f))
		if err != nil {
			t.Fatal(err)
		}
		docs.Write(b)
	}
	entries, err := os.ReadDir(filepath.Join(r.root, "docs", "img"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.Contains(docs.String(), "img/"+e.Name()) {
			t.Errorf("docs/img/%s is shown by no doc", e.Name())
		}
	}
}
