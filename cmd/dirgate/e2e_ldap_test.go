package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/test/harness/redistest"
	"github.com/dirgate/dirgate/test/harness/sambatest"
	goldap "github.com/go-ldap/ldap/v3"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// startLDAP runs the real program against the harness's Samba AD DC, with a tokens
// file whose one token acts as the fixture's administrator.
func startLDAP(t *testing.T, dc sambatest.DC, extra ...string) string {
	t.Helper()
	return startLDAPWith(t, dc, nil, extra...)
}

// startLDAPWith is startLDAP with a hook that sets test fields on Main before Run.
func startLDAPWith(t *testing.T, dc sambatest.DC, hook func(*Main), extra ...string) string {
	t.Helper()
	dir := t.TempDir()
	pw := filepath.Join(dir, "password")
	tokens := filepath.Join(dir, "tokens.yaml")
	os.WriteFile(pw, []byte(dc.Password), 0o600)
	os.WriteFile(tokens, []byte("- token: e2e-admin\n  subject: "+fixture.DemoAdminDN+"\n"), 0o600)
	cfg, err := LoadConfig(append([]string{"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--log-level", "error", "--upstream", "ldap",
		"--ldap-url", dc.URL, "--ldap-bind-dn", dc.BindDN, "--ldap-password-file", pw, "--ldap-base-dn", dc.BaseDN,
		"--ldap-ca-file", dc.CAFile, "--tokens-file", tokens}, extra...), func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	m := NewMain(cfg, io.Discard, io.Discard)
	if hook != nil {
		hook(m)
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return "http://" + m.Addr() + "/restApi/api/directoryObjects/groupMembers"
}

// ldapsearchDNs runs the ldapsearch CLI, as an operator would, and returns the DNs it
// prints: the values of attr when attr is set, otherwise the entries' own DNs.
func ldapsearchDNs(t *testing.T, dc sambatest.DC, base, scope, filter, attr string) []string {
	t.Helper()
	pw := filepath.Join(t.TempDir(), "pw")
	os.WriteFile(pw, []byte(dc.AdminPassword), 0o600)
	args := []string{"-LLL", "-o", "ldif-wrap=no", "-E", "pr=1000/noprompt", "-H", dc.URL, "-D", dc.AdminDN, "-y", pw,
		"-b", base, "-s", scope, filter}
	if attr != "" {
		args = append(args, attr)
	} else {
		args = append(args, "1.1")
	}
	cmd := exec.Command("ldapsearch", args...)
	cmd.Env = append(os.Environ(), "LDAPTLS_CACERT="+dc.CAFile)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ldapsearch %v: %v", args, err)
	}
	key := "dn"
	if attr != "" {
		key = attr
	}
	var dns []string
	for _, line := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(line, key+": "):
			dns = append(dns, strings.TrimPrefix(line, key+": "))
		case strings.HasPrefix(line, key+":: "):
			b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(line, key+":: "))
			if err != nil {
				t.Fatal(err)
			}
			dns = append(dns, string(b))
		}
	}
	return dns
}

func keys(t *testing.T, dns []string) []string {
	out := make([]string, 0, len(dns))
	for _, s := range dns {
		d, err := dirgate.ParseDN(s)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		out = append(out, d.Key())
	}
	sort.Strings(out)
	return out
}

func sameSet(t *testing.T, what string, got, want []string) {
	t.Helper()
	g, w := keys(t, got), keys(t, want)
	if strings.Join(g, "\n") != strings.Join(w, "\n") {
		t.Fatalf("%s: dirgate listed %d objects, ldapsearch %d; they differ", what, len(g), len(w))
	}
}

