package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
)

// copyTree copies the regular files below src into dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestKubectlKustomizeAgrees builds the kustomization with real kustomize (kubectl
// kustomize, offline) where kubectl is installed, and compares its output with the
// model the other tests check: the same objects, every one decoding strictly, the
// generated names hashed exactly where the model says, the image rewritten.
func TestKubectlKustomizeAgrees(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not installed: the kustomize model is compared with real kustomize only where it is")
	}
	b := loadRepoBundle(t)
	dir := t.TempDir()
	copyTree(t, kubeDir, dir)
	for _, rel := range b.examples {
		data, err := os.ReadFile(filepath.Join(dir, rel+".example"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, rel), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command(kubectl, "kustomize", dir).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize: %v", err)
	}
	docs, err := splitDocuments(out)
	if err != nil {
		t.Fatal(err)
	}

	hash := regexp.MustCompile(`-[a-z0-9]{10}$`)
	var got, want []string
	for i, doc := range docs {
		obj, err := decodeManifest(doc)
		if err != nil {
			t.Errorf("kustomize output document %d: %v", i+1, err)
			continue
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			t.Fatal(err)
		}
		kind := reflect.TypeOf(obj).Elem().Name()
		name := m.GetName()
		if g := b.generated[kind+"/"+hash.ReplaceAllString(name, "")]; g != nil && g.hashed {
			name = hash.ReplaceAllString(name, "") + "-<hash>"
		}
		got = append(got, kind+"/"+name)
		if d, ok := obj.(*appsv1.Deployment); ok && d.Name == gatewayName {
			img := d.Spec.Template.Spec.Containers[0].Image
			if !slices.ContainsFunc(b.kust.Images, func(im kustImage) bool { return img == im.NewName+":"+im.NewTag }) {
				t.Errorf("kustomize set the gateway image to %s, not the images: entry", img)
			}
		}
	}
	for _, o := range b.objects {
		m, _ := meta.Accessor(o.obj)
		want = append(want, reflect.TypeOf(o.obj).Elem().Name()+"/"+m.GetName())
	}
	for _, g := range b.generated {
		name := g.name
		if g.hashed {
			name += "-<hash>"
		}
		want = append(want, g.kind+"/"+name)
	}
	slices.Sort(got)
	slices.Sort(want)
	t.Logf("kubectl kustomize built %d objects: %v", len(got), got)
	if !slices.Equal(got, want) {
		t.Errorf("kubectl kustomize builds\n  %s\nthe model has\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// buildWithComponent builds, through real kustomize (kubectl kustomize, offline), an
// overlay of the manifests (their examples filled in) with the component named, and
// returns its documents.
func buildWithComponent(t *testing.T, kubectl, component string) [][]byte {
	t.Helper()
	b := loadRepoBundle(t)
	root := t.TempDir()
	base := filepath.Join(root, "kubernetes")
	copyTree(t, kubeDir, base)
	for _, rel := range b.examples {
		data, err := os.ReadFile(filepath.Join(base, rel+".example"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(base, rel), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The component's own site files (credentials), from their templates too.
	site := filepath.Join(base, "components", component, "site")
	templates, _ := filepath.Glob(filepath.Join(site, "*.example"))
	for _, tpl := range templates {
		data, err := os.ReadFile(tpl)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(strings.TrimSuffix(tpl, ".example"), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	overlay := filepath.Join(root, "overlay")
	if err := os.Mkdir(overlay, 0o755); err != nil {
		t.Fatal(err)
	}
	kust := "resources:\n  - ../kubernetes\ncomponents:\n  - ../kubernetes/components/" + component + "\n"
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kust), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(kubectl, "kustomize", overlay).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize: %v", err)
	}
	docs, err := splitDocuments(out)
	if err != nil {
		t.Fatal(err)
	}
	return docs
}
