package deploy

import (
	"fmt"
	"net"
	"net/netip"
	"path"
	"slices"
	"strconv"
	"strings"
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
	settings, err := settingsOnce()
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
	// The Go runtime's soft limit follows the container's (docs/operations.md,
	// "Memory"): without it the heap grows to twice what is live before a
	// collection, past a limit a large listing's fill brings close.
	if lim := c.Resources.Limits.Memory(); !lim.IsZero() {
		var ref *corev1.ResourceFieldSelector
		for _, e := range c.Env {
			if e.Name == "GOMEMLIMIT" && e.ValueFrom != nil {
				ref = e.ValueFrom.ResourceFieldRef
			}
		}
		if ref == nil || ref.Resource != "limits.memory" || (ref.ContainerName != "" && ref.ContainerName != c.Name) || (!ref.Divisor.IsZero() && ref.Divisor.Value() != 1) {
			bad("GOMEMLIMIT is not set from the container's limits.memory, in bytes")
		}
	}

	// Settings: the container's env and the ConfigMaps it takes env from.
	env := map[string]string{}
	for _, e := range c.Env {
		if err := checkSettingName(settings, e.Name, podHelperEnv); err != nil {
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
				if err := checkSettingName(settings, k, nil); err != nil {
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
	if strings.TrimSpace(env["DIRGATE_TRUSTED_PROXIES"]) != "" {
		checkAPIPortSources(b, d, *c, int32(listenPort), bad)
	}
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

	if err := checkRedisSecret(env); err != nil {
		bad("%v", err)
	}
	if err := checkTrustedProxies(env["DIRGATE_TRUSTED_PROXIES"]); err != nil {
		bad("%v", err)
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

	// The shutdown timeout set here, else dirgate's default as docs/settings.md states it.
	s, ok := env["DIRGATE_SHUTDOWN_TIMEOUT"]
	if !ok {
		s = documentedDefault("DIRGATE_SHUTDOWN_TIMEOUT")
	}
	shutdown, err := time.ParseDuration(s)
	if err != nil {
		bad("DIRGATE_SHUTDOWN_TIMEOUT %q: %v", s, err)
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

	checkMetricsPort(b, gw, bad)

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

// checkMetricsPort: dirgate serves /metrics on a port of its own
// (DIRGATE_METRICS_LISTEN), which the pod declares and the scrape annotation names;
// no Service exposes it, and no NetworkPolicy rule lets a source outside a named
// namespace reach it (docs/operations.md, "Metrics"). The API's port is not
// concerned.
func checkMetricsPort(b *bundle, gw *appsv1.Deployment, bad func(string, ...any)) {
	var c *corev1.Container
	for i, ct := range gw.Spec.Template.Spec.Containers {
		if ct.Name == gatewayContainer {
			c = &gw.Spec.Template.Spec.Containers[i]
		}
	}
	if c == nil {
		return
	}
	listen := envValue(*c, "DIRGATE_METRICS_LISTEN")
	host, portStr, err := net.SplitHostPort(listen)
	if err != nil || host != "0.0.0.0" {
		bad("DIRGATE_METRICS_LISTEN %q: want 0.0.0.0:PORT (the default 127.0.0.1 cannot be scraped)", listen)
		return
	}
	port, _ := strconv.Atoi(portStr)
	name := ""
	for _, cp := range c.Ports {
		if int(cp.ContainerPort) == port {
			name = cp.Name
		}
	}
	if name == "" {
		bad("DIRGATE_METRICS_LISTEN port %d is not a container port", port)
		return
	}
	if a, ok := gw.Spec.Template.Annotations["prometheus.io/port"]; ok && a != portStr {
		bad("annotation prometheus.io/port %q: dirgate serves /metrics on port %d", a, port)
	}
	isMetrics := func(p intstr.IntOrString) bool {
		return p.Type == intstr.Int && int(p.IntVal) == port || p.Type == intstr.String && p.StrVal == name
	}
	for _, s := range all[*corev1.Service](b) {
		if !slices.Contains(b.selects(&metav1.LabelSelector{MatchLabels: s.Spec.Selector}), gw) {
			continue
		}
		for _, p := range s.Spec.Ports {
			if isMetrics(p.TargetPort) {
				bad("Service %s exposes the metrics port (%s): whoever reaches the Service would read /metrics", s.Name, p.TargetPort.String())
			}
		}
	}
	restricted := ingressRulesAdmitting(b, gw, isMetrics, func(np *networkingv1.NetworkPolicy, r networkingv1.NetworkPolicyIngressRule) {
		if len(r.From) == 0 {
			bad("NetworkPolicy %s: the metrics port is reachable from any source", np.Name)
		}
		for _, peer := range r.From {
			ns := peer.NamespaceSelector
			if ns == nil || len(ns.MatchLabels) == 0 && len(ns.MatchExpressions) == 0 {
				bad("NetworkPolicy %s: the metrics port is reachable from a peer without a namespace of its own (%+v)", np.Name, peer)
			}
		}
	})
	if !restricted {
		bad("no NetworkPolicy restricts ingress to the %s pods: the metrics port is open to all", gw.Name)
	}
}

// checkAPIPortSources: with DIRGATE_TRUSTED_PROXIES set, X-Forwarded-For from those
// addresses names the client for the throttle, and the range is the pod network,
// not the ingress controller's pods alone; so every NetworkPolicy rule that lets
// sources reach the API's port must name them (a namespace by its labels, or an
// address block narrower than everything), or any pod could reach the API directly
// and choose its own throttle address (docs/auth.md, "Throttling").
func checkAPIPortSources(b *bundle, gw *appsv1.Deployment, c corev1.Container, port int32, bad func(string, ...any)) {
	name := ""
	for _, cp := range c.Ports {
		if cp.ContainerPort == port {
			name = cp.Name
		}
	}
	isAPI := func(p intstr.IntOrString) bool {
		return p.Type == intstr.Int && p.IntVal == port || p.Type == intstr.String && name != "" && p.StrVal == name
	}
	restricted := ingressRulesAdmitting(b, gw, isAPI, func(np *networkingv1.NetworkPolicy, r networkingv1.NetworkPolicyIngressRule) {
		if len(r.From) == 0 {
			bad("NetworkPolicy %s: the API port is reachable from any source while DIRGATE_TRUSTED_PROXIES is set: any pod could choose its throttle address with X-Forwarded-For", np.Name)
		}
		for _, peer := range r.From {
			ns := peer.NamespaceSelector
			named := ns != nil && (len(ns.MatchLabels) > 0 || len(ns.MatchExpressions) > 0)
			if ipb := peer.IPBlock; ipb != nil {
				pfx, err := netip.ParsePrefix(ipb.CIDR)
				named = err == nil && pfx.Bits() > 0
			}
			if !named {
				bad("NetworkPolicy %s: the API port is reachable from a peer without a namespace of its own or an address block (%+v) while DIRGATE_TRUSTED_PROXIES is set", np.Name, peer)
			}
		}
	})
	if !restricted {
		bad("no NetworkPolicy restricts ingress to the %s pods: with DIRGATE_TRUSTED_PROXIES set, any pod could choose its throttle address", gw.Name)
	}
}

// ingressRulesAdmitting calls fn with every ingress rule of a NetworkPolicy
// selecting gw that admits a port isPort matches (a rule naming no port admits
// them all), and reports whether any NetworkPolicy restricts gw's ingress at all.
func ingressRulesAdmitting(b *bundle, gw *appsv1.Deployment, isPort func(intstr.IntOrString) bool,
	fn func(*networkingv1.NetworkPolicy, networkingv1.NetworkPolicyIngressRule)) bool {
	restricted := false
	for _, np := range all[*networkingv1.NetworkPolicy](b) {
		if !slices.Contains(b.selects(&np.Spec.PodSelector), gw) || !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
			continue
		}
		restricted = true
		for _, r := range np.Spec.Ingress {
			admits := len(r.Ports) == 0
			for _, p := range r.Ports {
				admits = admits || p.Port == nil || isPort(*p.Port)
			}
			if admits {
				fn(np, r)
			}
		}
	}
	return restricted
}
