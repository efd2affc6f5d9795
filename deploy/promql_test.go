package deploy

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// PromQL helpers shared by the alert rules' and the dashboard's checks. They are
// not a parser: promtool (rules) and a real Prometheus (dashboard, in
// test/suite/faults/alerts_test.go) parse the expressions; these only find the metric
// names an expression reads, to hold them against the metrics dirgate documents.

var (
	promString   = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	promMatchers = regexp.MustCompile(`\{[^{}]*\}`)
	promRange    = regexp.MustCompile(`\[[^\[\]]*\]`)
	promGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)`)
	promVariable = regexp.MustCompile(`\$\{?[A-Za-z_][A-Za-z0-9_]*(?::[a-z]+)?\}?`)
	promComment  = regexp.MustCompile(`#[^\n]*`)
	promIdent    = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
	promNumber   = regexp.MustCompile(`\b[0-9][0-9.eE+]*[a-zA-Z]*\b`)
	// promKeywords are the identifiers of PromQL that are not metric names when
	// they are not followed by "(" (function and aggregation names are).
	promKeywords = map[string]bool{"and": true, "or": true, "unless": true, "by": true, "without": true,
		"on": true, "ignoring": true, "group_left": true, "group_right": true, "offset": true, "bool": true,
		"inf": true, "nan": true, "Inf": true, "NaN": true, "atan2": true}
)

// promMetrics returns the metric names expr reads, in order, without duplicates.
// Grafana's variables ($job, ${__rate_interval}) are dropped first.
func promMetrics(expr string) []string {
	s := promComment.ReplaceAllString(promString.ReplaceAllString(expr, `""`), "")
	s = promVariable.ReplaceAllString(s, "")
	s = promMatchers.ReplaceAllString(s, " ")
	s = promRange.ReplaceAllString(s, " ")
	s = promGrouping.ReplaceAllString(s, " ")
	s = promNumber.ReplaceAllString(s, " ")
	var out []string
	for _, loc := range promIdent.FindAllStringIndex(s, -1) {
		name := s[loc[0]:loc[1]]
		if promKeywords[name] || strings.HasPrefix(strings.TrimLeft(s[loc[1]:], " \t\n"), "(") {
			continue
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

func TestPromMetrics(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`sum by (job, instance) (rate(dirgate_http_requests_total{status=~"5..", route!="x{y}"}[5m])) > 0.05 * sum by (job) (rate(dirgate_http_requests_total[5m]))`,
			[]string{"dirgate_http_requests_total"}},
		{`max by (job, instance, server) (max_over_time(dirgate_upstream_breaker_state[1m])) == 2 or max_over_time(dirgate_ldap_server_up[1m]) == 0`,
			[]string{"dirgate_upstream_breaker_state", "dirgate_ldap_server_up"}},
		{`histogram_quantile(0.99, sum by (le, route) (rate(dirgate_http_request_duration_seconds_bucket{job=~"$job", instance=~"$instance"}[$__rate_interval])))`,
			[]string{"dirgate_http_request_duration_seconds_bucket"}},
		{`min(dirgate_tls_certificate_expiry_timestamp_seconds) - time() < 14 * 86400`, []string{"dirgate_tls_certificate_expiry_timestamp_seconds"}},
		{`a / on(instance) group_left(server) b unless c offset 5m`, []string{"a", "b", "c"}},
		{`label_replace(go_goroutines, "x", "$1", "instance", "(.*)") # a comment naming nothing_total`, []string{"go_goroutines"}},
		{`sum(rate(dirgate_cache_listings_total{job=~"${job:regex}"}[1h:5m])) by (status)`, []string{"dirgate_cache_listings_total"}},
	} {
		if got := promMetrics(tc.expr); !slices.Equal(got, tc.want) {
			t.Errorf("promMetrics(%q) = %q, want %q", tc.expr, got, tc.want)
		}
	}
}

// documentedMetrics reads docs/operations.md's metrics table: exact names (a
// histogram's _bucket, _sum and _count included) and prefixes (a name ending in
// `_*`), plus the Go runtime's and the process's metrics that /metrics serves too.
type documentedMetrics struct {
	names    map[string]bool
	prefixes []string
}

func (d documentedMetrics) has(name string) bool {
	if d.names[name] {
		return true
	}
	for _, p := range d.prefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

var tableName = regexp.MustCompile("`([a-z_:*]+)`")

func parseDocumentedMetrics(doc string) documentedMetrics {
	d := documentedMetrics{names: map[string]bool{}, prefixes: []string{"go_", "process_"}}
	_, after, _ := strings.Cut(doc, "\n## Metrics\n")
	section, _, _ := strings.Cut(after, "\n## ")
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.Contains(cells[1], "`") {
			continue
		}
		histogram := strings.Contains(cells[2], "histogram")
		for _, m := range tableName.FindAllStringSubmatch(cells[1], -1) {
			name := m[1]
			if p, ok := strings.CutSuffix(name, "*"); ok {
				d.prefixes = append(d.prefixes, p)
				continue
			}
			d.names[name] = true
			if histogram {
				for _, s := range []string{"_bucket", "_sum", "_count"} {
					d.names[name+s] = true
				}
			}
		}
	}
	return d
}

// announcedMetrics are the per-DC series of the LDAP adapter's several domain
// controllers, which the DC alert and the dashboard's directory panels
// already read so that they need no change when it lands; until then they have no
// series. Remove a name here once docs/operations.md documents it.
var announcedMetrics []string

func readDocumentedMetrics(t *testing.T) documentedMetrics {
	t.Helper()
	data, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	d := parseDocumentedMetrics(string(data))
	if len(d.names) < 20 {
		t.Fatalf("docs/operations.md's metrics table gave only %d names: has its layout changed?", len(d.names))
	}
	for _, n := range announcedMetrics {
		if d.names[n] {
			t.Errorf("%s is documented now: remove it from announcedMetrics", n)
		}
		d.names[n] = true
	}
	return d
}

func TestDocumentedMetrics(t *testing.T) {
	d := readDocumentedMetrics(t)
	for _, n := range []string{"dirgate_http_requests_total", "dirgate_http_request_duration_seconds_bucket", "dirgate_policy_broken",
		"dirgate_tls_certificate_expiry_timestamp_seconds", "db_client_connections_usage", "go_goroutines", "dirgate_ldap_server_up"} {
		if !d.has(n) {
			t.Errorf("%s is not among the documented metrics", n)
		}
	}
	for _, n := range []string{"dirgate_http_requests", "dirgate_nonexistent_total", "dirgate_changefeed_lag_seconds_bucket"} {
		if d.has(n) {
			t.Errorf("%s passes as documented", n)
		}
	}
}
