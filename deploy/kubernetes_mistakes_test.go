package deploy

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestManifestsCrossReferences(t *testing.T) {
	b := loadRepoBundle(t)
	for _, e := range checkBundle(b) {
		t.Error(e)
	}
}

// TestChecksCatchMistakes alters the real manifests one mistake at a time and
// expects checkBundle to name it: a check that cannot fail proves nothing.
func TestChecksCatchMistakes(t *testing.T) {
	gateway := func(b *bundle) *corev1.Container { return &b.deployment(gatewayName).Spec.Template.Spec.Containers[0] }
	mount := func(b *bundle, name string) *corev1.VolumeMount {
		c := gateway(b)
		for i := range c.VolumeMounts {
			if c.VolumeMounts[i].Name == name {
				return &c.VolumeMounts[i]
			}
		}
		panic("no mount " + name)
	}
	envVar := func(b *bundle, name string) *corev1.EnvVar {
		c := gateway(b)
		for i := range c.Env {
			if c.Env[i].Name == name {
				return &c.Env[i]
			}
		}
		panic("no env " + name)
	}
	volume := func(b *bundle, name string) *corev1.Volume {
		vs := b.deployment(gatewayName).Spec.Template.Spec.Volumes
		for i := range vs {
			if vs[i].Name == name {
				return &vs[i]
			}
		}
		panic("no volume " + name)
	}
	tests := []struct {
		name   string
		mutate func(b *bundle)
		want   string
	}{
		// subPath pins the file's first version: reloads stop silently.
		{name: "subPath on tokens", want: "with subPath", mutate: func(b *bundle) {
			m := mount(b, "tokens")
			m.MountPath, m.SubPath = "/etc/dirgate/tokens/tokens.yaml", "tokens.yaml"
		}},
		{name: "probe path", want: "livenessProbe GETs /readyz", mutate: func(b *bundle) { gateway(b).LivenessProbe.HTTPGet.Path = "/readyz" }},
		{name: "readiness on healthz", want: "readinessProbe GETs /healthz", mutate: func(b *bundle) { gateway(b).ReadinessProbe.HTTPGet.Path = "/healthz" }},
		{name: "probe port", want: "probes port 9090", mutate: func(b *bundle) { gateway(b).LivenessProbe.HTTPGet.Port = intstr.FromInt32(9090) }},
		{name: "root", want: "runAsNonRoot", mutate: func(b *bundle) {
			b.deployment(gatewayName).Spec.Template.Spec.SecurityContext.RunAsNonRoot = nil
		}},
		{name: "writable root", want: "readOnlyRootFilesystem", mutate: func(b *bundle) {
			f := false
			gateway(b).SecurityContext.ReadOnlyRootFilesystem = &f
		}},
		{name: "capabilities", want: "drop ALL", mutate: func(b *bundle) { gateway(b).SecurityContext.Capabilities.Add = []corev1.Capability{"NET_ADMIN"} }},
		{name: "no limits", want: "no memory limit", mutate: func(b *bundle) { delete(gateway(b).Resources.Limits, corev1.ResourceMemory) }},
		{name: "missing secret", want: "Secret dirgate-tokenz does not exist", mutate: func(b *bundle) {
			volume(b, "tokens").Secret.SecretName = "dirgate-tokenz"
		}},
		{name: "file outside mounts", want: "is not in a mounted", mutate: func(b *bundle) { envVar(b, "DIRGATE_TOKENS_FILE").Value = "/etc/tokens.yaml" }},
		{name: "missing key", want: "has no key token.yaml", mutate: func(b *bundle) { envVar(b, "DIRGATE_TOKENS_FILE").Value = "/etc/dirgate/tokens/token.yaml" }},
		{name: "unknown setting", want: "DIRGATE_LDAP_PASWORD_FILE is not a dirgate setting", mutate: func(b *bundle) { envVar(b, "DIRGATE_LDAP_PASSWORD_FILE").Name = "DIRGATE_LDAP_PASWORD_FILE" }},
		{name: "set twice", want: "set both in env and in ConfigMap", mutate: func(b *bundle) {
			gateway(b).Env = append(gateway(b).Env, corev1.EnvVar{Name: "DIRGATE_LOG_LEVEL", Value: "debug"})
		}},
		{name: "hashed tokens", want: "carries a content hash", mutate: func(b *bundle) { b.generated["Secret/dirgate-tokens"].hashed = true }},
		{name: "replicas", want: "spec.replicas is set", mutate: func(b *bundle) {
			n := int32(3)
			b.deployment(gatewayName).Spec.Replicas = &n
		}},
		{name: "selector", want: "does not match the pod labels", mutate: func(b *bundle) {
			b.deployment(gatewayName).Spec.Selector.MatchLabels["extra"] = "x"
		}},
		{name: "service selector", want: "Service dirgate selects no pods", mutate: func(b *bundle) {
			for _, s := range all[*corev1.Service](b) {
				if s.Name == gatewayName {
					s.Spec.Selector = map[string]string{"app.kubernetes.io/name": "dirgat"}
				}
			}
		}},
		{name: "redis address", want: "DIRGATE_REDIS_ADDR redis:6379", mutate: func(b *bundle) {
			b.generated["ConfigMap/dirgate-settings"].data["DIRGATE_REDIS_ADDR"] = "redis:6379"
		}},
		{name: "redis without secret", want: "DIRGATE_REDIS_ADDR is set without DIRGATE_SECRET_FILE", mutate: func(b *bundle) {
			c := gateway(b)
			c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "DIRGATE_SECRET_FILE" })
		}},
		{name: "trusted proxies unset", want: "DIRGATE_TRUSTED_PROXIES is not set", mutate: func(b *bundle) {
			delete(b.generated["ConfigMap/dirgate-settings"].data, "DIRGATE_TRUSTED_PROXIES")
		}},
		{name: "trusted proxies everyone", want: "trusts every address", mutate: func(b *bundle) {
			b.generated["ConfigMap/dirgate-settings"].data["DIRGATE_TRUSTED_PROXIES"] = "0.0.0.0/0"
		}},
		{name: "grace period", want: "terminationGracePeriodSeconds", mutate: func(b *bundle) {
			g := int64(30)
			b.deployment(gatewayName).Spec.Template.Spec.TerminationGracePeriodSeconds = &g
		}},
		{name: "service links", want: "enableServiceLinks", mutate: func(b *bundle) {
			b.deployment(gatewayName).Spec.Template.Spec.EnableServiceLinks = nil
		}},
		{name: "hpa min", want: "at least 3 replicas", mutate: func(b *bundle) {
			n := int32(2)
			all[*autoscalingv2.HorizontalPodAutoscaler](b)[0].Spec.MinReplicas = &n
		}},
		{name: "image not rewritten", want: "is not rewritten", mutate: func(b *bundle) { gateway(b).Image = "dirgate-gateway" }},
		{name: "redis persistence", want: "--appendonly no", mutate: func(b *bundle) {
			b.deployment("dirgate-redis").Spec.Template.Spec.Containers[0].Args = []string{"--appendonly", "yes"}
		}},
		{name: "network policy port", want: "ingress port stats is not a port", mutate: func(b *bundle) {
			p := intstr.FromString("stats")
			for _, np := range all[*networkingv1.NetworkPolicy](b) {
				if np.Name == gatewayName {
					np.Spec.Ingress[0].Ports[0].Port = &p
				}
			}
		}},
		// With trusted proxies, the API port is for the ingress controller alone
		// (docs/auth.md, "Throttling").
		{name: "API from anywhere", want: "the API port is reachable from any source", mutate: func(b *bundle) {
			gatewayPolicy(b).Spec.Ingress[0].From = nil
		}},
		{name: "API from every namespace", want: "the API port is reachable from a peer without a namespace", mutate: func(b *bundle) {
			gatewayPolicy(b).Spec.Ingress[0].From[0].NamespaceSelector = &metav1.LabelSelector{}
		}},
		{name: "API from every address", want: "the API port is reachable from a peer without a namespace", mutate: func(b *bundle) {
			gatewayPolicy(b).Spec.Ingress[0].From = []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0"}}}
		}},
		{name: "every port from anywhere", want: "the API port is reachable from any source", mutate: func(b *bundle) {
			np := gatewayPolicy(b)
			np.Spec.Ingress = append(np.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{})
		}},
		// The metrics port is for Prometheus alone (docs/operations.md, "Metrics").
		{name: "metrics from anywhere", want: "the metrics port is reachable from any source", mutate: func(b *bundle) {
			gatewayPolicy(b).Spec.Ingress[1].From = nil
		}},
		{name: "metrics beside the API", want: "the metrics port is reachable from any source", mutate: func(b *bundle) {
			np := gatewayPolicy(b)
			p := intstr.FromString("metrics")
			np.Spec.Ingress[0].Ports = append(np.Spec.Ingress[0].Ports, networkingv1.NetworkPolicyPort{Port: &p})
			np.Spec.Ingress[0].From = nil
		}},
		{name: "metrics from every namespace", want: "without a namespace of its own", mutate: func(b *bundle) {
			gatewayPolicy(b).Spec.Ingress[1].From[0].NamespaceSelector = &metav1.LabelSelector{}
		}},
		{name: "no ingress policy", want: "no NetworkPolicy restricts ingress", mutate: func(b *bundle) {
			np := gatewayPolicy(b)
			np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
		}},
		{name: "metrics on the Service", want: "exposes the metrics port", mutate: func(b *bundle) {
			for _, s := range all[*corev1.Service](b) {
				if s.Name == gatewayName {
					s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "metrics", Port: 9464, TargetPort: intstr.FromString("metrics")})
				}
			}
		}},
		{name: "metrics on loopback", want: "DIRGATE_METRICS_LISTEN \"127.0.0.1:9464\"", mutate: func(b *bundle) {
			envVar(b, "DIRGATE_METRICS_LISTEN").Value = "127.0.0.1:9464"
		}},
		{name: "scrape annotation", want: "prometheus.io/port \"8080\"", mutate: func(b *bundle) {
			b.deployment(gatewayName).Spec.Template.Annotations["prometheus.io/port"] = "8080"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := loadRepoBundle(t)
			tt.mutate(b)
			errs := checkBundle(b)
			if !strings.Contains(strings.Join(errs, "\n"), tt.want) {
				t.Errorf("checkBundle found %q, want a problem containing %q", errs, tt.want)
			}
		})
	}
}

