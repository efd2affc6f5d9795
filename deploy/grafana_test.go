package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The Grafana dashboard (grafana/dashboard.json): valid JSON for Grafana 10 or
// later, the datasource a variable, every query PromQL that reads only metrics
// dirgate documents. test/suite/faults/alerts_test.go runs every query against a real
// Prometheus scraping dirgate and checks that each returns data where the faults
// it makes should give some.

const dashboardFile = "grafana/dashboard.json"

type dashboard struct {
	Title         string                        `json:"title"`
	UID           string                        `json:"uid"`
	SchemaVersion int                           `json:"schemaVersion"`
	Templating    struct{ List []dashVariable } `json:"templating"`
	Panels        []dashPanel                   `json:"panels"`
}

type dashVariable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Query      json.RawMessage `json:"query"`
	Datasource *dashDatasource `json:"datasource"`
}

type dashDatasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type dashPanel struct {
	ID         int                      `json:"id"`
	Type       string                   `json:"type"`
	Title      string                   `json:"title"`
	Datasource *dashDatasource          `json:"datasource"`
	GridPos    struct{ H, W, X, Y int } `json:"gridPos"`
	Targets    []struct {
		RefID      string          `json:"refId"`
		Expr       string          `json:"expr"`
		Datasource *dashDatasource `json:"datasource"`
	} `json:"targets"`
	Panels []dashPanel `json:"panels"` // a collapsed row's
}

// dashboardVariables are the values Grafana would put in for the dashboard's
// variables, for checking queries outside Grafana.
var dashboardVariables = strings.NewReplacer("${__rate_interval}", "1m", "$__rate_interval", "1m",
	"$__interval", "1m", "$__range", "1h", "${job}", ".*", "$job", ".*", "${instance}", ".*", "$instance", ".*")

// queries returns every panel query: "title/refId" → expr.
func (d dashboard) queries() map[string]string {
	out := map[string]string{}
	var walk func([]dashPanel)
	walk = func(ps []dashPanel) {
		for _, p := range ps {
			for _, t := range p.Targets {
				out[p.Title+"/"+t.RefID] = t.Expr
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// rowTitles are the dashboard's sections, one per part of dirgate an operator watches.
var rowTitles = []string{"Traffic", "Cache", "Directory", "Change feed", "Policy", "Sign-in and throttling", "Redis", "Go runtime"}

// checkDashboard returns what is wrong with a dashboard's JSON, short of parsing its
// queries (promtool does: TestDashboardQueriesParse).
func checkDashboard(data []byte, metrics documentedMetrics) []string {
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		return []string{"not JSON: " + err.Error()}
	}
	var bad []string
	if d.Title == "" || d.UID == "" {
		bad = append(bad, "no title or uid")
	}
	if d.SchemaVersion < 36 {
		bad = append(bad, fmt.Sprintf("schemaVersion %d: Grafana 10 writes 38 and later", d.SchemaVersion))
	}
	var dsVar string
	for _, v := range d.Templating.List {
		if v.Type == "datasource" && string(v.Query) == `"prometheus"` {
			dsVar = v.Name
		}
	}
	if dsVar == "" {
		bad = append(bad, "no Prometheus datasource variable")
	}
	wantDS := "${" + dsVar + "}"
	checkDS := func(where string, ds *dashDatasource) {
		if ds == nil || ds.UID != wantDS {
			bad = append(bad, fmt.Sprintf("%s: datasource %+v, want the variable %s", where, ds, wantDS))
		}
	}
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			checkDS("variable "+v.Name, v.Datasource)
		}
	}
	ids := map[int]bool{}
	var rows []string
	var walk func([]dashPanel)
	walk = func(ps []dashPanel) {
		for _, p := range ps {
			if ids[p.ID] {
				bad = append(bad, fmt.Sprintf("panel id %d used twice", p.ID))
			}
			ids[p.ID] = true
			if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
				bad = append(bad, fmt.Sprintf("panel %q: gridPos %+v outside the 24 columns", p.Title, p.GridPos))
			}
			if p.Type == "row" {
				rows = append(rows, p.Title)
				walk(p.Panels)
				continue
			}
			checkDS("panel "+p.Title, p.Datasource)
			if len(p.Targets) == 0 {
				bad = append(bad, fmt.Sprintf("panel %q has no query", p.Title))
			}
			for _, t := range p.Targets {
				where := fmt.Sprintf("panel %q query %s", p.Title, t.RefID)
				checkDS(where, t.Datasource)
				ms := promMetrics(t.Expr)
				if len(ms) == 0 {
					bad = append(bad, where+": reads no metric")
				}
				for _, m := range ms {
					if !metrics.has(m) {
						bad = append(bad, fmt.Sprintf("%s reads %s, which docs/operations.md does not list", where, m))
					}
				}
				if !strings.Contains(t.Expr, `job=~"$job"`) || !strings.Contains(t.Expr, `instance=~"$instance"`) {
					bad = append(bad, where+": does not select $job and $instance")
				}
			}
		}
	}
	walk(d.Panels)
	for _, r := range rowTitles {
		if !slices.Contains(rows, r) {
			bad = append(bad, "no row "+r)
		}
	}
	return bad
}

