package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"encoding/json"
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
)

// maxFileBytes bounds each file of a policy directory: a policy is code and data
// written by people, and a runaway file must not exhaust memory on reload.
const maxFileBytes = 32 << 20

// source is a policy directory read from disk (or the embedded bundle): its modules
// and data as OPA's bundle reader returns them, and the revision that names them.
type source struct {
	modules  map[string]*ast.Module // by path inside the directory
	data     map[string]any
	revision string
}

// loadOptions say which files of a directory are read.
type loadOptions struct {
	// tests includes *_test.rego files: `dirgate policy test` runs them, the gateway
	// leaves them out so that a test cannot change a decision.
	tests bool
}

// readSource reads a policy directory with OPA's bundle conventions: every *.rego
// file is a module, and data.json / data.yaml files are merged into data at the path
// of their directory. Names starting with a dot are skipped (editor files, and the
// ..data directories of a Kubernetes ConfigMap volume, whose symlinked files are
// followed instead).
func readSource(fsys fs.FS, opts loadOptions) (*source, error) {
	loader, err := bundle.NewFSLoader(fsys)
	if err != nil {
		return nil, fmt.Errorf("read policy: %w", err)
	}
	loader = loader.WithFilter(func(p string, info fs.FileInfo, _ int) bool {
		name := path.Base(p)
		if p == "." || name == ".manifest" {
			return false
		}
		if strings.HasPrefix(name, ".") {
			return true
		}
		return !info.IsDir() && !opts.tests && strings.HasSuffix(name, "_test.rego")
	}).WithFollowSymlinks(true).WithSizeLimitBytes(maxFileBytes)
	b, err := bundle.NewCustomReader(loader).
		WithSkipBundleVerification(true).
		WithProcessAnnotations(true).
		WithFollowSymlinks(true).
		WithSizeLimitBytes(maxFileBytes).
		WithRegoVersion(ast.RegoV1).
		Read()
	if err != nil {
		return nil, fmt.Errorf("read policy: %w", err)
	}
	src := &source{modules: make(map[string]*ast.Module, len(b.Modules)), data: b.Data}
	if src.data == nil {
		src.data = map[string]any{}
	}
	h := sha256.New()
	paths := make([]string, 0, len(b.Modules))
	raw := map[string][]byte{}
	for _, m := range b.Modules {
		p := strings.TrimPrefix(m.Path, "/")
		src.modules[p] = m.Parsed
		raw[p] = m.Raw
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		fmt.Fprintf(h, "module %q %d\n", p, len(raw[p]))
		h.Write(raw[p])
	}
	// encoding/json sorts map keys, so equal data always hashes equally.
	data, err := json.Marshal(src.data)
	if err != nil {
		return nil, fmt.Errorf("read policy: hash data: %w", err)
	}
	fmt.Fprintf(h, "data %d\n", len(data))
	h.Write(data)
	if rev := b.Manifest.Revision; rev != "" {
		fmt.Fprintf(h, "manifest revision %q\n", rev)
	}
	src.revision = hex.EncodeToString(h.Sum(nil))[:16]
	return src, nil
}
