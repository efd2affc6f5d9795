package main

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestEndToEndOPAConfig: dirgate with DIRGATE_OPA_CONFIG_FILE takes the bundled
// policy from a bundle service, answers as it does with the bundled policy, names
// the bundle on /readyz, writes each decision line to its log and sends it to the
// decision-log service as an OPA event; a bundle that is not one is reported on
// /readyz with the instance still ready, and the answers unchanged.
func TestEndToEndOPAConfig(t *testing.T) {
	const mixed = "CN=Mixed Members,OU=Groups,DC=corp,DC=example,DC=com"
	bundle := mustReadBundle(t)
	var mu sync.Mutex
	serveGarbage := false
	bundles := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if serveGarbage {
			fmt.Fprint(w, "not a bundle")
			return
		}
		w.Write(bundle)
	}))
	t.Cleanup(bundles.Close)
	var events []map[string]any
	logs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gz, err := gzip.NewReader(r.Body)
		if err != nil {
			t.Error(err)
			return
		}
		var evs []map[string]any
		if err := json.NewDecoder(gz).Decode(&evs); err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		events = append(events, evs...)
		mu.Unlock()
	}))
	t.Cleanup(logs.Close)
	dir := t.TempDir()
	cfg := fmt.Sprintf(`services:
  bundles: {url: %q}
  logs: {url: %q}
bundles:
  authz:
    service: bundles
    resource: authz.tar.gz
    polling: {min_delay_seconds: 1, max_delay_seconds: 1}
decision_logs:
  service: logs
  reporting: {min_delay_seconds: 1, max_delay_seconds: 1}
persistence_directory: %q
`, bundles.URL, logs.URL, filepath.Join(dir, "opa"))
	cfgFile := filepath.Join(dir, "opa.yaml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	dlog := filepath.Join(dir, "decisions.log")

	base := "/restApi/api/directoryObjects/groupMembers"
	want := dns(listAs(t, startDemoWith(t)+base, "demo-helpdesk", mixed, ""))
	// The test's bundle is unsigned and its services plain HTTP (refused by
	// default: TestOPAUnverifiedRefusedAtStart).
	m := startMain(t, nil, "--opa-config-file", cfgFile, "--decision-log", dlog, "--log-flush", "0",
		"--opa-allow-unsigned-bundles", "--opa-allow-plain-http")
	root := "http://" + m.Addr()
	if got := dns(listAs(t, root+base, "demo-helpdesk", mixed, "")); !slices.Equal(got, want) {
		t.Errorf("listing with the bundle: %v, with the bundled policy %v", got, want)
	}
	if c := readyChecks(t, root)["policy"]; c != "ok" {
		t.Errorf("/readyz policy check %q", c)
	}
	lines := decisionLines(t, dlog)
	if len(lines) != 1 {
		t.Fatalf("%d decision lines, want 1", len(lines))
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(events)
		mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no decision event after 30 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	ev := events[0]
	mu.Unlock()
	if ev["decision_id"] != lines[0]["decision_id"] || ev["custom"].(map[string]any)["revision"] != lines[0]["revision"] {
		t.Errorf("event %v does not match the decision line %v", ev, lines[0])
	}
	metrics := string(call(t, "GET", metricsURL(m), "").body)
	if !strings.Contains(metrics, `dirgate_decision_log_dropped_total{reason="queue_full"} 0`) {
		t.Error("/metrics lacks dirgate_decision_log_dropped_total at 0")
	}

	mu.Lock()
	serveGarbage = true
	mu.Unlock()
	for readyChecks(t, root)["policy"] == "ok" {
		if time.Now().After(deadline.Add(30 * time.Second)) {
			t.Fatal("a garbage bundle is not reported on /readyz")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if c := readyChecks(t, root)["policy"]; !strings.Contains(c, "no new policy loads from bundles [authz]") || !strings.Contains(c, lines[0]["revision"].(string)) {
		t.Errorf("/readyz policy check %q, want the bundle and the revision in force named", c)
	}
	if r := call(t, "GET", root+"/readyz", ""); r.status != 200 {
		t.Errorf("/readyz answered %d with a refused bundle, want the instance ready", r.status)
	}
	if got := dns(listAs(t, root+base, "demo-helpdesk", mixed, "")); !slices.Equal(got, want) {
		t.Errorf("listing after a refused bundle: %v, want %v", got, want)
	}
}

// mustReadBundle is the bundled policy (rego/) as a bundle file's bytes.
func mustReadBundle(t *testing.T) []byte {
	t.Helper()
	p := writeBundle(t, map[string]string{
		"authz.rego": string(mustRead(t, "authz.rego")),
		"data.json":  string(mustRead(t, "data.json")),
		".manifest":  `{"revision": "demo-1"}`,
	})
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestOPAConsoleDecisions: decision_logs.console writes dirgate's decision line on
// stdout even with DIRGATE_DECISION_LOG off, and no service is needed for it.
func TestOPAConsoleDecisions(t *testing.T) {
	bundle := mustReadBundle(t)
	bundles := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(bundle) }))
	t.Cleanup(bundles.Close)
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "opa.yaml")
	cfg := fmt.Sprintf("services:\n  b: {url: %q}\nbundles:\n  authz: {service: b, resource: authz.tar.gz}\ndecision_logs:\n  console: true\npersistence_directory: %q\n",
		bundles.URL, filepath.Join(dir, "opa"))
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig([]string{"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--log-level", "error", "--opa-config-file", cfgFile,
		"--decision-log", "off", "--log-flush", "0", "--opa-allow-unsigned-bundles", "--opa-allow-plain-http"}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var stdout syncBuffer
	m := NewMain(c, &stdout, io.Discard)
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	listAs(t, "http://"+m.Addr()+"/restApi/api/directoryObjects/groupMembers", "demo-helpdesk", "CN=Mixed Members,OU=Groups,DC=corp,DC=example,DC=com", "")
	// The demo's banner comes first; the decision line is the last line.
	out := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var line map[string]any
	if err := json.Unmarshal([]byte(out[len(out)-1]), &line); err != nil || line["path"] != "dirgate/authz/allow" {
		t.Errorf("stdout %q (%v), want a decision line last", stdout.String(), err)
	}
}

// TestOPAUnverifiedRefusedAtStart: dirgate does not start on an unsigned bundle
// served over plain HTTP, and says which settings would accept it, without a
// request to the service; with both settings it starts, and says so in its log,
// as it does of DIRGATE_POLICY_NETWORK_BUILTINS.
func TestOPAUnverifiedRefusedAtStart(t *testing.T) {
	bundle := mustReadBundle(t)
	var requests atomic.Int64
	bundles := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Write(bundle)
	}))
	t.Cleanup(bundles.Close)
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "opa.yaml")
	cfg := fmt.Sprintf("services:\n  b: {url: %q}\nbundles:\n  authz: {service: b, resource: authz.tar.gz}\npersistence_directory: %q\n",
		bundles.URL, filepath.Join(dir, "opa"))
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	start := func(extra ...string) (*Main, string, error) {
		c, err := LoadConfig(append([]string{"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--log-level", "warn", "--log-format", "text",
			"--opa-config-file", cfgFile, "--decision-log", "off", "--log-flush", "0"}, extra...), func(string) string { return "" }, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		var stderr syncBuffer
		m := NewMain(c, io.Discard, &stderr)
		err = m.Run(context.Background())
		t.Cleanup(func() { m.Close() })
		return m, stderr.String(), err
	}
	_, _, err := start()
	for _, w := range []string{"DIRGATE_OPA_ALLOW_UNSIGNED_BUNDLES", "DIRGATE_OPA_ALLOW_PLAIN_HTTP"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("start = %v, want it refused naming %s", err, w)
		}
	}
	if n := requests.Load(); n > 0 {
		t.Errorf("%d requests to the bundle service before the refusal", n)
	}
	m, log, err := start("--opa-allow-unsigned-bundles", "--opa-allow-plain-http", "--policy-network-builtins")
	if err != nil {
		t.Fatalf("with both settings: %v", err)
	}
	if !strings.Contains(log, "INSECURE: bundle authz has no signing block") || !strings.Contains(log, "INSECURE: service b is plain HTTP") {
		t.Errorf("the log does not warn of the unsigned bundle and the plain HTTP service:\n%s", log)
	}
	if !strings.Contains(log, "INSECURE: policies may call http.send") {
		t.Errorf("the log does not warn of DIRGATE_POLICY_NETWORK_BUILTINS:\n%s", log)
	}
	listAs(t, "http://"+m.Addr()+"/restApi/api/directoryObjects/groupMembers", "demo-helpdesk", "CN=Mixed Members,OU=Groups,DC=corp,DC=example,DC=com", "")
}

// TestOPABundleMaxBytesPositive: a bound of zero or less would let any bundle
// through (OPA's own default is 1 GiB per file): refused with the setting named.
func TestOPABundleMaxBytesPositive(t *testing.T) {
	for _, v := range []string{"0", "-1"} {
		_, err := LoadConfig([]string{"--opa-bundle-max-bytes", v}, func(string) string { return "" }, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "opa-bundle-max-bytes (DIRGATE_OPA_BUNDLE_MAX_BYTES): must be positive") {
			t.Errorf("--opa-bundle-max-bytes %s: %v", v, err)
		}
	}
}
