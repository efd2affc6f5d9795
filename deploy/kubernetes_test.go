package deploy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// kubeDir holds the Kubernetes manifests and their kustomization.
const kubeDir = "kubernetes"

// codecs decode the API groups the manifests use, strictly: an unknown or
// duplicated field is an error, as `kubectl apply --validate=strict` makes it.
var codecs = func() serializer.CodecFactory {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme,
		policyv1.AddToScheme, autoscalingv2.AddToScheme, networkingv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return serializer.NewCodecFactory(s, serializer.EnableStrict)
}()

// decodeManifest decodes one YAML document into its API type, strictly, and checks
// that every field the API requires is present: the schema checks an API server
// makes before it validates values.
func decodeManifest(doc []byte) (runtime.Object, error) {
	obj, _, err := codecs.UniversalDeserializer().Decode(doc, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	var raw any
	if err := yaml.Unmarshal(doc, &raw); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if errs := requiredFields(raw, reflect.TypeOf(obj), ""); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return obj, nil
}

var jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()

// requiredFields walks a decoded document beside its Go type and reports required
// fields that are absent. Kubernetes' API conventions mark optional fields with
// omitempty (or omitzero) and leave it off required ones; the OpenAPI schema's
// "required" lists are generated from the same tags. A required list must also
// not be empty (a Deployment with `containers: []` is as invalid as one without).
func requiredFields(raw any, t reflect.Type, path string) []error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) {
		return nil // Quantity, Time, IntOrString, RawExtension: scalars with their own syntax
	}
	var errs []error
	switch t.Kind() {
	case reflect.Struct:
		m, ok := raw.(map[string]any)
		if !ok {
			return nil // a wrong type is the decoder's error
		}
		for i := range t.NumField() {
			f := t.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || name == "-" {
				continue
			}
			if strings.Contains(opts, "inline") || f.Anonymous && name == "" {
				errs = append(errs, requiredFields(raw, f.Type, path)...)
				continue
			}
			optional := strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero")
			v, present := m[name]
			switch {
			case !present && !optional:
				errs = append(errs, fmt.Errorf("%s.%s: required field missing", path, name))
			case present && !optional && f.Type.Kind() == reflect.Slice && reflect.ValueOf(v).Len() == 0:
				errs = append(errs, fmt.Errorf("%s.%s: required list is empty", path, name))
			case present:
				errs = append(errs, requiredFields(v, f.Type, path+"."+name)...)
			}
		}
	case reflect.Slice:
		if s, ok := raw.([]any); ok && t.Elem().Kind() != reflect.Uint8 {
			for i, e := range s {
				errs = append(errs, requiredFields(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i))...)
			}
		}
	case reflect.Map:
		if m, ok := raw.(map[string]any); ok {
			for k, v := range m {
				errs = append(errs, requiredFields(v, t.Elem(), path+"."+k)...)
			}
		}
	}
	return errs
}

// kustomization is the part of kustomize's format the manifests use. It is decoded
// strictly: a feature added to kustomization.yaml that this model does not know
// fails the test instead of being ignored by it.
type kustomization struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Labels     []struct {
		Pairs            map[string]string `json:"pairs"`
		IncludeSelectors bool              `json:"includeSelectors"`
		IncludeTemplates bool              `json:"includeTemplates"`
	} `json:"labels"`
	Resources          []string    `json:"resources"`
	Images             []kustImage `json:"images"`
	ConfigMapGenerator []generator `json:"configMapGenerator"`
	SecretGenerator    []generator `json:"secretGenerator"`
}

type kustImage struct {
	Name    string `json:"name"`
	NewName string `json:"newName"`
	NewTag  string `json:"newTag"`
	Digest  string `json:"digest"`
}

type generator struct {
	Name     string   `json:"name"`
	Files    []string `json:"files"`
	Envs     []string `json:"envs"`
	Literals []string `json:"literals"`
	Options  struct {
		DisableNameSuffixHash bool `json:"disableNameSuffixHash"`
	} `json:"options"`
}

// object is a decoded manifest and the file (and document) it came from.
type object struct {
	source string
	obj    runtime.Object
}

// generated is a ConfigMap or Secret a kustomize generator makes.
type generated struct {
	kind, name string
	hashed     bool              // kustomize appends a content hash to the name
	data       map[string]string // key -> content
	sources    map[string]string // key -> file it came from, relative to kubeDir
}

// bundle is what `kubectl apply -k` would send, as far as the checks need it.
type bundle struct {
	kust      kustomization
	objects   []object
	generated map[string]*generated // "ConfigMap/name", "Secret/name"
	examples  []string              // site files read from their .example template
}

func splitDocuments(data []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAll(doc, nil))) > 0 {
			docs = append(docs, doc)
		}
	}
}