func readDashboard(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestDashboard(t *testing.T) {
	for _, b := range checkDashboard(readDashboard(t), readDocumentedMetrics(t)) {
		t.Error(b)
	}
}

// TestDashboardChecksCatchMistakes breaks copies of the dashboard in each way
// checkDashboard looks for.
func TestDashboardChecksCatchMistakes(t *testing.T) {
	metrics := readDocumentedMetrics(t)
	orig := string(readDashboard(t))
	for _, tc := range []struct{ name, old, new, want string }{
		{"not JSON", `"panels": [`, `"panels": [,`, "not JSON"},
		{"fixed datasource", `"uid": "${datasource}"`, `"uid": "P1809F7CD0C75ACF3"`, "want the variable"},
		{"no datasource variable", `"type": "datasource"`, `"type": "custom"`, "no Prometheus datasource variable"},
		{"unknown metric", `dirgate_changefeed_lag_seconds{`, `dirgate_changefeed_delay_seconds{`, "dirgate_changefeed_delay_seconds"},
		{"all jobs", `{job=~\"$job\", instance=~\"$instance\"}`, `{}`, "does not select"},
		{"row gone", `"title": "Change feed"`, `"title": "Feed"`, "no row Change feed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(orig, tc.old) {
				t.Fatalf("the dashboard has no %q to break", tc.old)
			}
			bad := checkDashboard([]byte(strings.Replace(orig, tc.old, tc.new, 1)), metrics)
			if !slices.ContainsFunc(bad, func(s string) bool { return strings.Contains(s, tc.want) }) {
				t.Errorf("not caught (want %q): %q", tc.want, bad)
			}
		})
	}
}

// TestDashboardQueriesParse has promtool parse every query (the variables put in),
// as recording rules of a throw-away rules file.
func TestDashboardQueriesParse(t *testing.T) {
	tool := promtool(t)
	var d dashboard
	if err := json.Unmarshal(readDashboard(t), &d); err != nil {
		t.Fatal(err)
	}
	qs := d.queries()
	keys := make([]string, 0, len(qs))
	for k := range qs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	type rec struct {
		Record string `json:"record"`
		Expr   string `json:"expr"`
	}
	var recs []rec
	for i, k := range keys {
		recs = append(recs, rec{Record: fmt.Sprintf("dashboard_query_%d", i), Expr: dashboardVariables.Replace(qs[k])})
	}
	out, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": recs}}})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "queries.yaml")
	if err := os.WriteFile(file, out, 0o644); err != nil {
		t.Fatal(err)
	}
	if res, err := exec.Command(tool, "check", "rules", file).CombinedOutput(); err != nil {
		t.Errorf("promtool check rules on the dashboard's queries: %v\n%s", err, res)
	}
	if len(recs) < 30 {
		t.Errorf("%d queries", len(recs))
	}
}
