package deploy

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The gateway's names in the manifests.
const (
	gatewayName      = "dirgate"
	gatewayContainer = "dirgate"
)

// podHelperEnv are variables the gateway's pod sets only to compose another one.
var podHelperEnv = map[string]bool{"POD_NAME": true, "POD_NAMESPACE": true}

func all[T any](b *bundle) []T {
	var out []T
	for _, o := range b.objects {
		if v, ok := o.obj.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

func (b *bundle) deployment(name string) *appsv1.Deployment {
	for _, d := range all[*appsv1.Deployment](b) {
		if d.Name == name {
			return d
		}
	}
	return nil
}

// lookup returns the data keys of a ConfigMap or Secret the bundle generates or
// defines, and whether kustomize renames it with a content hash.
func (b *bundle) lookup(kind, name string) (keys map[string]bool, hashed, ok bool) {
	if g := b.generated[kind+"/"+name]; g != nil {
		keys = map[string]bool{}
		for k := range g.data {
			keys[k] = true
		}
		return keys, g.hashed, true
	}
	for _, o := range b.objects {
		keys = map[string]bool{}
		switch v := o.obj.(type) {
		case *corev1.ConfigMap:
			if kind == "ConfigMap" && v.Name == name {
				for k := range v.Data {
					keys[k] = true
				}
				return keys, false, true
			}
		case *corev1.Secret:
			if kind == "Secret" && v.Name == name {
				for k := range v.Data {
					keys[k] = true
				}
				for k := range v.StringData {
					keys[k] = true
				}
				return keys, false, true
			}
		}
	}
	return nil, false, false
}

// selects reports whether sel matches the pod template labels of some Deployment.
func (b *bundle) selects(sel *metav1.LabelSelector) []*appsv1.Deployment {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil || s.Empty() {
		return nil
	}
	var out []*appsv1.Deployment
	for _, d := range all[*appsv1.Deployment](b) {
		if s.Matches(labels.Set(d.Spec.Template.Labels)) {
			out = append(out, d)
		}
	}
	return out
}

// containerPort resolves a probe's or Service's port (number or name) in c.
func containerPort(c corev1.Container, p intstr.IntOrString) (int32, bool) {
	for _, cp := range c.Ports {
		if p.Type == intstr.String && cp.Name == p.StrVal || p.Type == intstr.Int && cp.ContainerPort == p.IntVal {
			return cp.ContainerPort, true
		}
	}
	return 0, false
}

func envValue(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// checkPod checks what every pod of the deployment must satisfy: non-root, read-only,
// no privileges, bounded resources, probes on real ports, and resolvable volumes
// mounted without subPath.
func checkPod(b *bundle, d *appsv1.Deployment, bad func(string, ...any)) {
	spec := d.Spec.Template.Spec
	if s, err := metav1.LabelSelectorAsSelector(d.Spec.Selector); err != nil || !s.Matches(labels.Set(d.Spec.Template.Labels)) {
		bad("selector %v does not match the pod labels %v", d.Spec.Selector, d.Spec.Template.Labels)
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		bad("automountServiceAccountToken must be false: the pod never calls the Kubernetes API")
	}
	if spec.EnableServiceLinks == nil || *spec.EnableServiceLinks {
		bad("enableServiceLinks must be false: service links inject DIRGATE_* variables named after Services")
	}
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		bad("pod securityContext must set runAsNonRoot: true and a non-zero runAsUser")
	}
	if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		bad("pod securityContext must set seccompProfile RuntimeDefault")
	}
	mounted := map[string]bool{}
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	for _, c := range spec.Containers {
		sc := c.SecurityContext
		switch {
		case sc == nil:
			bad("container %s has no securityContext", c.Name)
		case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
			bad("container %s: readOnlyRootFilesystem must be true", c.Name)
		case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
			bad("container %s: allowPrivilegeEscalation must be false", c.Name)
		case sc.Privileged != nil && *sc.Privileged:
			bad("container %s is privileged", c.Name)
		case sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0:
			bad("container %s must drop ALL capabilities and add none", c.Name)
		}
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if _, ok := c.Resources.Requests[r]; !ok {
				bad("container %s has no %s request", c.Name, r)
			}
			if _, ok := c.Resources.Limits[r]; !ok {
				bad("container %s has no %s limit", c.Name, r)
			}
		}
		if c.LivenessProbe == nil || c.ReadinessProbe == nil {
			bad("container %s needs liveness and readiness probes", c.Name)
		}
		for _, p := range []*corev1.Probe{c.StartupProbe, c.LivenessProbe, c.ReadinessProbe} {
			if p == nil {
				continue
			}
			if p.HTTPGet != nil {
				if _, ok := containerPort(c, p.HTTPGet.Port); !ok {
					bad("container %s: probe port %s is not a container port", c.Name, p.HTTPGet.Port.String())
				}
			}
			if p.TCPSocket != nil {
				if _, ok := containerPort(c, p.TCPSocket.Port); !ok {
					bad("container %s: probe port %s is not a container port", c.Name, p.TCPSocket.Port.String())
				}
			}
		}
		for _, m := range c.VolumeMounts {
			v, ok := volumes[m.Name]
			if !ok {
				bad("container %s mounts %s, which is no volume", c.Name, m.Name)
				continue
			}
			mounted[m.Name] = true
			if (v.Secret != nil || v.ConfigMap != nil || v.Projected != nil) && (m.SubPath != "" || m.SubPathExpr != "") {
				bad("container %s mounts %s with subPath: it would never see updates (the ..data swap)", c.Name, m.Name)
			}
		}
		for _, ef := range c.EnvFrom {
			if ef.ConfigMapRef != nil {
				if _, _, ok := b.lookup("ConfigMap", ef.ConfigMapRef.Name); !ok {
					bad("container %s: envFrom ConfigMap %s does not exist", c.Name, ef.ConfigMapRef.Name)
				}
			}
			if ef.SecretRef != nil {
				if _, _, ok := b.lookup("Secret", ef.SecretRef.Name); !ok {
					bad("container %s: envFrom Secret %s does not exist", c.Name, ef.SecretRef.Name)
				}
			}
		}
	}
	for _, v := range spec.Volumes {
		if !mounted[v.Name] {
			bad("volume %s is mounted by no container", v.Name)
		}
		kind, name, items := "", "", []corev1.KeyToPath(nil)
		switch {
		case v.Secret != nil:
			kind, name, items = "Secret", v.Secret.SecretName, v.Secret.Items
		case v.ConfigMap != nil:
			kind, name, items = "ConfigMap", v.ConfigMap.Name, v.ConfigMap.Items
		default:
			continue
		}
		keys, _, ok := b.lookup(kind, name)
		if !ok {
			bad("volume %s: %s %s does not exist", v.Name, kind, name)
		}
		for _, it := range items {
			if !keys[it.Key] {
				bad("volume %s: %s %s has no key %s", v.Name, kind, name, it.Key)
			}
		}
	}
}