func TestEndToEndLDAP(t *testing.T) {
	dc := sambatest.Env(t)
	if dc.FixtureDir == "" {
		t.Fatal("the DC was started without the project fixture (test/harness/samba/dc.sh seeds it when present)")
	}
	// Generous deadlines: this test checks answers, not speed, and All Staff's nested
	// listing outlasted the default 10 s on a CI-like machine at a load average of 22.
	var m *Main
	base := startLDAPWith(t, dc, func(mm *Main) { m = mm }, "--ldap-timeout", "1m", "--request-timeout", "90s")

	// Direct listing of a group beyond AD's 1,500-value range equals its member values.
	got := listAs(t, base, "e2e-admin", fixture.AllStaffDN, "")
	sameSet(t, "All Staff, direct", dns(got), ldapsearchDNs(t, dc, fixture.AllStaffDN, "base", "(objectClass=*)", "member"))

	// Indirect listing equals the in-chain matching rule's answer (minus the group
	// itself, which the rule returns when a cycle leads back to it).
	got = listAs(t, base, "e2e-admin", fixture.ITDepartmentDN, "&includeIndirect=true")
	chain := ldapsearchDNs(t, dc, dc.BaseDN, "sub", "(memberOf:1.2.840.113556.1.4.1941:="+goldap.EscapeFilter(fixture.ITDepartmentDN)+")", "")
	var want []string
	for _, d := range chain {
		if !strings.EqualFold(d, fixture.ITDepartmentDN) {
			want = append(want, d)
		}
	}
	sameSet(t, "IT Department, indirect", dns(got), want)

	// Upstream calls and the LDAP pool show on /metrics.
	metrics := call(t, "GET", metricsURL(m), "")
	server := `server="` + dc.URL + `"`
	for _, want := range []string{`dirgate_ldap_pool_size{` + server + `} 4`, `dirgate_ldap_dials_total{` + server,
		`dirgate_ldap_server_up{` + server + `} 1`, `dirgate_ldap_server_requests_total{outcome="ok",` + server,
		`dirgate_upstream_duration_seconds_count{operation="members",outcome="ok",upstream="ldap"}`,
		`dirgate_upstream_breaker_state{upstream="ldap"} 0`, `dirgate_upstream_breaker_state{` + server + `,upstream="ldap"} 0`} {
		if !strings.Contains(string(metrics.body), want) {
			var near []string
			for _, l := range strings.Split(string(metrics.body), "\n") {
				if name, _, _ := strings.Cut(want, "{"); strings.HasPrefix(l, name) {
					near = append(near, l)
				}
			}
			t.Errorf("/metrics lacks %s; it has %q", want, near)
		}
	}

	// The in-chain option gives the same listing as the breadth-first expansion.
	// Samba answers an in-chain search by walking the whole base (about 2 s for IT
	// Department on an idle DC); while `make test` runs the other packages against the
	// same DC it twice took longer than the default 10 s --ldap-timeout (a 504). This
	// test is about the listing, not the latency, so it gives the call room.
	inChain := startLDAP(t, dc, "--ldap-in-chain", "--ldap-timeout", "2m", "--request-timeout", "3m")
	sameSet(t, "IT Department, indirect, in-chain", dns(listAs(t, inChain, "e2e-admin", fixture.ITDepartmentDN, "&includeIndirect=true")), dns(got))

	// sizeLimit applies over LDAP too (Samba ignores the protocol's size limit).
	if first := listAs(t, base, "e2e-admin", fixture.AllStaffDN, "&sizeLimit=3"); len(first) != 3 {
		t.Fatalf("sizeLimit=3 gave %d objects", len(first))
	}

	// The same group by GUID and SID lists the same objects as by DN.
	group := listAs(t, base, "e2e-admin", fixture.ITSupportDN, "")
	var itSupport dirgate.Object
	for _, o := range listAs(t, base, "e2e-admin", fixture.ITDepartmentDN, "&properties=objectSid") {
		if strings.EqualFold(o.DN, fixture.ITSupportDN) {
			itSupport = o
		}
	}
	if itSupport.GUID == "" || len(itSupport.Properties["objectsid"]) != 1 {
		t.Fatalf("IT Support not listed in IT Department with its SID")
	}
	for _, form := range []string{strings.ToUpper(itSupport.GUID), itSupport.Properties["objectsid"][0]} {
		sameSet(t, "IT Support by "+form, dns(listAs(t, base, "e2e-admin", form, "")), dns(group))
	}

	// Removal over HTTP changes the directory; a second removal changes nothing.
	groupDN := dc.TempGroup(t, "dirgate e2e", fixture.RegularDN, fixture.NeverExpiresDN)
	del := base + "?group=" + url.QueryEscape(groupDN) + "&member=" + url.QueryEscape(fixture.RegularDN)
	for i, wantNoChanges := range []bool{false, true} {
		r := call(t, "DELETE", del, "e2e-admin")
		var res dirgate.OperationResult
		if err := json.Unmarshal(r.body, &res); err != nil || r.status != 200 || res.ResultType != 0 || res.NoChanges != wantNoChanges {
			t.Fatalf("DELETE #%d: %d %s", i+1, r.status, r.body)
		}
	}
	sameSet(t, "after removal", ldapsearchDNs(t, dc, groupDN, "base", "(objectClass=*)", "member"), []string{fixture.NeverExpiresDN})
}

// spanTree indexes exported spans by name and parent, for one trace.
type spanTree struct {
	spans []tracetest.SpanStub
}

func (s spanTree) named(name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, sp := range s.spans {
		if sp.Name == name {
			out = append(out, sp)
		}
	}
	return out
}

// one returns a span called name that descends from root (lookups are cached too, so
// a name such as "cache write" may also appear elsewhere in the trace).
func (s spanTree) one(t *testing.T, name string, root tracetest.SpanStub) tracetest.SpanStub {
	t.Helper()
	byID := map[trace.SpanID]tracetest.SpanStub{}
	for _, x := range s.spans {
		byID[x.SpanContext.SpanID()] = x
	}
	descends := func(sp tracetest.SpanStub) bool {
		for p := sp; ; {
			if p.SpanContext.SpanID() == root.SpanContext.SpanID() {
				return true
			}
			parent, ok := byID[p.Parent.SpanID()]
			if !ok {
				return false
			}
			p = parent
		}
	}
	for _, sp := range s.named(name) {
		if descends(sp) {
			return sp
		}
	}
	t.Fatalf("no %q span below %q among %v", name, root.Name, s.names())
	return tracetest.SpanStub{}
}