// envName is kustomize's (and Kubernetes') rule for environment variable names.
var envName = regexp.MustCompile(`^[-._a-zA-Z][-._a-zA-Z0-9]*$`)

// parseEnvFile reads a kustomize env file. A line without "=" would take its value
// from the environment of whoever runs kubectl, so it is refused.
func parseEnvFile(data string) (map[string]string, error) {
	out := map[string]string{}
	for i, l := range strings.Split(data, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok || !envName.MatchString(k) {
			return nil, fmt.Errorf("line %d: want KEY=VALUE, got %q", i+1, l)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("line %d: %s set twice", i+1, k)
		}
		out[k] = v
	}
	return out, nil
}

// loadBundle builds dir's kustomization the way kustomize does for the features the
// model knows: resources, generators (files, env files, literals), images, labels.
func loadBundle(dir string) (*bundle, error) {
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		return nil, err
	}
	b := &bundle{generated: map[string]*generated{}}
	if err := yaml.UnmarshalStrict(data, &b.kust); err != nil {
		return nil, fmt.Errorf("kustomization.yaml: %w", err)
	}
	var errs []error
	for _, res := range b.kust.Resources {
		data, err := os.ReadFile(filepath.Join(dir, res))
		if err != nil {
			errs = append(errs, fmt.Errorf("resource: %w", err))
			continue
		}
		docs, err := splitDocuments(data)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", res, err))
		}
		for i, doc := range docs {
			src := fmt.Sprintf("%s#%d", res, i+1)
			obj, err := decodeManifest(doc)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", src, err))
				continue
			}
			b.objects = append(b.objects, object{source: src, obj: obj})
		}
	}
	read := func(rel string) (string, error) {
		data, err := os.ReadFile(filepath.Join(dir, rel))
		if errors.Is(err, os.ErrNotExist) && strings.HasPrefix(rel, "site/") {
			// Site files are created by the operator from their templates.
			if data, err = os.ReadFile(filepath.Join(dir, rel+".example")); err == nil {
				b.examples = append(b.examples, rel)
			}
		}
		return string(data), err
	}
	for kind, gens := range map[string][]generator{"ConfigMap": b.kust.ConfigMapGenerator, "Secret": b.kust.SecretGenerator} {
		for _, g := range gens {
			gen := &generated{kind: kind, name: g.Name, hashed: !g.Options.DisableNameSuffixHash,
				data: map[string]string{}, sources: map[string]string{}}
			for _, f := range g.Files {
				key, rel, ok := strings.Cut(f, "=")
				if !ok {
					key, rel = filepath.Base(f), f
				}
				content, err := read(rel)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s %s: %w", kind, g.Name, err))
				}
				gen.data[key], gen.sources[key] = content, rel
			}
			for _, e := range g.Envs {
				content, err := read(e)
				if err == nil {
					var kv map[string]string
					if kv, err = parseEnvFile(content); err == nil {
						for k, v := range kv {
							gen.data[k], gen.sources[k] = v, e
						}
					}
				}
				if err != nil {
					errs = append(errs, fmt.Errorf("%s %s: %s: %w", kind, g.Name, e, err))
				}
			}
			for _, l := range g.Literals {
				k, v, _ := strings.Cut(l, "=")
				gen.data[k] = v
			}
			id := kind + "/" + g.Name
			if b.generated[id] != nil {
				errs = append(errs, fmt.Errorf("%s generated twice", id))
			}
			b.generated[id] = gen
		}
	}
	return b, errors.Join(errs...)
}

