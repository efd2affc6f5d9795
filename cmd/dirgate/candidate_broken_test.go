package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// readyChecks reads /readyz's checks.
func readyChecks(t *testing.T, root string) map[string]string {
	t.Helper()
	r := call(t, "GET", root+"/readyz", "")
	var body struct {
		Status string            `json:"status"`
		Checks map[string]string `json:"checks"`
	}
	if err := json.Unmarshal(r.body, &body); err != nil || r.status != 200 || body.Status != "ready" {
		t.Fatalf("/readyz: %d %s", r.status, r.body)
	}
	return body.Checks
}

// TestBrokenCandidateReported: a candidate policy with a syntax error does not stop
// dirgate; /readyz reports it under policyCandidate (the active policy stays "ok"),
// /metrics by dirgate_policy_candidate_broken 1 and a failed reload, and every
// answer is the one dirgate gives without a candidate, with no candidate member in
// the decision log. Once the candidate is fixed, both reports clear.
func TestBrokenCandidateReported(t *testing.T) {
	const mixed = "CN=Mixed Members,OU=Groups,DC=corp,DC=example,DC=com"
	// A user the help desk views but may not remove (one it may not view would be
	// answered as unknown: docs/api.md).
	const daisy = "CN=Daisy Vargas,OU=HR,OU=Staff,DC=corp,DC=example,DC=com"
	dir := t.TempDir()
	candDir, dlog := filepath.Join(dir, "candidate"), filepath.Join(dir, "decisions.log")
	if err := os.Mkdir(candDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(candDir, "authz.rego"), []byte("package dirgate.authz\n\nallow if {\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	// What dirgate answers without a candidate: listings by two callers with
	// different rights, and a removal the help desk may not make.
	type answers struct {
		lists   [][]string
		removal int
	}
	ask := func(root string) answers {
		base := root + "/restApi/api/directoryObjects/groupMembers"
		var a answers
		for _, tok := range []string{adminTok, "demo-helpdesk"} {
			for _, g := range []string{helpDesk, mixed} {
				a.lists = append(a.lists, dns(listAs(t, base, tok, g, "&includeIndirect=true")))
			}
		}
		a.removal = call(t, "DELETE", base+"?group="+url.QueryEscape(mixed)+"&member="+url.QueryEscape(daisy), "demo-helpdesk").status
		return a
	}
	want := ask(startDemoWith(t))
	if want.removal != 403 {
		t.Fatalf("the help desk's removal of a user answered %d, want 403", want.removal)
	}

	m := startMain(t, nil, "--policy-candidate-dir", candDir, "--decision-log", dlog, "--log-flush", "0")
	root := "http://" + m.Addr()
	checks := readyChecks(t, root)
	if c := checks["policyCandidate"]; !strings.Contains(c, "the candidate policy does not load") || !strings.Contains(c, "no candidate is compared") {
		t.Errorf("/readyz's policyCandidate check is %q, want the broken candidate reported", c)
	}
	if checks["policy"] != "ok" {
		t.Errorf("/readyz's policy check is %q with a broken candidate", checks["policy"])
	}
	metrics := string(call(t, "GET", metricsURL(m), "").body)
	for _, m := range []string{"dirgate_policy_candidate_broken 1\n", `dirgate_policy_candidate_reloads_total{outcome="failed"} 1` + "\n"} {
		if !strings.Contains(metrics, m) {
			t.Errorf("/metrics lacks %q", strings.TrimSpace(m))
		}
	}

	got := ask(root)
	for i := range want.lists {
		if !slices.Equal(got.lists[i], want.lists[i]) {
			t.Errorf("listing %d with a broken candidate: %v, without a candidate %v", i, got.lists[i], want.lists[i])
		}
	}
	if got.removal != want.removal {
		t.Errorf("removal with a broken candidate answered %d, without a candidate %d", got.removal, want.removal)
	}
	lines := decisionLines(t, dlog)
	if len(lines) != len(want.lists)+1 {
		t.Errorf("%d decision lines, want %d", len(lines), len(want.lists)+1)
	}
	for _, l := range lines {
		if _, ok := l["candidate"]; ok {
			t.Errorf("a broken candidate was compared: %v", l)
		}
	}

	// Fixed (the bundled policy, which the demo runs), the candidate loads.
	if err := os.WriteFile(filepath.Join(candDir, "authz.rego"), mustRead(t, "authz.rego"), 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for readyChecks(t, root)["policyCandidate"] != "ok" {
		if time.Now().After(deadline) {
			t.Fatalf("the fixed candidate is still reported: %q", readyChecks(t, root)["policyCandidate"])
		}
		time.Sleep(50 * time.Millisecond)
	}
	metrics = string(call(t, "GET", metricsURL(m), "").body)
	if !strings.Contains(metrics, "dirgate_policy_candidate_broken 0\n") {
		t.Errorf("/metrics does not clear dirgate_policy_candidate_broken once the candidate loads")
	}
}

// decisionLines reads a decision log file's lines.
func decisionLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("decision line %q: %v", sc.Bytes(), err)
		}
		out = append(out, l)
	}
	return out
}