// checkGateway checks the dirgate Deployment against the settings it passes and the
// objects around it.
func checkGateway(b *bundle, d *appsv1.Deployment, bad func(string, ...any)) {
	readme, err := readmeOnce()
	if err != nil {
		bad("%v", err)
		return
	}
	spec := d.Spec.Template.Spec
	var c *corev1.Container
	for i := range spec.Containers {
		if spec.Containers[i].Name == gatewayContainer {
			c = &spec.Containers[i]
		}
	}
	if c == nil {
		bad("no container %s", gatewayContainer)
		return
	}
	if d.Spec.Replicas != nil {
		bad("spec.replicas is set: the HorizontalPodAutoscaler owns the count, and every apply would reset it")
	}

	// Settings: the container's env and the ConfigMaps it takes env from.
	env := map[string]string{}
	for _, e := range c.Env {
		if err := checkSettingName(readme, e.Name, podHelperEnv); err != nil {
			bad("env: %v", err)
		}
		env[e.Name] = e.Value
	}
	for _, ef := range c.EnvFrom {
		if ef.ConfigMapRef == nil {
			continue
		}
		if g := b.generated["ConfigMap/"+ef.ConfigMapRef.Name]; g != nil {
			for k, v := range g.data {
				if err := checkSettingName(readme, k, nil); err != nil {
					bad("ConfigMap %s: %v", g.name, err)
				}
				if _, dup := env[k]; dup {
					bad("%s is set both in env and in ConfigMap %s: env silently wins", k, g.name)
				}
				env[k] = v
			}
		}
	}

	host, port, err := net.SplitHostPort(env["DIRGATE_LISTEN"])
	if err != nil || host != "0.0.0.0" {
		bad("DIRGATE_LISTEN %q: want 0.0.0.0:PORT", env["DIRGATE_LISTEN"])
	}
	listenPort, _ := strconv.Atoi(port)
	for _, pr := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"startupProbe", c.StartupProbe, "/healthz"}, {"livenessProbe", c.LivenessProbe, "/healthz"}, {"readinessProbe", c.ReadinessProbe, "/readyz"}} {
		if pr.probe == nil || pr.probe.HTTPGet == nil {
			bad("%s must be an HTTP GET of %s", pr.name, pr.path)
			continue
		}
		if pr.probe.HTTPGet.Path != pr.path {
			bad("%s GETs %s, want %s", pr.name, pr.probe.HTTPGet.Path, pr.path)
		}
		if p, _ := containerPort(*c, pr.probe.HTTPGet.Port); int(p) != listenPort {
			bad("%s probes port %s, but dirgate listens on %d", pr.name, pr.probe.HTTPGet.Port.String(), listenPort)
		}
	}

	// File and directory settings must point into mounted Secrets and ConfigMaps,
	// at keys that exist.
	mounts := map[string]corev1.Volume{}
	for _, m := range c.VolumeMounts {
		for _, v := range spec.Volumes {
			if v.Name == m.Name {
				mounts[path.Clean(m.MountPath)] = v
			}
		}
	}
	source := func(v corev1.Volume) (kind, name string) {
		if v.Secret != nil {
			return "Secret", v.Secret.SecretName
		}
		if v.ConfigMap != nil {
			return "ConfigMap", v.ConfigMap.Name
		}
		return "", ""
	}
	for k, val := range env {
		var dir, key string
		switch {
		case strings.HasSuffix(k, "_FILE"):
			dir, key = path.Dir(val), path.Base(val)
		case strings.HasSuffix(k, "_DIR"):
			dir = path.Clean(val)
		default:
			continue
		}
		v, ok := mounts[dir]
		kind, name := source(v)
		if !ok || kind == "" {
			bad("%s=%s is not in a mounted Secret or ConfigMap directory", k, val)
			continue
		}
		keys, hashed, _ := b.lookup(kind, name)
		if key != "" && !keys[key] {
			bad("%s=%s: %s %s has no key %s", k, val, kind, name, key)
		}
		// Files dirgate reloads must be updated in place, under a fixed name.
		if (k == "DIRGATE_TOKENS_FILE" || k == "DIRGATE_POLICY_DIR") && hashed {
			bad("%s comes from %s %s, whose name carries a content hash: edits would roll the pods instead of reloading (set disableNameSuffixHash)", k, kind, name)
		}
	}
	for _, k := range []string{"DIRGATE_TOKENS_FILE", "DIRGATE_POLICY_DIR", "DIRGATE_LDAP_PASSWORD_FILE", "DIRGATE_UPSTREAM"} {
		if env[k] == "" {
			bad("%s is not set", k)
		}
	}

	// The Redis address must be a Service of the bundle that selects Redis pods
	// on that port.
	if rhost, rport, err := net.SplitHostPort(env["DIRGATE_REDIS_ADDR"]); err == nil {
		found := false
		for _, s := range all[*corev1.Service](b) {
			for _, p := range s.Spec.Ports {
				found = found || s.Name == rhost && strconv.Itoa(int(p.Port)) == rport &&
					len(b.selects(&metav1.LabelSelector{MatchLabels: s.Spec.Selector})) > 0
			}
		}
		if !found {
			bad("DIRGATE_REDIS_ADDR %s is no Service port of the bundle selecting pods", env["DIRGATE_REDIS_ADDR"])
		}
	} else {
		bad("DIRGATE_REDIS_ADDR %q: want host:port", env["DIRGATE_REDIS_ADDR"])
	}

	shutdown := 30 * time.Second // dirgate's default
	if s, ok := env["DIRGATE_SHUTDOWN_TIMEOUT"]; ok {
		shutdown, _ = time.ParseDuration(s)
	}
	grace := time.Duration(0)
	if spec.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*spec.TerminationGracePeriodSeconds) * time.Second
	}
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
		grace -= time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	}
	if grace <= shutdown {
		bad("terminationGracePeriodSeconds leaves %v after preStop, not more than the shutdown timeout %v: requests would be cut", grace, shutdown)
	}

	covered := false
	for _, im := range b.kust.Images {
		covered = covered || im.Name == c.Image && im.NewName != ""
	}
	if !covered {
		bad("image %q is not rewritten by kustomization.yaml's images: it would be pulled from Docker Hub", c.Image)
	}
}

