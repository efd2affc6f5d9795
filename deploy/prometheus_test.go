package deploy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/dirgate/dirgate/test/harness/ci"
	"sigs.k8s.io/yaml"
)

// The alerting rules (prometheus/alerts.yaml), their promtool unit tests
// (prometheus/alerts_test.yaml) and their copy as a PrometheusRule
// (kubernetes/components/prometheus-rules).

const (
	alertsFile     = "prometheus/alerts.yaml"
	alertTestsFile = "prometheus/alerts_test.yaml"
	ruleComponent  = "kubernetes/components/prometheus-rules"
	// runbookBase is where every alert's runbook_url points: a section of
	// docs/operations.md.
	runbookBase = "https://github.com/dirgate/dirgate/blob/main/docs/operations.md#"
)

type ruleFile struct {
	Groups []ruleGroup `json:"groups"`
}

type ruleGroup struct {
	Name  string `json:"name"`
	Rules []rule `json:"rules"`
}

type rule struct {
	Alert       string            `json:"alert"`
	Record      string            `json:"record"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

type alertTests struct {
	RuleFiles []string `json:"rule_files"`
	Tests     []struct {
		AlertRuleTest []struct {
			Alertname string `json:"alertname"`
			ExpAlerts []any  `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

func readRules(t *testing.T) (ruleFile, []byte) {
	t.Helper()
	data, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.UnmarshalStrict(data, &rf); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	return rf, data
}

// promtool returns promtool's path; without it the test skips, except under CI.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		ci.SkipOrFail(t, "promtool is not installed (Debian's prometheus package; test/run.sh installs it)")
	}
	return p
}

