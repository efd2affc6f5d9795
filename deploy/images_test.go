package deploy

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// unpinned are the image references of deploy/ not yet pinned by digest, each
// with where it is named. A tag can be moved to other content by whoever controls
// the repository it names; a digest cannot. Pin each as IMAGE:TAG@sha256:<digest of
// its multi-platform index> (`crane digest IMAGE:TAG`, or `docker buildx imagetools
// inspect IMAGE:TAG`), then delete its entry: TestImagesPinnedByDigest fails on an
// entry that no longer names an unpinned reference, so the list only shrinks.
var unpinned = map[string]string{
	"golang:1.26": "Dockerfile (builder)",
	"gcr.io/distroless/static-debian12:nonroot":     "Dockerfile (final stage)",
	"debian:bookworm-slim":                          "samba/Dockerfile",
	"redis:7.4-alpine":                              "compose.yaml (redis, secret), kubernetes/redis.yaml",
	"otel/opentelemetry-collector:0.128.0":          "compose.yaml (otel-collector)",
	"registry.example.com/dirgate:0.0.0-replace-me": "kubernetes/kustomization.yaml images: the site's own push of deploy/Dockerfile; set digest: there",
}

// digestRef is a reference pinned to content: a sha256 digest at its end.
var digestRef = regexp.MustCompile(`@sha256:[0-9a-f]{64}$`)

// imageRef is an image reference and the file (and place) that names it.
type imageRef struct{ ref, where string }

// imageRefs returns every image deploy/ pulls: the FROM lines of its Dockerfiles
// (not earlier stages, not scratch), compose's images of services it does not
// build, the images of every container in the Kubernetes manifests and components,
// and what kustomization images: entries rewrite them to.
func imageRefs() ([]imageRef, error) {
	var refs []imageRef
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		base := filepath.Base(p)
		switch {
		case base == "Dockerfile" || strings.HasPrefix(base, "Dockerfile.") && !strings.HasSuffix(base, ".dockerignore"):
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			stages, err := parseDockerfile(string(data))
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			var names []string
			for _, s := range stages {
				if s.image != "scratch" && !slices.Contains(names, s.image) {
					refs = append(refs, imageRef{s.image, p})
				}
				names = append(names, s.name)
			}
		case p == "compose.yaml":
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			cp, err := loadCompose(data)
			if err != nil {
				return err
			}
			for name, s := range cp.Services {
				if s.Build == nil {
					refs = append(refs, imageRef{s.Image, p + " " + name})
				}
			}
		case strings.HasPrefix(p, "kubernetes"+string(filepath.Separator)) && strings.HasSuffix(p, ".yaml"):
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(data), -1) {
				var v any
				if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
					return fmt.Errorf("%s: %w", p, err)
				}
				refs = append(refs, manifestImages(v, p)...)
			}
		}
		return nil
	})
	return refs, err
}

// manifestImages returns the images of the containers in a decoded manifest (any
// map with a name and an image), and the references kustomization images: entries
// set.
func manifestImages(v any, where string) []imageRef {
	var out []imageRef
	switch v := v.(type) {
	case map[string]any:
		if filepath.Base(where) == "kustomization.yaml" {
			if list, ok := v["images"].([]any); ok {
				for _, e := range list {
					b, _ := json.Marshal(e)
					var im kustImage
					_ = json.Unmarshal(b, &im)
					ref := im.NewName
					if ref == "" {
						ref = im.Name
					}
					if im.Digest != "" {
						ref += "@" + im.Digest
					} else if im.NewTag != "" {
						ref += ":" + im.NewTag
					}
					out = append(out, imageRef{ref, where + " images"})
				}
			}
		}
		img, hasImage := v["image"].(string)
		if _, hasName := v["name"].(string); hasImage && hasName {
			out = append(out, imageRef{img, where})
		}
		for _, c := range v {
			out = append(out, manifestImages(c, where)...)
		}
	case []any:
		for _, c := range v {
			out = append(out, manifestImages(c, where)...)
		}
	}
	return out
}

// checkPinned reports the references neither pinned by digest nor listed in
// listed, and the entries of listed that name no unpinned reference. An image a
// kustomization images: entry rewrites (its name) is judged by what it becomes.
func checkPinned(refs []imageRef, listed map[string]string) []string {
	var errs []string
	seen := map[string]bool{}
	for _, r := range refs {
		if digestRef.MatchString(r.ref) {
			continue
		}
		if !strings.HasSuffix(r.where, " images") && isRewritten(r) {
			continue
		}
		if _, ok := listed[r.ref]; ok {
			seen[r.ref] = true
			continue
		}
		errs = append(errs, fmt.Sprintf("%s: image %s is not pinned by digest (IMAGE:TAG@sha256:…)", r.where, r.ref))
	}
	for ref := range listed {
		if !seen[ref] {
			errs = append(errs, fmt.Sprintf("unpinned lists %s, which deploy/ no longer names without a digest: delete the entry", ref))
		}
	}
	slices.Sort(errs)
	return errs
}

// isRewritten reports whether r is a container image of the manifests that
// kubernetes/kustomization.yaml rewrites (images: name), so that it is never
// pulled as written: what it becomes is checked instead.
func isRewritten(r imageRef) bool {
	kust, err := os.ReadFile(filepath.Join("kubernetes", "kustomization.yaml"))
	if err != nil || !strings.HasPrefix(r.where, "kubernetes"+string(filepath.Separator)) {
		return false
	}
	var k struct {
		Images []kustImage `json:"images"`
	}
	if err := yaml.Unmarshal(kust, &k); err != nil {
		return false
	}
	return slices.ContainsFunc(k.Images, func(im kustImage) bool { return im.Name == r.ref })
}

// TestImagesPinnedByDigest: every image deploy/ pulls is pinned by digest, or
// listed in unpinned until it is.
func TestImagesPinnedByDigest(t *testing.T) {
	refs, err := imageRefs()
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) < len(unpinned) {
		t.Fatalf("found %d image references: %v", len(refs), refs)
	}
	for _, e := range checkPinned(refs, unpinned) {
		t.Error(e)
	}
}

// TestImagesPinnedChecksCatchMistakes: a new unpinned image, a tag changed under
// a listed entry, and a stale entry are each reported; a digest passes.
func TestImagesPinnedChecksCatchMistakes(t *testing.T) {
	refs, err := imageRefs()
	if err != nil {
		t.Fatal(err)
	}
	const digest = "@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	replace := func(old, new string) []imageRef {
		out := slices.Clone(refs)
		n := 0
		for i := range out {
			if out[i].ref == old {
				out[i].ref, n = new, n+1
			}
		}
		if n == 0 {
			t.Fatalf("no image %s any more: update this case", old)
		}
		return out
	}
	tests := []struct {
		name string
		refs []imageRef
		want string // "" for no problem
	}{
		{name: "as they are", refs: refs},
		{name: "new tag", refs: replace("otel/opentelemetry-collector:0.128.0", "otel/opentelemetry-collector:0.129.0"),
			want: "image otel/opentelemetry-collector:0.129.0 is not pinned"},
		{name: "new image", refs: append(slices.Clone(refs), imageRef{"busybox:1.37", "compose.yaml x"}), want: "image busybox:1.37 is not pinned"},
		// Pinned: the entry is stale and must go, so the list cannot outlive the pins.
		{name: "pinned", refs: replace("debian:bookworm-slim", "debian:bookworm-slim"+digest), want: "no longer names without a digest"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := strings.Join(checkPinned(tt.refs, unpinned), "\n")
			if tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
