package opaconfig

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"testing/fstest"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
)

// maxBundleBytes bounds a bundle file read by ReadBundleFile, as OPA's bundle
// plugin bounds a download (size_limit_bytes' default).
const maxBundleBytes = bundle.DefaultSizeLimitBytes

// ReadBundleFile reads a bundle file (opa build's .tar.gz) into a policy
// directory's layout, test modules included, for `dirgate policy test`, `eval`
// and `diff`. Its signature is not verified: those commands check what a file
// does, the gateway checks who signed it.
func ReadBundleFile(path string) (fs.FS, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read bundle: %w", err)
	}
	defer f.Close()
	b, err := bundle.NewReader(io.LimitReader(f, maxBundleBytes)).
		WithSkipBundleVerification(true).
		WithSizeLimitBytes(maxBundleBytes).
		WithRegoVersion(ast.RegoV1).
		Read()
	if err != nil {
		return nil, fmt.Errorf("read bundle %s: %w", path, err)
	}
	files := fstest.MapFS{}
	for _, m := range b.Modules {
		files[modulePath(strings.TrimPrefix(m.Path, "/"))] = &fstest.MapFile{Data: m.Raw, Mode: 0o444}
	}
	data := b.Data
	if data == nil {
		data = map[string]any{}
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return nil, fmt.Errorf("read bundle %s: %w", path, err)
	}
	files["data.json"] = &fstest.MapFile{Data: raw, Mode: 0o444}
	mf, err := json.Marshal(map[string]any{"revision": b.Manifest.Revision})
	if err != nil {
		return nil, fmt.Errorf("read bundle %s: %w", path, err)
	}
	files[".manifest"] = &fstest.MapFile{Data: mf, Mode: 0o444}
	return files, nil
}
