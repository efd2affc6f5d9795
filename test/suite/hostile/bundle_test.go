package hostile

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dirgate/dirgate/test/harness/child"
	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/test/harness/opabundle"
)

// TestHostileBundleServer: the bundle service turns hostile after dirgate took a
// good signed bundle from it. It serves a bundle signed with the right key whose
// files hold 800 MB of zeros (800 KB compressed), the good policy altered to allow
// everything (its signature no longer matches), the same unsigned, and garbage.
// Each is refused and reported on /readyz, the answers stay those of the good
// policy, and dirgate's peak memory stays far below the bundle's size
// (docs/policy.md, "What the bundle service decides").
func TestHostileBundleServer(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	priv := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pub := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "..", "..", "rego", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	good := map[string]string{"authz.rego": read("authz.rego"), "data.json": read("data.json"), ".manifest": `{"revision": "good"}`}

	var mu sync.Mutex
	serving := opabundle.Signed(t, priv, "policy-ci", good, 0, 0)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		b := serving
		mu.Unlock()
		w.Write(b)
	}))
	t.Cleanup(srv.Close)
	serve := func(b []byte) {
		mu.Lock()
		serving = b
		mu.Unlock()
	}
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	keyYAML := "      " + strings.ReplaceAll(strings.TrimSpace(pub), "\n", "\n      ")
	cfg := fmt.Sprintf(`services:
  policies: {url: %q, tls: {ca_cert: %q}}
bundles:
  authz:
    service: policies
    resource: authz.tar.gz
    polling: {min_delay_seconds: 1, max_delay_seconds: 1}
    signing: {keyid: policy-ci}
keys:
  policy-ci:
    algorithm: RS256
    key: |
%s
persistence_directory: %q
`, srv.URL, ca, keyYAML, filepath.Join(dir, "opa"))
	cfgFile := filepath.Join(dir, "opa.yaml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p := child.Start(t, nil, "--opa-config-file", cfgFile, "--decision-log", "off")
	ctx := context.Background()
	list := func() []string {
		r := client.Do(ctx, "GET", child.ListURL(p.Base, fixture.MixedDN, ""), "demo-helpdesk")
		if r.Status != http.StatusOK {
			t.Fatalf("listing: %s", r)
		}
		return r.DNs()
	}
	want := list()

	allowAll := maps.Clone(good)
	allowAll["authz.rego"] = "package dirgate.authz\n\nallow := true\n"
	// The signed good bundle with its policy replaced, its .signatures.json kept.
	tampered := maps.Clone(good)
	tampered["authz.rego"] = allowAll["authz.rego"]
	tampered[".signatures.json"] = signatures(t, opabundle.Signed(t, priv, "policy-ci", good, 0, 0))
	for _, c := range []struct {
		name   string
		bundle []byte
	}{
		{"800 MB of zeros, signed", opabundle.Signed(t, priv, "policy-ci", good, 200, 4<<20)},
		{"altered after signing", opabundle.Tarball(t, tampered)},
		{"unsigned", opabundle.Tarball(t, allowAll)},
		{"garbage", []byte("<html>not a bundle</html>")},
	} {
		t.Run(c.name, func(t *testing.T) {
			serve(c.bundle)
			if err := os.WriteFile("/proc/"+strconv.Itoa(p.Pid)+"/clear_refs", []byte("5"), 0); err != nil {
				t.Fatal(err)
			}
			base := peak(t, p.Pid)
			child.Eventually(t, 30*time.Second, "the refusal on /readyz", func() (bool, string) {
				_, body, err := p.Ready(ctx)
				return err == nil && strings.Contains(body, "no new policy loads from bundles [authz]"), body
			})
			if got := list(); !slices.Equal(got, want) {
				t.Errorf("listing under the hostile bundle: %v, want %v", got, want)
			}
			if grew := peak(t, p.Pid) - base; grew > 200<<20 {
				t.Errorf("peak resident memory grew by %d MB", grew>>20)
			} else {
				t.Logf("%d bytes served; peak resident memory grew by %.1f MB", len(c.bundle), float64(grew)/(1<<20))
			}
			serve(opabundle.Signed(t, priv, "policy-ci", good, 0, 0))
			child.Eventually(t, 30*time.Second, "recovery", func() (bool, string) {
				_, body, err := p.Ready(ctx)
				return err == nil && !strings.Contains(body, "no new policy loads"), body
			})
		})
	}
}

// peak is the process's peak resident memory (VmHWM), in bytes.
func peak(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// signatures is a bundle's .signatures.json.
func signatures(t *testing.T, b []byte) string {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("no .signatures.json: %v", err)
		}
		if h.Name == "/.signatures.json" {
			c, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return string(c)
		}
	}
}