// checkBundle runs every cross-reference check and returns the problems found.
func checkBundle(b *bundle) []string {
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	for _, l := range b.kust.Labels {
		if l.IncludeSelectors {
			bad("kustomization labels with includeSelectors: selectors are immutable, a later label change breaks apply")
		}
	}
	for _, d := range all[*appsv1.Deployment](b) {
		checkPod(b, d, func(f string, a ...any) { bad("Deployment %s: "+f, append([]any{d.Name}, a...)...) })
	}
	gw := b.deployment(gatewayName)
	if gw == nil {
		bad("no Deployment %s", gatewayName)
		return errs
	}
	checkGateway(b, gw, func(f string, a ...any) { bad("Deployment %s: "+f, append([]any{gw.Name}, a...)...) })

	isGateway := func(ds []*appsv1.Deployment) bool { return len(ds) == 1 && ds[0] == gw }
	gwService := false
	for _, s := range all[*corev1.Service](b) {
		targets := b.selects(&metav1.LabelSelector{MatchLabels: s.Spec.Selector})
		if len(targets) == 0 {
			bad("Service %s selects no pods", s.Name)
			continue
		}
		gwService = gwService || isGateway(targets)
		for _, p := range s.Spec.Ports {
			ok := false
			for _, c := range targets[0].Spec.Template.Spec.Containers {
				_, found := containerPort(c, p.TargetPort)
				ok = ok || found
			}
			if !ok {
				bad("Service %s: targetPort %s is no container port of its pods", s.Name, p.TargetPort.String())
			}
		}
	}
	if !gwService {
		bad("no Service selects the %s pods", gatewayName)
	}

	pdbs := all[*policyv1.PodDisruptionBudget](b)
	hpaMin := int32(0)
	for _, h := range all[*autoscalingv2.HorizontalPodAutoscaler](b) {
		if h.Spec.ScaleTargetRef.Kind != "Deployment" || b.deployment(h.Spec.ScaleTargetRef.Name) == nil {
			bad("HorizontalPodAutoscaler %s targets %s %s, which does not exist", h.Name, h.Spec.ScaleTargetRef.Kind, h.Spec.ScaleTargetRef.Name)
			continue
		}
		cpu := false
		for _, m := range h.Spec.Metrics {
			cpu = cpu || m.Resource != nil && m.Resource.Name == corev1.ResourceCPU
		}
		if !cpu {
			bad("HorizontalPodAutoscaler %s has no CPU metric", h.Name)
		}
		if h.Spec.ScaleTargetRef.Name == gatewayName && h.Spec.MinReplicas != nil {
			hpaMin = *h.Spec.MinReplicas
		}
	}
	if hpaMin < 3 {
		bad("the %s HorizontalPodAutoscaler must keep at least 3 replicas (minReplicas %d)", gatewayName, hpaMin)
	}
	gwPDB := false
	for _, p := range pdbs {
		if !isGateway(b.selects(p.Spec.Selector)) {
			bad("PodDisruptionBudget %s does not select the %s pods alone", p.Name, gatewayName)
			continue
		}
		gwPDB = true
		switch {
		case p.Spec.MaxUnavailable != nil && p.Spec.MaxUnavailable.IntValue() == 1:
		case p.Spec.MinAvailable != nil && p.Spec.MinAvailable.Type == intstr.Int && p.Spec.MinAvailable.IntVal < hpaMin:
		default:
			bad("PodDisruptionBudget %s: want maxUnavailable 1 or minAvailable below minReplicas", p.Name)
		}
	}
	if !gwPDB {
		bad("no PodDisruptionBudget covers the %s pods", gatewayName)
	}

	// NetworkPolicies select real pods, and named ports exist where they point.
	for _, np := range all[*networkingv1.NetworkPolicy](b) {
		own := b.selects(&np.Spec.PodSelector)
		if len(own) == 0 {
			bad("NetworkPolicy %s selects no pods", np.Name)
			continue
		}
		hasPort := func(ds []*appsv1.Deployment, p *intstr.IntOrString) bool {
			if p == nil || p.Type == intstr.Int {
				return true
			}
			for _, d := range ds {
				for _, c := range d.Spec.Template.Spec.Containers {
					if _, ok := containerPort(c, *p); ok {
						return true
					}
				}
			}
			return false
		}
		for _, r := range np.Spec.Ingress {
			for _, peer := range r.From {
				if peer.PodSelector != nil && peer.NamespaceSelector == nil && len(b.selects(peer.PodSelector)) == 0 {
					bad("NetworkPolicy %s: ingress peer %v selects no pods", np.Name, peer.PodSelector.MatchLabels)
				}
			}
			for _, p := range r.Ports {
				if !hasPort(own, p.Port) {
					bad("NetworkPolicy %s: ingress port %s is not a port of its pods", np.Name, p.Port.String())
				}
			}
		}
		for _, r := range np.Spec.Egress {
			var peers []*appsv1.Deployment
			for _, peer := range r.To {
				if peer.PodSelector != nil && peer.NamespaceSelector == nil {
					if peers = b.selects(peer.PodSelector); len(peers) == 0 {
						bad("NetworkPolicy %s: egress peer %v selects no pods", np.Name, peer.PodSelector.MatchLabels)
					}
				}
			}
			for _, p := range r.Ports {
				if len(peers) > 0 && !hasPort(peers, p.Port) {
					bad("NetworkPolicy %s: egress port %s is not a port of its peers", np.Name, p.Port.String())
				}
			}
		}
	}

	// The Redis cache keeps nothing on disk.
	for _, d := range all[*appsv1.Deployment](b) {
		for _, c := range d.Spec.Template.Spec.Containers {
			if strings.HasPrefix(c.Image, "redis:") || strings.HasPrefix(c.Image, "valkey/") {
				i, j := slices.Index(c.Args, "--save"), slices.Index(c.Args, "--appendonly")
				if i < 0 || i+1 >= len(c.Args) || c.Args[i+1] != "" || j < 0 || j+1 >= len(c.Args) || c.Args[j+1] != "no" {
					bad("Deployment %s: Redis must run with --save \"\" --appendonly no (a cache), args %q", d.Name, c.Args)
				}
			}
		}
	}
	return errs
}

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
		{name: "network policy port", want: "ingress port metrics is not a port", mutate: func(b *bundle) {
			p := intstr.FromString("metrics")
			for _, np := range all[*networkingv1.NetworkPolicy](b) {
				if np.Name == gatewayName {
					np.Spec.Ingress[0].Ports[0].Port = &p
				}
			}
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