func (s spanTree) names() []string {
	var n []string
	for _, sp := range s.spans {
		n = append(n, sp.Name)
	}
	return n
}

func attr(sp tracetest.SpanStub, key string) string {
	for _, kv := range sp.Attributes {
		if string(kv.Key) == key {
			return kv.Value.Emit()
		}
	}
	return ""
}

// TestTracesLDAP follows a cache miss, a hit and a removal through the real program
// against the DC and Redis, and checks each trace's tree: where the time went, and
// that no token, password or cached value is in any span.
func TestTracesLDAP(t *testing.T) {
	dc := sambatest.Env(t)
	srv := redistest.Start(t)
	exp := tracetest.NewInMemoryExporter()
	// The first listing's Redis calls dial the pool: on a loaded machine that took
	// longer than the default 100 ms bound once, and the listing bypassed the cache.
	// The traces' shapes, not Redis's speed, are under test.
	base := startLDAPWith(t, dc, func(m *Main) { m.spanExporter = exp }, append(withRedis(t, srv.Addr()), "--redis-timeout", "5s")...)

	// traceOf sends one request (with a JSON body when body is not empty) and returns
	// the spans of its trace.
	traceOf := func(method, u, body string) spanTree {
		t.Helper()
		exp.Reset()
		req, _ := http.NewRequest(method, u, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Adm-Authorization", "e2e-admin")
		// A client's W3C trace context is continued, not replaced.
		req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("%s: %d", method, res.StatusCode)
		}
		// Background work (a Redis pool dial) has traces of its own; the request's
		// spans all continue the client's.
		var spans []tracetest.SpanStub
		for _, sp := range exp.GetSpans() {
			if sp.SpanContext.TraceID().String() == "4bf92f3577b34da6a3ce929d0e0e4736" {
				spans = append(spans, sp)
			}
			for _, kv := range sp.Attributes {
				v := kv.Value.Emit()
				if strings.Contains(v, "e2e-admin") || strings.Contains(v, dc.Password) || strings.Contains(v, "displayName") {
					t.Fatalf("span %q attribute %s leaks %q", sp.Name, kv.Key, v)
				}
			}
		}
		return spanTree{spans: spans}
	}
	server := func(tr spanTree) tracetest.SpanStub {
		t.Helper()
		for _, sp := range tr.spans {
			if sp.SpanKind == trace.SpanKindServer {
				if attr(sp, "http.route") != "/restApi/api/directoryObjects/groupMembers" {
					t.Fatalf("server span %q has route %q", sp.Name, attr(sp, "http.route"))
				}
				return sp
			}
		}
		t.Fatalf("no server span among %v", tr.names())
		return tracetest.SpanStub{}
	}

	list := base + "?group=" + url.QueryEscape(fixture.ITDepartmentDN) + "&includeIndirect=true"
	miss := traceOf("GET", list, "")
	root := miss.one(t, "GET /restApi/api/directoryObjects/groupMembers", server(miss))
	miss.one(t, "authenticate", root)
	cl := miss.one(t, "cache listing", root)
	if attr(cl, "dirgate.cache") != "miss" {
		t.Fatalf("first listing: cache %q", attr(cl, "dirgate.cache"))
	}
	up := miss.one(t, "upstream members", cl)
	if attr(up, "dirgate.breaker.state") != "closed" || attr(up, "dirgate.upstream") != "ldap" {
		t.Fatalf("upstream span attributes: %v", up.Attributes)
	}
	miss.one(t, "cache write", cl)
	pf := miss.one(t, "policy filter", root)
	if attr(pf, "dirgate.policy.allowed") == "" || attr(pf, "dirgate.policy.denied") == "" {
		t.Fatalf("policy span lacks counts: %v", pf.Attributes)
	}
	for _, sp := range miss.spans {
		if attr(sp, "db.system") == "redis" && attr(sp, "db.statement") != "" {
			t.Fatalf("redis span %q records its command's values", sp.Name)
		}
	}

	hit := traceOf("GET", list, "")
	cl = hit.one(t, "cache listing", server(hit))
	if attr(cl, "dirgate.cache") != "hit" || len(hit.named("upstream members")) != 0 {
		t.Fatalf("second listing: cache %q, upstream member reads %d", attr(cl, "dirgate.cache"), len(hit.named("upstream members")))
	}

	// Removal: decided, written upstream, then the cache invalidated.
	groupDN := dc.TempGroup(t, "dirgate trace", fixture.RegularDN)
	rm := traceOf("DELETE", base+"?group="+url.QueryEscape(groupDN)+"&member="+url.QueryEscape(fixture.RegularDN), "")
	root = server(rm)
	rm.one(t, "policy remove decision", root)
	rm.one(t, "upstream remove_member", root)
	rm.one(t, "cache invalidate", root)

	// Addition: the same steps, under the POST's server span.
	ad := traceOf("POST", base, addBody(groupDN, fixture.RegularDN))
	root = ad.one(t, "POST /restApi/api/directoryObjects/groupMembers", server(ad))
	ad.one(t, "policy add decision", root)
	ad.one(t, "upstream add_member", root)
	ad.one(t, "cache invalidate", root)
}
