package deploy

import (
	"net/url"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/yaml"

	"github.com/dirgate/dirgate/opaconfig"
)

const opaComponent = "kubernetes/components/opa-bundles"

// TestOPABundlesConfig: the component's OPA configuration is one dirgate starts
// with by default (its bundles signed, its services HTTPS), every key of it acted
// on.
func TestOPABundlesConfig(t *testing.T) {
	ignored, err := opaconfig.CheckFile(filepath.Join(opaComponent, "opa.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ignored) > 0 {
		t.Errorf("opa.yaml has keys dirgate ignores: %v", ignored)
	}
}

// TestOPABundlesComponentBuilds builds an overlay with the component through real
// kustomize, where kubectl is installed, and checks the Deployment it makes: the
// OPA configuration file mounted where DIRGATE_OPA_CONFIG_FILE says, no policy
// directory left (the two are exclusive), the persistence directory writable, and
// egress open to the services' ports.
func TestOPABundlesComponentBuilds(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not installed: the component is built with real kustomize only where it is")
	}
	docs := buildWithComponent(t, kubectl, "opa-bundles")
	var dep *appsv1.Deployment
	configMaps := map[string]*corev1.ConfigMap{}
	secrets := map[string]*corev1.Secret{}
	var egressPorts []int32
	for _, doc := range docs {
		var meta struct{ Kind string }
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatal(err)
		}
		switch meta.Kind {
		case "Deployment":
			d := &appsv1.Deployment{}
			if err := yaml.UnmarshalStrict(doc, d); err != nil {
				t.Fatal(err)
			}
			if d.Name == "dirgate" {
				dep = d
			}
		case "Secret":
			sec := &corev1.Secret{}
			if err := yaml.UnmarshalStrict(doc, sec); err != nil {
				t.Fatal(err)
			}
			secrets[sec.Name] = sec
		case "ConfigMap":
			cm := &corev1.ConfigMap{}
			if err := yaml.UnmarshalStrict(doc, cm); err != nil {
				t.Fatal(err)
			}
			configMaps[cm.Name] = cm
		case "NetworkPolicy":
			np := &networkingv1.NetworkPolicy{}
			if err := yaml.UnmarshalStrict(doc, np); err != nil {
				t.Fatal(err)
			}
			for _, e := range np.Spec.Egress {
				for _, p := range e.Ports {
					egressPorts = append(egressPorts, p.Port.IntVal)
				}
			}
		}
	}
	if dep == nil {
		t.Fatal("no dirgate Deployment")
	}
	for name := range configMaps {
		if name == "dirgate-policy" {
			t.Error("the dirgate-policy ConfigMap is still generated")
		}
	}
	c := dep.Spec.Template.Spec.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	if _, ok := env["DIRGATE_POLICY_DIR"]; ok {
		t.Error("DIRGATE_POLICY_DIR is still set: it excludes DIRGATE_OPA_CONFIG_FILE")
	}
	file := env["DIRGATE_OPA_CONFIG_FILE"]
	volumes := map[string]corev1.Volume{}
	for _, v := range dep.Spec.Template.Spec.Volumes {
		volumes[v.Name] = v
	}
	if _, ok := volumes["policy"]; ok {
		t.Error("the policy volume is still mounted")
	}
	mounted := func(dir string) (corev1.VolumeMount, bool) {
		for _, m := range c.VolumeMounts {
			if m.MountPath == dir {
				return m, true
			}
		}
		return corev1.VolumeMount{}, false
	}
	m, ok := mounted(path.Dir(file))
	if !ok || volumes[m.Name].ConfigMap == nil {
		t.Fatalf("DIRGATE_OPA_CONFIG_FILE=%q is not on a mounted ConfigMap", file)
	}
	var cm *corev1.ConfigMap
	for name, x := range configMaps {
		if strings.HasPrefix(name, "dirgate-opa-") && volumes[m.Name].ConfigMap.Name == name {
			cm = x
		}
	}
	if cm == nil {
		t.Fatalf("the mounted ConfigMap %s is not the generated dirgate-opa", volumes[m.Name].ConfigMap.Name)
	}
	raw, ok := cm.Data[path.Base(file)]
	if !ok {
		t.Fatalf("ConfigMap %s has no %s", cm.Name, path.Base(file))
	}
	var cfg struct {
		Services map[string]struct {
			URL         string
			Credentials map[string]map[string]any
		}
		PersistenceDirectory string `json:"persistence_directory"`
	}
	if err := yaml.Unmarshal([]byte(raw), &cfg); err != nil {
		t.Fatal(err)
	}
	// The ConfigMap holds no credential: each service's token is a file of a
	// mounted Secret, named by token_path.
	for name, s := range cfg.Services {
		bearer := s.Credentials["bearer"]
		if len(s.Credentials) != 1 || bearer == nil || bearer["token"] != nil {
			t.Errorf("service %s: credentials %v, want bearer.token_path alone", name, s.Credentials)
			continue
		}
		p, _ := bearer["token_path"].(string)
		tm, ok := mounted(path.Dir(p))
		sv := volumes[tm.Name].Secret
		if !ok || !tm.ReadOnly || sv == nil {
			t.Errorf("service %s: token_path %q is not on a read-only Secret volume", name, p)
			continue
		}
		if sec := secrets[sv.SecretName]; sec == nil || !strings.HasPrefix(sv.SecretName, "dirgate-opa-credentials-") {
			t.Errorf("service %s: the mounted Secret %s is not the generated dirgate-opa-credentials", name, sv.SecretName)
		} else if _, ok := sec.Data[path.Base(p)]; !ok {
			t.Errorf("service %s: Secret %s has no %s", name, sv.SecretName, path.Base(p))
		}
	}
	for _, key := range []string{"token:", "password:", "client_secret:", "private_key:"} {
		if strings.Contains(raw, key) {
			t.Errorf("opa.yaml in a ConfigMap holds %s: credentials belong in the Secret", key)
		}
	}
	if pm, ok := mounted(cfg.PersistenceDirectory); !ok || pm.ReadOnly || volumes[pm.Name].EmptyDir == nil {
		t.Errorf("persistence_directory %s is not a writable emptyDir (the root file system is read-only)", cfg.PersistenceDirectory)
	}
	for name, s := range cfg.Services {
		u, err := url.Parse(s.URL)
		if err != nil {
			t.Fatal(err)
		}
		port := u.Port()
		if port == "" {
			port = map[string]string{"https": "443", "http": "80"}[u.Scheme]
		}
		found := false
		for _, p := range egressPorts {
			found = found || port == strconv.Itoa(int(p))
		}
		if !found {
			t.Errorf("service %s (%s): port %s is not open to egress", name, s.URL, port)
		}
	}
}