func loadRepoBundle(t *testing.T) *bundle {
	t.Helper()
	b, err := loadBundle(kubeDir)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestManifestsDecodeStrictly decodes every manifest the kustomization lists.
func TestManifestsDecodeStrictly(t *testing.T) {
	b := loadRepoBundle(t)
	kinds := map[string]int{}
	for _, o := range b.objects {
		kinds[reflect.TypeOf(o.obj).Elem().String()]++
	}
	// The deployment's parts: if one goes missing, the checks below would pass
	// vacuously over it.
	for _, want := range []string{"v1.Deployment", "v1.Service", "v1.PodDisruptionBudget", "v2.HorizontalPodAutoscaler", "v1.NetworkPolicy"} {
		if kinds[want] == 0 {
			t.Errorf("no %s among the manifests (have %v)", want, kinds)
		}
	}
	if b.kust.APIVersion != "kustomize.config.k8s.io/v1beta1" || b.kust.Kind != "Kustomization" {
		t.Errorf("kustomization.yaml: apiVersion %q kind %q", b.kust.APIVersion, b.kust.Kind)
	}
	// Every manifest in the directory is applied: one left out of resources would
	// silently not be deployed.
	files, err := filepath.Glob(filepath.Join(kubeDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{"kustomization.yaml": true}
	for _, r := range b.kust.Resources {
		listed[r] = true
	}
	for _, f := range files {
		if !listed[filepath.Base(f)] {
			t.Errorf("%s is not in kustomization.yaml's resources", f)
		}
	}
	sort.Strings(b.examples)
	t.Logf("%d objects %v; %d generated; site files from templates: %v", len(b.objects), kinds, len(b.generated), b.examples)
}

// TestDecodeRejectsBroken proves the decoder fails on the mistakes it exists to
// catch: each document differs from a valid Deployment in one way.
func TestDecodeRejectsBroken(t *testing.T) {
	const valid = `apiVersion: apps/v1
kind: Deployment
metadata: {name: x}
spec:
  selector: {matchLabels: {app: x}}
  template:
    metadata: {labels: {app: x}}
    spec:
      containers:
        - name: x
          image: x
          ports: [{containerPort: 8080}]
`
	tests := []struct {
		name     string
		old, new string
		want     string // part of the expected error; "" for a valid document
	}{
		// The unchanged document must pass, or every case below proves nothing.
		{name: "valid", want: ""},
		// A misspelt field is silently dropped by a lenient decoder.
		{name: "unknown field", old: "image: x", new: "image: x\n          imagePullPolicyy: Always", want: `unknown field "spec.template.spec.containers[0].imagePullPolicyy"`},
		// JSON field names are case-sensitive in Kubernetes, unlike encoding/json.
		{name: "wrong case", old: "image: x", new: "Image: x", want: `unknown field`},
		{name: "wrong type", old: "containerPort: 8080", new: "containerPort: http", want: "cannot unmarshal string"},
		{name: "duplicate field", old: "image: x", new: "image: x\n          image: z", want: "already set"},
		{name: "missing containers", old: "      containers:\n        - name: x\n          image: x\n          ports: [{containerPort: 8080}]\n", new: "      hostname: x\n", want: "spec.template.spec.containers: required field missing"},
		{name: "empty containers", old: "      containers:\n        - name: x\n          image: x\n          ports: [{containerPort: 8080}]\n", new: "      containers: []\n", want: "containers: required list is empty"},
		{name: "missing container name", old: "- name: x\n          image: x", new: "- image: x", want: "containers[0].name: required field missing"},
		{name: "missing selector", old: "  selector: {matchLabels: {app: x}}\n", new: "", want: "spec.selector: required field missing"},
		{name: "missing port number", old: "{containerPort: 8080}", new: "{name: http}", want: "containerPort: required field missing"},
		{name: "unknown kind", old: "kind: Deployment", new: "kind: Deploymnet", want: "no kind"},
		{name: "no kind", old: "kind: Deployment\n", new: "", want: "Kind"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := valid
			if tt.old != "" {
				if !strings.Contains(doc, tt.old) {
					t.Fatalf("case does not apply: %q not in the document", tt.old)
				}
				doc = strings.Replace(doc, tt.old, tt.new, 1)
			}
			_, err := decodeManifest([]byte(doc))
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("decodeManifest: %v, want error containing %q", err, tt.want)
			}
		})
	}
}

// TestRequiredFieldsOtherKinds runs the required-field walk on the other kinds the
// manifests use, whose required fields sit deeper.
func TestRequiredFieldsOtherKinds(t *testing.T) {
	tests := []struct{ name, doc, want string }{
		// HPA v2: a metric target needs its type.
		{name: "hpa target type", want: "target.type: required field missing", doc: `apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: x}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: x}
  maxReplicas: 3
  metrics: [{type: Resource, resource: {name: cpu, target: {averageUtilization: 70}}}]
`},
		// HPA v2 without maxReplicas is rejected by the API server.
		{name: "hpa max replicas", want: "spec.maxReplicas: required field missing", doc: `apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: x}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: x}
`},
		// A Service port without its number.
		{name: "service port", want: "ports[0].port: required field missing", doc: `apiVersion: v1
kind: Service
metadata: {name: x}
spec: {ports: [{name: http, targetPort: 8080}]}
`},
		// A spread constraint needs its topology key.
		{name: "topology key", want: "topologyKey: required field missing", doc: `apiVersion: v1
kind: Pod
metadata: {name: x}
spec:
  containers: [{name: x, image: x}]
  topologySpreadConstraints: [{maxSkew: 1, whenUnsatisfiable: ScheduleAnyway}]
`},
		// A PodDisruptionBudget field of the wrong type.
		{name: "pdb type", want: "cannot unmarshal", doc: `apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: x}
spec: {maxUnavailable: [1]}
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeManifest([]byte(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("decodeManifest: %v, want error containing %q", err, tt.want)
			}
		})
	}
}
