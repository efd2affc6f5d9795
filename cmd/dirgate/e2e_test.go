package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/test/harness/redistest"
	"github.com/dirgate/dirgate/upstream/memory"
)

const (
	helpDesk  = "CN=Help Desk,OU=Groups,DC=corp,DC=example,DC=com"
	hugo      = "CN=Hugo Helpdesk,OU=IT,OU=Staff,DC=corp,DC=example,DC=com"
	adminTok  = "demo-admin"
	unknownDN = "CN=Nobody,OU=Groups,DC=corp,DC=example,DC=com"
)

// startDemo runs the real program on port 0 with the embedded demo, as `make run` does.
func startDemo(t *testing.T, wrap func(dirgate.Directory) dirgate.Directory) (*Main, string) {
	t.Helper()
	m := startMain(t, func(m *Main) { m.wrapDirectory = wrap })
	return m, "http://" + m.Addr() + "/restApi/api/directoryObjects/groupMembers"
}

// startMain runs an instance on a free loopback port, logging errors only, with
// args after those defaults (the demo directory unless they say otherwise); before,
// when set, adjusts it before it starts. It is closed when the test ends.
func startMain(t *testing.T, before func(*Main), args ...string) *Main {
	t.Helper()
	cfg, err := LoadConfig(append([]string{"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--log-level", "error"}, args...),
		func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	m := NewMain(cfg, io.Discard, io.Discard)
	if before != nil {
		before(m)
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// metricsURL is m's /metrics, on its own listener (DIRGATE_METRICS_LISTEN).
func metricsURL(m *Main) string { return "http://" + m.MetricsAddr() + "/metrics" }

// startDemoWith runs the demo with args and returns its root URL.
func startDemoWith(t *testing.T, args ...string) string {
	t.Helper()
	return "http://" + startMain(t, nil, args...).Addr()
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func call(t *testing.T, method, u, token string) response {
	t.Helper()
	req, _ := http.NewRequest(method, u, nil)
	if token != "" {
		req.Header.Set("Adm-Authorization", token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{res.StatusCode, res.Header, b}
}

func list(t *testing.T, base, group, extra string) []dirgate.Object {
	t.Helper()
	return listAs(t, base, adminTok, group, extra)
}

func listAs(t *testing.T, base, token, group, extra string) []dirgate.Object {
	t.Helper()
	r := call(t, "GET", base+"?group="+url.QueryEscape(group)+extra, token)
	if r.status != 200 {
		t.Fatalf("GET %s: %d %s", group, r.status, r.body)
	}
	var objs []dirgate.Object
	if err := json.Unmarshal(r.body, &objs); err != nil {
		t.Fatal(err)
	}
	return objs
}

func dns(objs []dirgate.Object) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = o.DN
	}
	return out
}

func TestEndToEndDemo(t *testing.T) {
	_, base := startDemo(t, nil)
	demo, err := memory.Demo()
	if err != nil {
		t.Fatal(err)
	}
	hd, err := demo.Lookup(context.Background(), dirgate.MustParseIdentifier(helpDesk), nil)
	if err != nil {
		t.Fatal(err)
	}

	// The same group named by DN (any letter case), GUID (upper case, braces) and SID
	// gives the same listing.
	want := list(t, base, helpDesk, "&includeIndirect=true")
	if !strings.Contains(strings.Join(dns(want), "|"), hugo) {
		t.Fatalf("Help Desk listing lacks %s: %v", hugo, dns(want))
	}
	for _, form := range []string{strings.ToLower(helpDesk), "{" + strings.ToUpper(hd.GUID) + "}", hd.SID} {
		got := list(t, base, form, "&includeIndirect=TRUE")
		if strings.Join(dns(got), "|") != strings.Join(dns(want), "|") {
			t.Errorf("group=%s lists %v, want %v", form, dns(got), dns(want))
		}
	}

	// Direct listing is a subset; sizeLimit cuts it in listing order.
	direct := list(t, base, helpDesk, "")
	if len(direct) == 0 || len(direct) > len(want) {
		t.Fatalf("direct listing has %d objects, indirect %d", len(direct), len(want))
	}
	if got := list(t, base, helpDesk, "&includeIndirect=true&sizeLimit=1"); len(got) != 1 || got[0].DN != want[0].DN {
		t.Fatalf("sizeLimit=1 gave %v", dns(got))
	}

	// Errors come in the documented shape with the documented statuses.
	for _, tc := range []struct {
		name, method, query, token string
		status                     int
		code                       string
	}{
		{"no token", "GET", "?group=" + url.QueryEscape(helpDesk), "", 401, "unauthenticated"},
		{"bad token", "GET", "?group=" + url.QueryEscape(helpDesk), "nope", 401, "unauthenticated"},
		{"unknown group", "GET", "?group=" + url.QueryEscape(unknownDN), adminTok, 404, "notFound"},
		{"bad sizeLimit", "GET", "?group=" + url.QueryEscape(helpDesk) + "&sizeLimit=-1", adminTok, 400, "invalid"},
		{"missing member", "DELETE", "?group=" + url.QueryEscape(helpDesk), adminTok, 400, "invalid"},
		{"method", "PUT", "?group=" + url.QueryEscape(helpDesk), adminTok, 405, "methodNotAllowed"},
	} {
		r := call(t, tc.method, base+tc.query, tc.token)
		var body struct{ Message, Code string }
		if err := json.Unmarshal(r.body, &body); err != nil || r.status != tc.status || body.Code != tc.code || body.Message == "" {
			t.Errorf("%s: %d %s, want %d %s", tc.name, r.status, r.body, tc.status, tc.code)
		}
	}

	// Removal: a member goes, the listing no longer has it, a second removal is "no changes".
	del := base + "?group=" + url.QueryEscape(hd.SID) + "&member=" + url.QueryEscape(hugo)
	var res dirgate.OperationResult
	r := call(t, "DELETE", del, adminTok)
	if err := json.Unmarshal(r.body, &res); err != nil || r.status != 200 || res.ResultType != 0 || res.NoChanges || res.ActualObjectDN != helpDesk {
		t.Fatalf("first DELETE: %d %s", r.status, r.body)
	}
	if !bytes.Contains(r.body, []byte(`"innerMessages":[]`)) || !bytes.Contains(r.body, []byte(`"exception":null`)) || !bytes.Contains(r.body, []byte(`"extraInfo":{}`)) {
		t.Errorf("removal result not an operation result: %s", r.body)
	}
	for _, dn := range dns(list(t, base, helpDesk, "")) {
		if strings.EqualFold(dn, hugo) {
			t.Fatal("removed member still listed")
		}
	}
	r = call(t, "DELETE", del, adminTok)
	if err := json.Unmarshal(r.body, &res); err != nil || r.status != 200 || res.ResultType != 0 || !res.NoChanges {
		t.Fatalf("second DELETE: %d %s", r.status, r.body)
	}
}

// The bundled policy's demo roles give the two demo tokens different views
// (docs/policy.md): the help desk sees no contacts or foreign principals, and may not
// remove them, nor learn that they exist.
func TestDemoPolicyViews(t *testing.T) {
	_, base := startDemo(t, nil)
	const mixed = "CN=Mixed Members,OU=Groups,DC=corp,DC=example,DC=com"
	const contact = "CN=Acme Support,OU=Contacts,DC=corp,DC=example,DC=com"
	admin := dns(listAs(t, base, adminTok, mixed, ""))
	helpdesk := dns(listAs(t, base, "demo-helpdesk", mixed, ""))
	if len(helpdesk) == 0 || len(helpdesk) >= len(admin) {
		t.Fatalf("help desk sees %v, admin %v: want a smaller, non-empty view", helpdesk, admin)
	}
	if strings.Contains(strings.Join(helpdesk, "|"), contact) || !strings.Contains(strings.Join(admin, "|"), contact) {
		t.Fatalf("the contact should be visible to the admin only")
	}
	// sizeLimit counts what the caller may see, not what it may not.
	if got := listAs(t, base, "demo-helpdesk", mixed, "&sizeLimit="+fmt.Sprint(len(helpdesk))); len(got) != len(helpdesk) {
		t.Fatalf("sizeLimit=%d gave %d objects", len(helpdesk), len(got))
	}
	// A removal it may not make of a member it may not view is answered as an unknown
	// member (docs/api.md); of a member it views, 403.
	r := call(t, "DELETE", base+"?group="+url.QueryEscape(mixed)+"&member="+url.QueryEscape(contact), "demo-helpdesk")
	if r.status != 404 || string(r.body) != `{"message":"The member was not found.","code":"notFound"}` {
		t.Fatalf("help-desk removal of the contact: %d %s", r.status, r.body)
	}
	r = call(t, "DELETE", base+"?group="+url.QueryEscape(mixed)+"&member="+url.QueryEscape("CN=Daisy Vargas,OU=HR,OU=Staff,DC=corp,DC=example,DC=com"), "demo-helpdesk")
	if r.status != 403 || !bytes.Contains(r.body, []byte(`"code":"forbidden"`)) {
		t.Fatalf("help-desk removal of a user: %d %s", r.status, r.body)
	}
	if got := dns(listAs(t, base, adminTok, mixed, "")); len(got) != len(admin) {
		t.Fatalf("a denied removal changed the group: %v", got)
	}
}

func TestOperationalEndpoints(t *testing.T) {
	m, base := startDemo(t, nil)
	list(t, base, helpDesk, "")
	call(t, "GET", base+"?group="+url.QueryEscape(helpDesk), "wrong")
	root := "http://" + m.Addr()
	// Health and readiness need no token; they live outside the base path.
	if r := call(t, "GET", root+"/healthz", ""); r.status != 200 {
		t.Fatalf("/healthz: %d", r.status)
	}
	if r := call(t, "GET", root+"/readyz", ""); r.status != 200 || !bytes.Contains(r.body, []byte(`"status":"ready"`)) {
		t.Fatalf("/readyz: %d %s", r.status, r.body)
	}
	r := call(t, "GET", metricsURL(m), "")
	for _, want := range []string{
		`dirgate_http_requests_total{cache="miss",method="GET",route="groupMembers",status="200"} 1`,
		`dirgate_http_requests_total{cache="none",method="GET",route="groupMembers",status="401"} 1`,
		`dirgate_http_request_duration_seconds_bucket{cache="miss",method="GET",route="groupMembers",le="0.0005"}`,
		`http_server_request_duration_seconds_count{`,
	} {
		if !bytes.Contains(r.body, []byte(want)) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", r.body)
	}
	// The probes are on the metrics listener too, for a monitoring system that
	// reaches that port only; nothing else is.
	mroot := "http://" + m.MetricsAddr()
	if r := call(t, "GET", mroot+"/healthz", ""); r.status != 200 {
		t.Errorf("/healthz on the metrics listener: %d", r.status)
	}
	if r := call(t, "GET", mroot+"/readyz", ""); r.status != 200 || !bytes.Contains(r.body, []byte(`"status":"ready"`)) {
		t.Errorf("/readyz on the metrics listener: %d %s", r.status, r.body)
	}
	for _, path := range []string{"/restApi/api/directoryObjects/groupMembers", "/explorer/", "/"} {
		if r := call(t, "GET", mroot+path, adminTok); r.status != 404 {
			t.Errorf("%s on the metrics listener: %d, want 404", path, r.status)
		}
	}
}

// TestMetricsNotOnTheAPIListener: the API's listener answers /metrics exactly as any
// other unknown path, and with metrics-listen off no metrics listener opens.
func TestMetricsNotOnTheAPIListener(t *testing.T) {
	m := startMain(t, nil)
	root := "http://" + m.Addr()
	unknown := call(t, "GET", root+"/nothing-here", "")
	for _, path := range []string{"/metrics", "/Metrics", "/metrics/"} {
		r := call(t, "GET", root+path, "")
		if r.status != unknown.status || !bytes.Equal(r.body, unknown.body) || r.status != 404 {
			t.Errorf("GET %s on the API listener: %d %s, want the unknown path's %d %s", path, r.status, r.body, unknown.status, unknown.body)
		}
	}
	if off := startMain(t, nil, "--metrics-listen", "off"); off.MetricsAddr() != "" {
		t.Errorf("metrics-listen off: a metrics listener on %s", off.MetricsAddr())
	}
}

func TestVersionAndHelp(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"version"}, func(string) string { return "" }, &out, io.Discard); err != nil || !strings.HasPrefix(out.String(), "dirgate ") {
		t.Fatalf("version: %q %v", out.String(), err)
	}
	var help bytes.Buffer
	if err := run(context.Background(), []string{"--help"}, func(string) string { return "" }, io.Discard, &help); err != nil || !strings.Contains(help.String(), "DIRGATE_LISTEN") {
		t.Fatalf("help: %v\n%s", err, help.String())
	}
}

// slowDir holds every Lookup until release is closed, so a request is in flight.
type slowDir struct {
	dirgate.Directory
	started chan struct{}
	release chan struct{}
}

func (d *slowDir) Lookup(ctx context.Context, id dirgate.Identifier, props []string) (dirgate.Object, error) {
	select {
	case d.started <- struct{}{}:
	default:
	}
	select {
	case <-d.release:
	case <-ctx.Done():
		return dirgate.Object{}, ctx.Err()
	}
	return d.Directory.Lookup(ctx, id, props)
}

func TestGracefulShutdownFinishesInFlight(t *testing.T) {
	slow := &slowDir{started: make(chan struct{}, 1), release: make(chan struct{})}
	cfg, err := LoadConfig([]string{"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--log-level", "error"}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	m := NewMain(cfg, io.Discard, io.Discard)
	m.wrapDirectory = func(d dirgate.Directory) dirgate.Directory { slow.Directory = d; return slow }
	// The run context is what SIGTERM cancels (main's signal.NotifyContext).
	signal, sigterm := context.WithCancel(context.Background())
	if err := m.Run(signal); err != nil {
		t.Fatal(err)
	}
	base := "http://" + m.Addr() + "/restApi/api/directoryObjects/groupMembers"
	got := make(chan response, 1)
	go func() { got <- call(t, "GET", base+"?group="+url.QueryEscape(helpDesk), adminTok) }()
	<-slow.started // the request is inside the service

	sigterm() // as main does on SIGTERM: cancel the run context, then Close
	closed := make(chan error, 1)
	go func() { closed <- m.Close() }()
	select {
	case <-closed:
		t.Fatal("Close returned while a request was in flight")
	case <-time.After(200 * time.Millisecond):
	}
	close(slow.release)
	if r := <-got; r.status != 200 {
		t.Fatalf("in-flight request got %d %s", r.status, r.body)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}

// With Redis configured, listings come from the cache, say so, and a removal is never
// followed by a stale listing.
func TestEndToEndRedis(t *testing.T) {
	srv := redistest.Start(t)
	m := startMain(t, nil, withRedis(t, srv.Addr())...)
	base := "http://" + m.Addr() + "/restApi/api/directoryObjects/groupMembers"
	q := base + "?group=" + url.QueryEscape(helpDesk) + "&includeIndirect=true"
	for i, want := range []string{"miss", "hit"} {
		if r := call(t, "GET", q, adminTok); r.status != 200 || r.header.Get("X-Dirgate-Cache") != want {
			t.Fatalf("GET #%d: %d, X-Dirgate-Cache %q, want %q", i+1, r.status, r.header.Get("X-Dirgate-Cache"), want)
		}
	}
	if r := call(t, "DELETE", base+"?group="+url.QueryEscape(helpDesk)+"&member="+url.QueryEscape(hugo), adminTok); r.status != 200 {
		t.Fatalf("DELETE: %d %s", r.status, r.body)
	}
	r := call(t, "GET", q, adminTok)
	if r.status != 200 || bytes.Contains(r.body, []byte(hugo)) {
		t.Fatalf("listing after removal: %d, still lists the member: %v", r.status, bytes.Contains(r.body, []byte(hugo)))
	}
	if r := call(t, "GET", "http://"+m.Addr()+"/readyz", ""); !bytes.Contains(r.body, []byte(`"redis":"ok"`)) {
		t.Fatalf("/readyz does not report Redis: %s", r.body)
	}
}

// The request deadline (--request-timeout) is made lazily (internal/lazyctx): a call
// that waits on the directory must still be ended by it, with a 504 in the error shape.
func TestRequestDeadlineEndsASlowCall(t *testing.T) {
	slow := &slowDir{started: make(chan struct{}, 1), release: make(chan struct{})}
	// Without the deadline the call would be answered 200 once released.
	go func() { time.Sleep(5 * time.Second); close(slow.release) }()
	m := startMain(t, func(m *Main) {
		m.wrapDirectory = func(d dirgate.Directory) dirgate.Directory { slow.Directory = d; return slow }
	}, "--request-timeout", "300ms")
	base := "http://" + m.Addr() + "/restApi/api/directoryObjects/groupMembers"
	start := time.Now()
	r := call(t, "GET", base+"?group="+url.QueryEscape(helpDesk), adminTok)
	if took := time.Since(start); r.status != http.StatusGatewayTimeout || took > 4*time.Second {
		t.Fatalf("status %d after %v, want 504 at the 300ms deadline: %s", r.status, took, r.body)
	}
	if !bytes.Contains(r.body, []byte(`"code"`)) || !bytes.Contains(r.body, []byte(`"message"`)) {
		t.Fatalf("504 not in the error shape: %s", r.body)
	}
}

// withRedis returns the flags of an instance sharing the Redis at addr: its address
// and the secret file Redis requires (the same secret for every instance).
func withRedis(t testing.TB, addr string) []string {
	t.Helper()
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("the test deployment's secret, 32 bytes or more\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"--redis-addr", addr, "--secret-file", secret}
}

// TestMetricsAddressAnnounced: the address the metrics listener bound (port 0 picks
// one) is in the "dirgate serving" log line, beside the API's, and the demo's
// greeting shows where to scrape.
func TestMetricsAddressAnnounced(t *testing.T) {
	cfg, err := LoadConfig([]string{"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--log-flush", "0"},
		func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	m := NewMain(cfg, &stdout, &stderr)
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	m.Close()
	var line struct {
		Msg         string `json:"msg"`
		Addr        string `json:"addr"`
		MetricsAddr string `json:"metrics_addr"`
	}
	for _, l := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(l, `"dirgate serving"`) {
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatal(err)
			}
		}
	}
	if line.Addr != m.Addr() || line.MetricsAddr != m.MetricsAddr() || strings.HasSuffix(line.MetricsAddr, ":0") {
		t.Errorf("serving line %+v, want addr %s and metrics_addr %s", line, m.Addr(), m.MetricsAddr())
	}
	if want := "http://" + m.MetricsAddr() + "/metrics"; !strings.Contains(stdout.String(), want) {
		t.Errorf("the demo's greeting does not show %s:\n%s", want, stdout.String())
	}
}
