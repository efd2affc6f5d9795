// Package opabundle writes OPA bundle files for tests, laid out as `opa build`
// lays them out (a gzipped tar whose paths start with "/"), from any set of
// files: tests need bundles OPA's own writer would not make (tampered,
// half-signed, signed and padded to hundreds of megabytes).
package opabundle

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/util"
)

// Tarball packs files (path in the bundle -> content) into a bundle, in path order.
func Tarball(t testing.TB, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		c := files[p]
		if err := tw.WriteHeader(&tar.Header{Name: "/" + p, Mode: 0o644, Size: int64(len(c)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(c)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// File writes Tarball's bundle to a file in the test's temporary directory and
// returns its path.
func File(t testing.TB, files map[string]string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "bundle.tar.gz")
	if err := os.WriteFile(p, Tarball(t, files), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Signed packs files into a bundle signed (RS256, key id keyID) with key, a PEM
// private key or its path as `opa sign --signing-key` takes it, over every file,
// with pads more files of padBytes zeros each (pad-0.bin, ...): what a
// compromised pipeline or signing key could publish. Zeros compress about a
// thousandfold, so the bundle is small whatever padBytes is, and nothing of the
// pads is held in memory here.
func Signed(t testing.TB, key, keyID string, files map[string]string, pads int, padBytes int64) []byte {
	t.Helper()
	infos := fileInfos(t, files)
	zeros := make([]byte, 1<<20)
	chunks := func(n int64, write func([]byte)) {
		for n > 0 {
			c := min(n, int64(len(zeros)))
			write(zeros[:c])
			n -= c
		}
	}
	padHash := sha256.New()
	chunks(padBytes, func(b []byte) { padHash.Write(b) })
	padSum := hex.EncodeToString(padHash.Sum(nil))
	for i := range pads {
		infos = append(infos, bundle.FileInfo{Name: fmt.Sprintf("pad-%d.bin", i), Hash: padSum, Algorithm: string(bundle.SHA256)})
	}
	all := map[string]string{".signatures.json": signaturesFile(t, key, keyID, infos)}
	for p, c := range files {
		all[p] = c
	}
	var buf bytes.Buffer
	gz, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	tw := tar.NewWriter(gz)
	header := func(name string, size int64) {
		if err := tw.WriteHeader(&tar.Header{Name: "/" + name, Mode: 0o644, Size: size, Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
	}
	paths := make([]string, 0, len(all))
	for p := range all {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		header(p, int64(len(all[p])))
		if _, err := tw.Write([]byte(all[p])); err != nil {
			t.Fatal(err)
		}
	}
	for i := range pads {
		header(fmt.Sprintf("pad-%d.bin", i), padBytes)
		chunks(padBytes, func(b []byte) {
			if _, err := tw.Write(b); err != nil {
				t.Fatal(err)
			}
		})
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Signatures returns the .signatures.json that signs files (RS256, key id
// keyID) as Signed signs them: a bundle server holding one signed bundle can
// send this file again with other content under the same paths.
func Signatures(t testing.TB, key, keyID string, files map[string]string) string {
	t.Helper()
	return signaturesFile(t, key, keyID, fileInfos(t, files))
}

func fileInfos(t testing.TB, files map[string]string) []bundle.FileInfo {
	t.Helper()
	hasher, err := bundle.NewSignatureHasher(bundle.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	var infos []bundle.FileInfo
	for p, c := range files {
		var v any = []byte(c)
		if bundle.IsStructuredDoc(p) {
			if err := util.Unmarshal([]byte(c), &v); err != nil {
				t.Fatal(err)
			}
		}
		h, err := hasher.HashFile(v)
		if err != nil {
			t.Fatal(err)
		}
		infos = append(infos, bundle.FileInfo{Name: p, Hash: hex.EncodeToString(h), Algorithm: string(bundle.SHA256)})
	}
	return infos
}

func signaturesFile(t testing.TB, key, keyID string, infos []bundle.FileInfo) string {
	t.Helper()
	token, err := bundle.GenerateSignedToken(infos, bundle.NewSigningConfig(key, "RS256", ""), keyID)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := json.Marshal(map[string]any{"signatures": []string{token}})
	if err != nil {
		t.Fatal(err)
	}
	return string(sig)
}