// TestAlertRulesPromtool: promtool accepts the rules and their unit tests pass.
func TestAlertRulesPromtool(t *testing.T) {
	tool := promtool(t)
	for _, args := range [][]string{{"check", "rules", alertsFile}, {"test", "rules", alertTestsFile}} {
		out, err := exec.Command(tool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// headingAnchor is GitHub's anchor for a Markdown heading.
func headingAnchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}

// docSections maps each heading's anchor in a Markdown document to its text (up
// to the next heading).
func docSections(doc string) map[string]string {
	out := map[string]string{}
	heading := regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
	locs := heading.FindAllStringSubmatchIndex(doc, -1)
	for i, l := range locs {
		end := len(doc)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		out[headingAnchor(doc[l[2]:l[3]])] = doc[l[0]:end] // the heading included
	}
	return out
}

// checkRules returns what is wrong with rules against the house rules: every rule an
// alert with a severity, a summary, a description and a runbook_url pointing to a
// section of docs/operations.md that names it; only documented metrics; each alert
// shown firing and not firing by the promtool tests.
func checkRules(rf ruleFile, tests alertTests, docs string, metrics documentedMetrics) []string {
	var bad []string
	sections := docSections(docs)
	firing, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				firing[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	if !slices.Equal(tests.RuleFiles, []string{filepath.Base(alertsFile)}) {
		bad = append(bad, fmt.Sprintf("the tests load %v, not %s", tests.RuleFiles, filepath.Base(alertsFile)))
	}
	seen := map[string]bool{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			name := r.Alert
			if name == "" {
				bad = append(bad, fmt.Sprintf("group %s: a rule that is not an alert (%q)", g.Name, r.Record))
				continue
			}
			if seen[name] {
				bad = append(bad, name+": defined twice")
			}
			seen[name] = true
			if s := r.Labels["severity"]; s != "critical" && s != "warning" && s != "info" {
				bad = append(bad, fmt.Sprintf("%s: severity %q, want critical, warning or info", name, s))
			}
			for _, a := range []string{"summary", "description", "runbook_url"} {
				if strings.TrimSpace(r.Annotations[a]) == "" {
					bad = append(bad, fmt.Sprintf("%s: no %s annotation", name, a))
				}
			}
			if u := r.Annotations["runbook_url"]; u != "" {
				anchor, ok := strings.CutPrefix(u, runbookBase)
				if text, found := sections[anchor]; !ok || !found {
					bad = append(bad, fmt.Sprintf("%s: runbook_url %s is not a section of docs/operations.md", name, u))
				} else if !strings.Contains(text, name) {
					bad = append(bad, fmt.Sprintf("%s: its runbook section #%s does not name it", name, anchor))
				}
			}
			ms := promMetrics(r.Expr)
			if len(ms) == 0 {
				bad = append(bad, name+": reads no metric")
			}
			for _, m := range ms {
				if !metrics.has(m) {
					bad = append(bad, fmt.Sprintf("%s: reads %s, which docs/operations.md does not list", name, m))
				}
			}
			if !firing[name] || !quiet[name] {
				bad = append(bad, fmt.Sprintf("%s: alerts_test.yaml must show it firing and not firing (firing %v, not firing %v)", name, firing[name], quiet[name]))
			}
		}
	}
	for a := range firing {
		if !seen[a] {
			bad = append(bad, "alerts_test.yaml tests "+a+", which is not defined")
		}
	}
	slices.Sort(bad)
	return bad
}

type ruleCheckInputs struct {
	rules ruleFile
	tests alertTests
	docs  string
}

func readRuleCheckInputs(t *testing.T) ruleCheckInputs {
	t.Helper()
	rf, _ := readRules(t)
	data, err := os.ReadFile(alertTestsFile)
	if err != nil {
		t.Fatal(err)
	}
	var tests alertTests
	if err := yaml.Unmarshal(data, &tests); err != nil {
		t.Fatalf("%s: %v", alertTestsFile, err)
	}
	docs, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	return ruleCheckInputs{rules: rf, tests: tests, docs: string(docs)}
}

func TestAlertRules(t *testing.T) {
	in := readRuleCheckInputs(t)
	for _, b := range checkRules(in.rules, in.tests, in.docs, readDocumentedMetrics(t)) {
		t.Error(b)
	}
	var n int
	for _, g := range in.rules.Groups {
		n += len(g.Rules)
	}
	if n < 12 {
		t.Errorf("%d alerts, want the dozen docs/operations.md lists", n)
	}
}

// TestAlertRuleChecksCatchMistakes breaks a copy of the rules, the tests or the
// runbook in each way checkRules looks for: each must be reported.
func TestAlertRuleChecksCatchMistakes(t *testing.T) {
	metrics := readDocumentedMetrics(t)
	for _, tc := range []struct {
		name   string
		break_ func(*ruleCheckInputs)
		want   string
	}{
		{"no severity", func(in *ruleCheckInputs) { delete(in.rules.Groups[0].Rules[0].Labels, "severity") }, "severity"},
		{"no description", func(in *ruleCheckInputs) { delete(in.rules.Groups[0].Rules[1].Annotations, "description") }, "no description"},
		{"runbook elsewhere", func(in *ruleCheckInputs) {
			in.rules.Groups[0].Rules[2].Annotations["runbook_url"] = "https://example.com/runbook"
		}, "is not a section"},
		{"runbook section gone", func(in *ruleCheckInputs) {
			in.docs = strings.Replace(in.docs, "### DirgatePolicyBroken", "### Policy broken", 1)
		}, "DirgatePolicyBroken: runbook_url"},
		{"unknown metric", func(in *ruleCheckInputs) {
			in.rules.Groups[0].Rules[3].Expr = `rate(dirgate_cache_bypasses_total[5m]) > 0`
		}, "dirgate_cache_bypasses_total"},
		{"untested", func(in *ruleCheckInputs) {
			in.rules.Groups[0].Rules = append(in.rules.Groups[0].Rules, in.rules.Groups[0].Rules[0])
			in.rules.Groups[0].Rules[len(in.rules.Groups[0].Rules)-1].Alert = "DirgateNew"
		}, "DirgateNew: alerts_test.yaml must show it"},
		{"never shown firing", func(in *ruleCheckInputs) {
			for _, tc := range in.tests.Tests {
				for i := range tc.AlertRuleTest {
					if tc.AlertRuleTest[i].Alertname == "DirgateChangeFeedStalled" {
						tc.AlertRuleTest[i].ExpAlerts = nil
					}
				}
			}
		}, "DirgateChangeFeedStalled: alerts_test.yaml must show it firing and not firing (firing false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := readRuleCheckInputs(t)
			tc.break_(&in)
			bad := checkRules(in.rules, in.tests, in.docs, metrics)
			if !slices.ContainsFunc(bad, func(s string) bool { return strings.Contains(s, tc.want) }) {
				t.Errorf("not caught (want %q): %q", tc.want, bad)
			}
		})
	}
}

// TestPrometheusRuleMatchesAlerts: the PrometheusRule's groups are alerts.yaml's,
// and the component is what its kustomization lists.
func TestPrometheusRuleMatchesAlerts(t *testing.T) {
	rf, _ := readRules(t)
	data, err := os.ReadFile(filepath.Join(ruleComponent, "prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var pr struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name   string            `json:"name"`
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
		Spec ruleFile `json:"spec"`
	}
	if err := yaml.UnmarshalStrict(data, &pr); err != nil {
		t.Fatalf("prometheusrule.yaml: %v", err)
	}
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" || pr.Metadata.Name == "" {
		t.Errorf("prometheusrule.yaml is a %s %s named %q", pr.APIVersion, pr.Kind, pr.Metadata.Name)
	}
	if !reflect.DeepEqual(pr.Spec, rf) {
		t.Errorf("prometheusrule.yaml's spec.groups differ from %s: copy its groups again", alertsFile)
	}
	kdata, err := os.ReadFile(filepath.Join(ruleComponent, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
	}
	if err := yaml.UnmarshalStrict(kdata, &k); err != nil {
		t.Fatalf("component kustomization: %v", err)
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1alpha1" || k.Kind != "Component" || !slices.Equal(k.Resources, []string{"prometheusrule.yaml"}) {
		t.Errorf("component kustomization: %+v", k)
	}
}

// TestPrometheusRuleComponentBuilds builds an overlay of the manifests with the
// component through real kustomize (kubectl kustomize, offline), where kubectl is
// installed, and finds the rules in its output.
func TestPrometheusRuleComponentBuilds(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not installed: the component is built with real kustomize only where it is")
	}
	rf, _ := readRules(t)
	docs := buildWithComponent(t, kubectl, "prometheus-rules")
	found := 0
	for _, doc := range docs {
		var obj struct {
			Kind string   `json:"kind"`
			Spec ruleFile `json:"spec"`
		}
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatal(err)
		}
		if obj.Kind != "PrometheusRule" {
			continue
		}
		found++
		if !reflect.DeepEqual(obj.Spec, rf) {
			t.Error("the built PrometheusRule's groups differ from alerts.yaml")
		}
	}
	if found != 1 {
		t.Errorf("%d PrometheusRules in the overlay's output, want 1", found)
	}
}
