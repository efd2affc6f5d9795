package opaconfig_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/dirgate/dirgate/test/harness/opabundle"
)

// The opa command is built once per run from the OPA module in go.mod (go.mod's
// tool directive keeps its dependencies listed): the bundles the tests serve are
// made and signed by the tool security teams use. A cold build takes about two
// minutes on a 2-core machine; the Go build cache makes later runs take seconds.
var (
	opaOnce sync.Once
	opaPath string
	opaErr  error
	opaDir  string
	// reader sees the policy's metrics: installed before any Authorizer exists.
	reader = sdkmetric.NewManualReader()
)

func TestMain(m *testing.M) {
	otel.SetMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	code := m.Run()
	if ca, err := testCA(); err == nil {
		os.Remove(ca)
	}
	if opaDir != "" {
		os.RemoveAll(opaDir)
	}
	os.Exit(code)
}

func opaBin(t *testing.T) string {
	t.Helper()
	opaOnce.Do(func() {
		opaDir, opaErr = os.MkdirTemp("", "dirgate-opa-")
		if opaErr != nil {
			return
		}
		opaPath = filepath.Join(opaDir, "opa")
		start := time.Now()
		out, err := exec.Command("go", "build", "-o", opaPath, "github.com/open-policy-agent/opa").CombinedOutput()
		if err != nil {
			opaErr = fmt.Errorf("go build opa: %v\n%s", err, out)
			return
		}
		fmt.Fprintf(os.Stderr, "opaconfig tests: built the opa command in %s\n", time.Since(start).Round(time.Millisecond))
	})
	if opaErr != nil {
		t.Fatal(opaErr)
	}
	return opaPath
}

// signer is an RSA key pair: the private key signs bundles (opa build
// --signing-key, opa sign), the public key is the configuration's keys entry.
type signer struct {
	priv string // PEM file
	pub  string // PEM text
}

func newSigner(t *testing.T) signer {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "priv.pem")
	privPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
	if err := os.WriteFile(path, privPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return signer{priv: path, pub: string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))}
}

// writeTree writes files (path -> content) under a new directory.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, c := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// build makes a bundle with opa build, signed with s unless s is nil.
func build(t *testing.T, s *signer, revision string, files map[string]string) []byte {
	t.Helper()
	src := writeTree(t, files)
	out := filepath.Join(t.TempDir(), "bundle.tar.gz")
	args := []string{"build", "--bundle", ".", "--output", out, "--revision", revision}
	if s != nil {
		args = append(args, "--signing-key", s.priv, "--signing-alg", "RS256")
	}
	cmd := exec.Command(opaBin(t), args...)
	cmd.Dir = src
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("opa build: %v\n%s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// signedTarball signs files with opa sign (which checks no Rego beyond parsing)
// and packs them with the signature: a signed bundle opa build would refuse to
// make, as a CI pipeline with a broken build step could still publish.
func signedTarball(t *testing.T, s signer, files map[string]string) []byte {
	t.Helper()
	dir := writeTree(t, files)
	cmd := exec.Command(opaBin(t), "sign", "--signing-key", s.priv, "--bundle", ".", "--output-file-path", ".")
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("opa sign: %v\n%s", err, b)
	}
	sig, err := os.ReadFile(filepath.Join(dir, ".signatures.json"))
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]string{".signatures.json": string(sig)}
	for p, c := range files {
		all[p] = c
	}
	return tarball(t, all)
}

func tarball(t *testing.T, files map[string]string) []byte { return opabundle.Tarball(t, files) }

// untar reads a bundle's files, to tamper with one.
func untar(t *testing.T, b []byte) map[string]string {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		c, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimPrefix(h.Name, "/")] = string(c)
	}
}

// bundleServer is a static bundle service: each path serves its current bytes
// with an ETag, 304 on If-None-Match, or fails as the test says.
type bundleServer struct {
	*httptest.Server
	mu       sync.Mutex
	bundles  map[string][]byte
	mode     string // "", "500" or "garbage"
	requests []served
}

// served is one request: its path, and what it got.
type served struct {
	path   string
	status int
	etag   string
}

func newBundleServer(t *testing.T) *bundleServer {
	s := &bundleServer{bundles: map[string][]byte{}}
	s.Server = httptest.NewTLSServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// testCA is a PEM file of the certificate every httptest TLS server presents
// (one built-in certificate, for 127.0.0.1 among others): the tests' services
// are HTTPS, as dirgate requires by default, and trust it through tls.ca_cert.
var testCA = sync.OnceValues(func() (string, error) {
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	f, err := os.CreateTemp("", "dirgate-test-ca-*.pem")
	if err != nil {
		return "", err
	}
	defer f.Close()
	return f.Name(), pem.Encode(f, &pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
})

// service is an OPA service entry for url, trusting the tests' certificate.
func service(t *testing.T, url string) map[string]any {
	t.Helper()
	ca, err := testCA()
	if err != nil {
		t.Fatal(err)
	}
	return map[string]any{"url": url, "tls": map[string]any{"ca_cert": ca}}
}

func etagOf(b []byte) string {
	h := sha256.Sum256(b)
	return `"` + hex.EncodeToString(h[:8]) + `"`
}

func (s *bundleServer) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	record := func(status int, etag string) { s.requests = append(s.requests, served{r.URL.Path, status, etag}) }
	switch s.mode {
	case "500":
		record(500, "")
		http.Error(w, "down for maintenance", 500)
		return
	case "garbage":
		record(200, "garbage")
		w.Header().Set("ETag", `"garbage"`)
		fmt.Fprint(w, "<html>this is not a bundle</html>")
		return
	}
	b, ok := s.bundles[r.URL.Path]
	if !ok {
		record(404, "")
		http.NotFound(w, r)
		return
	}
	etag := etagOf(b)
	w.Header().Set("ETag", etag)
	if r.Header.Get("If-None-Match") == etag {
		record(304, etag)
		w.WriteHeader(http.StatusNotModified)
		return
	}
	record(200, etag)
	w.Header().Set("Content-Type", "application/gzip")
	w.Write(b)
}

func (s *bundleServer) put(path string, b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bundles[path] = b
}

func (s *bundleServer) setMode(m string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mode = m
}

// mark returns the number of requests served so far.
func (s *bundleServer) mark() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

func (s *bundleServer) since(n int) []served {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]served(nil), s.requests[n:]...)
}

// writeConfig writes an OPA configuration file (JSON, which OPA's loader takes
// as YAML does).
func writeConfig(t *testing.T, cfg map[string]any) string {
	t.Helper()
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "opa.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// waitFor polls cond until it holds; the bound only keeps a broken run from
// hanging (a poll of the bundles is 1 s in these tests).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting after 60 s for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}
