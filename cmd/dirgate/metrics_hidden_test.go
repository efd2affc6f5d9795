package main

import (
	"bufio"
	"bytes"
	"context"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/upstream/breaker"
)

// vanishingDir is the demo directory without some of its objects: they answer as
// unknown (the memory upstream's notFound) and are in no group's members.
type vanishingDir struct {
	dirgate.Directory
	gone map[string]bool // GUIDs
}

func (d vanishingDir) Lookup(ctx context.Context, id dirgate.Identifier, props []string) (dirgate.Object, error) {
	o, err := d.Directory.Lookup(ctx, id, props)
	if err == nil && d.gone[o.GUID] {
		return dirgate.Object{}, dirgate.Errorf(dirgate.ENOTFOUND, "The object was not found.")
	}
	return o, err
}

func (d vanishingDir) Members(ctx context.Context, group dirgate.Object, props []string) ([]dirgate.Object, error) {
	objs, err := d.Directory.Members(ctx, group, props)
	return slices.DeleteFunc(objs, func(o dirgate.Object) bool { return d.gone[o.GUID] }), err
}

func (d vanishingDir) MemberOf(ctx context.Context, obj dirgate.Object) ([]dirgate.Object, error) {
	objs, err := d.Directory.MemberOf(ctx, obj)
	return slices.DeleteFunc(objs, func(o dirgate.Object) bool { return d.gone[o.GUID] }), err
}

// scrape returns every series of m's metrics that a client's requests move
// deterministically: the Go runtime's and the process's series, and the sums and
// buckets of durations (which vary from run to run), are left out.
func scrape(t *testing.T, m *Main) map[string]string {
	t.Helper()
	r := call(t, "GET", metricsURL(m), "")
	if r.status != 200 {
		t.Fatalf("/metrics: %d %s", r.status, r.body)
	}
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		i := strings.LastIndexByte(line, ' ')
		if line == "" || line[0] == '#' || i < 0 {
			continue
		}
		name := line[:i]
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") ||
			strings.Contains(name, "_seconds_sum") || strings.Contains(name, "_seconds_bucket") {
			continue
		}
		out[name] = line[i+1:]
	}
	return out
}

// TestMetricsTellNothingOfHiddenObjects: a caller that makes requests about an
// object it may not view moves every series of /metrics exactly as when that object
// does not exist. The same requests, by the help desk, go to two instances of the
// demo: one where a contact and a foreign security principal exist (members of
// Mixed Members, both outside the help desk's view) and one where they do not. The
// listing hides them on the first; the contact named as a group, as a member to
// remove and as one to add answers the unknown object's 404 on both. With a
// candidate policy that lets everyone view, remove and add everything (so that it
// decides differently about exactly those objects), every series but the Go
// runtime's, the process's and the durations' sums and buckets is the same on both.
// The upstream calls go through the circuit breaker's instrumentation, as the LDAP
// upstream's do.
func TestMetricsTellNothingOfHiddenObjects(t *testing.T) {
	const (
		mixed   = "CN=Mixed Members,OU=Groups,DC=corp,DC=example,DC=com"
		finance = "CN=Finance Team,OU=Groups,DC=corp,DC=example,DC=com"
		contact = "CN=Acme Support,OU=Contacts,DC=corp,DC=example,DC=com"
		fsp     = "S-1-5-11"
	)
	candDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(candDir, "authz.rego"), []byte("package dirgate.authz\n\nallow := true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	type run struct {
		answers []string
		metrics map[string]string
	}
	serve := func(gone ...string) run {
		m := startMain(t, func(m *Main) {
			m.wrapDirectory = func(d dirgate.Directory) dirgate.Directory {
				v := vanishingDir{Directory: d, gone: map[string]bool{}}
				for _, id := range gone {
					o, err := d.Lookup(context.Background(), dirgate.MustParseIdentifier(id), nil)
					if err != nil {
						t.Fatal(err)
					}
					v.gone[o.GUID] = true
				}
				return breaker.New(v, breaker.Settings{Name: "memory", TelemetryOnly: true})
			}
		}, "--policy-candidate-dir", candDir, "--decision-log", "off")
		base := "http://" + m.Addr() + "/restApi/api/directoryObjects/groupMembers"
		q := func(group string) string { return "?group=" + url.QueryEscape(group) }
		var r run
		for _, req := range []struct{ method, query, body string }{
			{"GET", q(mixed), ""},
			{"GET", q(mixed) + "&includeIndirect=true", ""},
			{"GET", q(contact), ""},
			{"DELETE", q(mixed) + "&member=" + url.QueryEscape(contact), ""},
			{"DELETE", q(mixed) + "&member=" + url.QueryEscape(fsp), ""},
			{"POST", "", addBody(finance, contact)},
		} {
			var res response
			if req.method == "POST" {
				res = post(t, base, "demo-helpdesk", "application/json", req.body)
			} else {
				res = call(t, req.method, base+req.query, "demo-helpdesk")
			}
			r.answers = append(r.answers, req.method+" "+req.query+" "+req.body+": "+string(res.body))
		}
		r.metrics = scrape(t, m)
		return r
	}
	hidden := serve()
	unknown := serve(contact, fsp)
	if !slices.Equal(hidden.answers, unknown.answers) {
		t.Fatalf("the answers differ:\nhidden:  %q\nunknown: %q", hidden.answers, unknown.answers)
	}
	var names []string
	for n := range hidden.metrics {
		names = append(names, n)
	}
	for n := range unknown.metrics {
		if _, ok := hidden.metrics[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		if h, u := hidden.metrics[n], unknown.metrics[n]; h != u {
			t.Errorf("%s is %q with hidden objects, %q with unknown ones", n, h, u)
		}
	}
	// The comparison is only worth something if the requests moved the series.
	for _, want := range []string{`dirgate_policy_decisions_total{action="view",decision="allow"}`,
		`dirgate_upstream_duration_seconds_count{operation="lookup",outcome="ok",upstream="memory"}`} {
		if hidden.metrics[want] == "" {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
