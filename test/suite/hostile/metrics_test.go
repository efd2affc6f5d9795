package hostile

import (
	"context"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dirgate/dirgate/test/harness/child"
	"github.com/dirgate/dirgate/test/harness/fixture"
)

// TestMetricsNotServedToCallers: the API's port answers /metrics, in every spelling a
// client might try, exactly as a path that does not exist; the metrics are on their
// own listener (DIRGATE_METRICS_LISTEN), which the deployment keeps from callers.
func TestMetricsNotServedToCallers(t *testing.T) {
	e := demoTarget(t)
	unknown := rawSend(t, e.p.Addr, "GET /no-such-path HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	if unknown.Status != 404 {
		t.Fatalf("an unknown path: %s", unknown)
	}
	for _, path := range []string{"/metrics", "/METRICS", "/metrics/", "/metrics?format=text", "/%6detrics", "//metrics", "/restApi/../metrics"} {
		r := rawSend(t, e.p.Addr, "GET "+path+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		if r.Status != unknown.Status || string(r.Body) != string(unknown.Body) || strings.Contains(string(r.Body), "dirgate_") {
			t.Errorf("GET %s on the API's port: %s, want the unknown path's %s", path, r, unknown)
		}
	}
	if _, err := e.p.Metrics(context.Background()); err != nil {
		t.Errorf("the metrics listener: %v", err)
	}
}

// TestMetricsProbeHiddenObjects: a caller that could read /metrics learns nothing
// there about the objects it may not view. The demo's help desk names a contact and
// a foreign security principal it may not view (as the group of a listing, as the
// member of a removal and of an addition), then look-alikes that name nothing, the
// same number of times each: every series moves by exactly as much for the hidden
// objects as for the unknown ones, with a candidate policy that would let it view
// and change everything deciding beside the active one. The Go runtime's and the
// process's series, and the durations' sums and buckets, vary by themselves and are
// left out.
func TestMetricsProbeHiddenObjects(t *testing.T) {
	cand := filepath.Dir(child.WriteFile(t, "authz.rego", "package dirgate.authz\n\nallow := true\n"))
	e := demoTarget(t, "--policy-candidate-dir", cand)
	const finance = "CN=Finance Team," + fixture.GroupsOU
	probe := func(object, sid string) map[string]float64 {
		t.Helper()
		before := scrape(t, e.p)
		ctx := context.Background()
		for _, r := range []child.Result{
			client.Do(ctx, "GET", child.ListURL(e.p.Base, object, ""), "demo-helpdesk"),
			client.Do(ctx, "GET", child.ListURL(e.p.Base, object, ""), "demo-helpdesk"),
			client.Do(ctx, "DELETE", child.RemoveURL(e.p.Base, fixture.MixedDN, object), "demo-helpdesk"),
			client.Do(ctx, "DELETE", child.RemoveURL(e.p.Base, fixture.MixedDN, sid), "demo-helpdesk"),
			client.Add(ctx, e.p.Base, finance, object, "demo-helpdesk"),
		} {
			if r.Status != 404 {
				t.Fatalf("probing %s: %s, want 404", object, r)
			}
		}
		after := scrape(t, e.p)
		delta := map[string]float64{}
		for k, v := range after {
			if d := v - before[k]; d != 0 {
				delta[k] = d
			}
		}
		return delta
	}
	hidden := probe("CN=Acme Support,"+fixture.ContactsOU, "S-1-5-11")
	unknown := probe("CN=Acme Supp0rt,"+fixture.ContactsOU, "S-1-5-21-2113472910-3286130475-1853229740-99999")
	for _, k := range slices.Sorted(maps.Keys(hidden)) {
		if hidden[k] != unknown[k] {
			t.Errorf("%s moved by %v for hidden objects, %v for unknown ones", k, hidden[k], unknown[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(unknown)) {
		if _, ok := hidden[k]; !ok {
			t.Errorf("%s moved by %v for unknown objects, not for hidden ones", k, unknown[k])
		}
	}
	if hidden[`dirgate_http_requests_total{cache="none",method="DELETE",route="groupMembers",status="404"}`] != 2 {
		t.Errorf("the probe's removals are not counted: %v", hidden)
	}
}

// scrape reads p's series that requests move deterministically.
func scrape(t *testing.T, p *child.Program) map[string]float64 {
	t.Helper()
	m, err := p.Metrics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	maps.DeleteFunc(m, func(k string, _ float64) bool {
		return strings.HasPrefix(k, "go_") || strings.HasPrefix(k, "process_") ||
			strings.Contains(k, "_seconds_sum") || strings.Contains(k, "_seconds_bucket")
	})
	return m
}
