package opaconfig_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/dirgate/dirgate/opaconfig"
	"github.com/dirgate/dirgate/policy"
	"github.com/dirgate/dirgate/policy/candidate"
)

// ociRegistry is the part of an OCI registry OPA's OCI downloader reads: a
// manifest under a tag (HEAD and GET, also by digest) and blobs by digest. It
// serves one bundle as the one layer of the manifest.
type ociRegistry struct {
	*httptest.Server
	mu       sync.Mutex
	manifest []byte
	blobs    map[string][]byte
}

const ociManifestType = "application/vnd.oci.image.manifest.v1+json"

func newOCIRegistry(t *testing.T) *ociRegistry {
	r := &ociRegistry{blobs: map[string][]byte{}}
	r.Server = httptest.NewTLSServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.Close)
	return r
}

func ociDigest(b []byte) string {
	h := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(h[:])
}

// put makes bundle the layer of the manifest every tag names.
func (r *ociRegistry) put(t *testing.T, bundle []byte) {
	t.Helper()
	config := []byte("{}")
	desc := func(mediaType string, b []byte) map[string]any {
		return map[string]any{"mediaType": mediaType, "digest": ociDigest(b), "size": len(b)}
	}
	m, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     ociManifestType,
		"config":        desc("application/vnd.oci.image.config.v1+json", config),
		"layers":        []any{desc("application/vnd.oci.image.layer.v1.tar+gzip", bundle)},
	})
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.manifest = m
	r.blobs = map[string][]byte{ociDigest(config): config, ociDigest(bundle): bundle}
}

func (r *ociRegistry) serve(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case strings.Contains(req.URL.Path, "/manifests/") && r.manifest != nil:
		w.Header().Set("Content-Type", ociManifestType)
		w.Header().Set("Docker-Content-Digest", ociDigest(r.manifest))
		w.Header().Set("Content-Length", strconv.Itoa(len(r.manifest)))
		if req.Method == http.MethodGet {
			w.Write(r.manifest)
		}
	case strings.Contains(req.URL.Path, "/blobs/"):
		b, ok := r.blobs[req.URL.Path[strings.LastIndex(req.URL.Path, "/")+1:]]
		if !ok {
			http.NotFound(w, req)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.Write(b)
	default:
		http.NotFound(w, req)
	}
}

// ociConfig is bundleConfig with the bundle pulled from reg, a service of type
// oci.
func ociConfig(t *testing.T, reg *ociRegistry, s *signer) map[string]any {
	t.Helper()
	cfg := bundleConfig(t, reg.URL, s, t.TempDir())
	svc := service(t, reg.URL)
	svc["type"] = "oci"
	cfg["services"] = map[string]any{"acme": svc}
	u, err := url.Parse(reg.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg["bundles"].(map[string]any)["authz"].(map[string]any)["resource"] = u.Host + "/dirgate/authz:v1"
	return cfg
}

// TestOCIBundleBound: a bundle pulled from an OCI registry (a service of type
// oci) comes through the same bounded client as any other download: a signed
// layer of a thousand files of 100 KB, each under the per-file bound, whose total passes
// DIRGATE_OPA_BUNDLE_MAX_BYTES, is refused while it is pulled, and the peak
// memory stays far below its size. The same registry serving a small signed
// bundle brings it into force: the refusal is the size's.
func TestOCIBundleBound(t *testing.T) {
	s := newSigner(t)
	reg := newOCIRegistry(t)
	files := policyFiles("yes")
	files[".manifest"] = `{"revision": "oci"}`

	reg.put(t, paddedBundle(t, s, files, 2, 1000))
	g := openGateway(t, opaconfig.Config{File: writeConfig(t, ociConfig(t, reg, &s))}, policy.Config{}, candidate.Config{})
	if !allows(t, g.a) {
		t.Fatal("the small bundle pulled from the registry is not in force")
	}
	g.close()

	const total = 100_000_000
	b := paddedBundle(t, s, files, 1000, total/1000)
	reg.put(t, b)
	r := openInChild(t, writeConfig(t, ociConfig(t, reg, &s)))
	t.Logf("%d bytes compressed, %d MB decompressed: peak RSS %.1f MB (%.1f MB before Open); %s",
		len(b), total>>20, float64(r.PeakBytes)/(1<<20), float64(r.BaseBytes)/(1<<20), r.Err)
	if !strings.Contains(r.Err, "DIRGATE_OPA_BUNDLE_MAX_BYTES") {
		t.Errorf("Open = %q, want the layer refused over DIRGATE_OPA_BUNDLE_MAX_BYTES", r.Err)
	}
	if r.PeakBytes-r.BaseBytes > 60<<20 {
		t.Errorf("peak RSS %d MB over the %d MB before Open, want it far below the layer's %d MB",
			(r.PeakBytes-r.BaseBytes)>>20, r.BaseBytes>>20, total>>20)
	}
}
