package promtest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestServer: Prometheus scrapes a target, answers queries (and a query's parse
// error), evaluates a rule file and reports its alert pending, then firing.
func TestServer(t *testing.T) {
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "# TYPE promtest_value gauge\npromtest_value 3")
	}))
	defer target.Close()
	rules := `groups:
  - name: t
    rules:
      - alert: PromtestHigh
        expr: promtest_value > 2
        for: 2s
`
	s := Start(t, Config{Job: "promtest", Targets: []string{strings.TrimPrefix(target.URL, "http://")}, Rules: []string{rules}})
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	seen := map[string]bool{}
	for !seen["firing"] {
		if time.Now().After(deadline) {
			t.Fatalf("PromtestHigh not firing within 30 s (seen %v)\n%s", seen, s.Output())
		}
		alerts, err := s.Alerts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range alerts {
			if a.Labels["alertname"] == "PromtestHigh" && a.Labels["job"] == "promtest" {
				seen[a.State] = true
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !seen["pending"] {
		t.Log("the alert was never seen pending (it fired between two reads)")
	}
	res, err := s.Query(ctx, `promtest_value{job="promtest"}`)
	if err != nil || len(res) != 1 || res[0].Value[1] != "3" {
		t.Errorf("query: %v %v", res, err)
	}
	if _, err := s.Query(ctx, `sum(promtest_value`); err == nil || !strings.Contains(err.Error(), "bad_data") {
		t.Errorf("a query that does not parse: %v", err)
	}
	health, err := s.RuleHealth(ctx)
	if err != nil || health["PromtestHigh"] != "ok" {
		t.Errorf("rule health: %v %v", health, err)
	}
}