// TestPolicyCopiesMatchRego keeps kubernetes/policy/ equal to the policy the
// repository tests (rego/): kustomize cannot read files outside its directory.
func TestPolicyCopiesMatchRego(t *testing.T) {
	want := map[string][]byte{}
	src, err := filepath.Glob(filepath.Join(repoRoot, "rego", "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range src {
		name := filepath.Base(f)
		if strings.HasSuffix(name, "_test.rego") || !strings.HasSuffix(name, ".rego") && name != "data.json" && name != "data.yaml" {
			continue // the gateway loads neither tests nor Go files
		}
		if want[name], err = os.ReadFile(f); err != nil {
			t.Fatal(err)
		}
	}
	if len(want) == 0 {
		t.Fatal("rego/ holds no policy")
	}
	b := loadRepoBundle(t)
	g := b.generated["ConfigMap/dirgate-policy"]
	if g == nil {
		t.Fatal("no dirgate-policy ConfigMap generator")
	}
	for name, data := range want {
		if got, ok := g.data[name]; !ok || !bytes.Equal([]byte(got), data) {
			t.Errorf("kubernetes/policy/%s differs from rego/%s: cp rego/%s deploy/kubernetes/policy/ and add it to the dirgate-policy generator", name, name, name)
		}
	}
	for name := range g.data {
		if want[name] == nil {
			t.Errorf("dirgate-policy has %s, which rego/ does not", name)
		}
	}
	onDisk, _ := filepath.Glob(filepath.Join(kubeDir, "policy", "*"))
	if len(onDisk) != len(g.data) {
		t.Errorf("kubernetes/policy holds %d files, the generator lists %d", len(onDisk), len(g.data))
	}
}

// TestSiteFilesIgnored: the secrets an operator writes under kubernetes/site must
// never be committed; only their templates are.
func TestSiteFilesIgnored(t *testing.T) {
	b := loadRepoBundle(t)
	var site []string
	for _, g := range b.generated {
		for _, src := range g.sources {
			if strings.HasPrefix(src, "site/") {
				site = append(site, src)
				if _, err := os.Stat(filepath.Join(kubeDir, src+".example")); err != nil {
					t.Errorf("%s has no template %s.example", src, src)
				}
			}
		}
	}
	if len(site) < 3 {
		t.Fatalf("site files %v: want the LDAP password, CA and tokens", site)
	}
	for _, src := range site {
		p := filepath.ToSlash(filepath.Join("deploy", kubeDir, src))
		cmd := exec.Command("git", "check-ignore", "--no-index", "-q", p)
		cmd.Dir = repoRoot
		if err := cmd.Run(); err != nil {
			t.Errorf("%s is not ignored by git (git check-ignore: %v): a real secret could be committed", p, err)
		}
		if err := exec.Command("git", "-C", repoRoot, "check-ignore", "--no-index", "-q", p+".example").Run(); err == nil {
			t.Errorf("%s.example is ignored by git: the template would be lost", p)
		}
	}
}

// gatewayPolicy is the base NetworkPolicy of the gateway pods.
func gatewayPolicy(b *bundle) *networkingv1.NetworkPolicy {
	for _, np := range all[*networkingv1.NetworkPolicy](b) {
		if np.Name == gatewayName {
			return np
		}
	}
	panic("no NetworkPolicy " + gatewayName)
}
