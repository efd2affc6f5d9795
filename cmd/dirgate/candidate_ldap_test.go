package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"

	"github.com/dirgate/dirgate/policy/explain"
	bundled "github.com/dirgate/dirgate/rego"
	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/test/harness/sambatest"
)

// rolesDir writes the bundled policy with roles of its own (trustees by DN, as a
// Samba DC makes up its own GUIDs and SIDs).
func rolesDir(t *testing.T, roles ...any) (string, map[string]any) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "authz.rego"), mustRead(t, "authz.rego"), 0o600); err != nil {
		t.Fatal(err)
	}
	data := map[string]any{"dirgate": map[string]any{"roles": roles}}
	b, _ := json.Marshal(data)
	if err := os.WriteFile(filepath.Join(dir, "data.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, data
}

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := bundled.FS.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func role(name, trustee string, perms, types []string, scopes ...map[string]any) map[string]any {
	r := map[string]any{"name": name, "trustees": []string{trustee}, "permissions": perms, "scopes": scopes}
	if types != nil {
		r["objectTypes"] = types
	}
	return r
}

// refPolicy evaluates data.dirgate.authz.allow once per object with OPA itself:
// the independent computation the gateway is compared with.
type refPolicy struct{ q rego.PreparedEvalQuery }

func newRefPolicy(t *testing.T, data map[string]any) refPolicy {
	t.Helper()
	q, err := rego.New(rego.Query("data.dirgate.authz.allow"), rego.Module("authz.rego", string(mustRead(t, "authz.rego"))),
		rego.Store(inmem.NewFromObject(data))).PrepareForEval(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return refPolicy{q}
}

func (r refPolicy) allow(t *testing.T, action string, subject, object, group any, indirect bool) bool {
	t.Helper()
	req := map[string]any{"includeIndirect": indirect && action == "view", "properties": []any{}, "sizeLimit": 0}
	in := map[string]any{"action": action, "subject": subject, "object": object, "group": group, "request": req}
	rs, err := r.q.Eval(context.Background(), rego.EvalInput(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 {
		return false
	}
	b, ok := rs[0].Expressions[0].Value.(bool)
	return ok && b
}

var differencesMetric = regexp.MustCompile(`(?m)^dirgate_policy_candidate_differences_total\{([^}]*)\} (\d+)`)

// differences reads the candidate's difference counters from m's /metrics.
func differences(t *testing.T, m *Main) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, m := range differencesMetric.FindAllStringSubmatch(string(call(t, "GET", metricsURL(m), "").body), -1) {
		labels := m[1]
		key := ""
		for _, l := range []string{`action="view"`, `action="remove"`, `change="newly_allowed"`, `change="newly_denied"`} {
			if strings.Contains(labels, l) {
				key += l
			}
		}
		n, _ := strconv.Atoi(m[2])
		out[key] += n
	}
	return out
}

// TestCandidateLDAP runs a candidate policy beside the active one against the
// Samba DC, for three callers with different rights: the answers are the active
// policy's, the decision log's candidate members and the difference counters equal
// an independent per-object evaluation of both policies, the decisions API's
// decisions equal it too, and a caller without the explain permission gets 403.
func TestCandidateLDAP(t *testing.T) {
	dc := sambatest.Env(t)
	group := dc.TempGroup(t, "Candidate Test", fixture.DemoAdminDN, fixture.RegularDN, fixture.CommaNameDN,
		fixture.NonASCIINameDN, fixture.HelpDeskDN, fixture.MixedDN)
	admins := role("admins", fixture.DirectoryAdminsDN, []string{"view", "remove", "add", "explain"}, nil, map[string]any{"all": true})
	// Everyone views the groups of OU=Groups under both policies: a caller lists only
	// a group it may view (docs/api.md).
	groups := role("everyone-groups", fixture.DomainUsersDN, []string{"view"}, []string{"group"}, map[string]any{"subtree": fixture.GroupsOU})
	activeDir, activeData := rolesDir(t, admins, groups,
		role("help-desk", fixture.HelpDeskDN, []string{"view"}, []string{"user"}, map[string]any{"subtree": fixture.StaffOU}))
	candDir, candData := rolesDir(t, admins, groups,
		role("help-desk", fixture.HelpDeskDN, []string{"view", "remove"}, []string{"user", "group", "computer", "contact"},
			map[string]any{"subtree": fixture.ITOU}, map[string]any{"subtree": fixture.GroupsOU}, map[string]any{"subtree": fixture.ContactsOU}),
		role("everyone-hr", fixture.DomainUsersDN, []string{"view"}, []string{"user"}, map[string]any{"subtree": fixture.HROU}))
	active, cand := newRefPolicy(t, activeData), newRefPolicy(t, candData)

	dir := t.TempDir()
	pw, tokens, dlog := filepath.Join(dir, "password"), filepath.Join(dir, "tokens.yaml"), filepath.Join(dir, "decisions.log")
	os.WriteFile(pw, []byte(dc.Password), 0o600)
	callers := map[string]string{"e2e-admin": fixture.DemoAdminDN, "e2e-helpdesk": fixture.DemoHelpdeskDN, "e2e-regular": fixture.RegularDN}
	var tf strings.Builder
	for tok, dn := range callers {
		tf.WriteString("- token: " + tok + "\n  subject: '" + dn + "'\n")
	}
	os.WriteFile(tokens, []byte(tf.String()), 0o600)
	cfg, err := LoadConfig([]string{"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--log-level", "error", "--upstream", "ldap",
		"--ldap-url", dc.URL, "--ldap-bind-dn", dc.BindDN, "--ldap-password-file", pw, "--ldap-base-dn", dc.BaseDN,
		"--ldap-ca-file", dc.CAFile, "--tokens-file", tokens, "--policy-dir", activeDir, "--policy-candidate-dir", candDir,
		"--decision-log", dlog, "--log-flush", "0"}, func(string) string { return "" }, io.Discard) // lines read at once
	if err != nil {
		t.Fatal(err)
	}
	m := NewMain(cfg, io.Discard, io.Discard)
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	root := "http://" + m.Addr()
	api := root + "/restApi/api/directoryObjects/groupMembers"
	before := differences(t, m)

	// The unfiltered listing, as the administrator (who sees everything) gets it.
	r := call(t, "GET", api+"?includeIndirect=true&group="+url.QueryEscape(group), "e2e-admin")
	var objects []map[string]any
	if err := json.Unmarshal(r.body, &objects); err != nil || r.status != 200 || len(objects) < 6 {
		t.Fatalf("admin listing: %d %s", r.status, r.body)
	}
	wantDiff := map[string]int{}
	for tok, dn := range callers {
		q := url.Values{"subject": {dn}, "group": {group}, "includeIndirect": {"true"}}
		r := call(t, "GET", root+"/restApi/api/policy/decisions?"+q.Encode(), "e2e-admin")
		var raw struct {
			Subject map[string]any `json:"subject"`
			Group   map[string]any `json:"group"`
		}
		var ex explain.Explanation
		if r.status != 200 || json.Unmarshal(r.body, &raw) != nil || json.Unmarshal(r.body, &ex) != nil {
			t.Fatalf("decisions for %s: %d %s", tok, r.status, r.body)
		}
		if len(ex.Objects) != len(objects) || ex.CandidateSource != "candidate" {
			t.Fatalf("decisions for %s: %d objects (source %q), the listing has %d", tok, len(ex.Objects), ex.CandidateSource, len(objects))
		}
		var shown, newlyAllowed, newlyDenied []string
		for i, o := range objects {
			e := ex.Objects[i]
			av := active.allow(t, "view", raw.Subject, o, raw.Group, true)
			cv := cand.allow(t, "view", raw.Subject, o, raw.Group, true)
			ar := active.allow(t, "remove", raw.Subject, o, raw.Group, false)
			cr := cand.allow(t, "remove", raw.Subject, o, raw.Group, false)
			if e.GUID != o["guid"] || e.Active.View != av || e.Active.Remove != ar || e.Candidate.View != cv || e.Candidate.Remove != cr {
				t.Errorf("%s: decisions API on %v: %+v %+v, want view %v/%v remove %v/%v", tok, o["dn"], e.Active, e.Candidate, av, cv, ar, cr)
			}
			if av {
				shown = append(shown, o["guid"].(string))
			}
			if !av && cv {
				newlyAllowed = append(newlyAllowed, o["guid"].(string))
			}
			if av && !cv {
				newlyDenied = append(newlyDenied, o["guid"].(string))
			}
		}
		// Twice: the second listing is served from the cache, decisions remembered.
		for range 2 {
			offset := fileSize(t, dlog)
			r := call(t, "GET", api+"?includeIndirect=true&group="+url.QueryEscape(group), tok)
			var got []map[string]any
			if err := json.Unmarshal(r.body, &got); err != nil || r.status != 200 {
				t.Fatalf("%s listing: %d %s", tok, r.status, r.body)
			}
			var gotGUIDs []string
			for _, o := range got {
				gotGUIDs = append(gotGUIDs, o["guid"].(string))
			}
			if !slices.Equal(gotGUIDs, shown) {
				t.Errorf("%s: answer %v, want the active policy's %v", tok, gotGUIDs, shown)
			}
			line := lastViewLine(t, dlog, offset)
			if line.Candidate == nil || !slices.Equal(nonNilStrings(line.Candidate.NewlyAllowed), nonNilStrings(newlyAllowed)) ||
				!slices.Equal(nonNilStrings(line.Candidate.NewlyDenied), nonNilStrings(newlyDenied)) {
				t.Errorf("%s: decision line's candidate %+v, want newly allowed %v, newly denied %v", tok, line.Candidate, newlyAllowed, newlyDenied)
			}
			// Objects the active policy hides are not counted (docs/operations.md,
			// "Metrics"): only the decision line names them.
			wantDiff[`action="view"change="newly_allowed"`] += 0
			wantDiff[`action="view"change="newly_denied"`] += len(newlyDenied)
		}
		if tok == "e2e-helpdesk" && len(newlyAllowed) == 0 {
			t.Error("the fixture gives the help desk no difference: the test proves nothing")
		}
		// Only the administrator may explain.
		if tok != "e2e-admin" {
			q := url.Values{"subject": {fixture.DemoAdminDN}, "group": {group}}
			if r := call(t, "GET", root+"/restApi/api/policy/decisions?"+q.Encode(), tok); r.status != 403 {
				t.Errorf("%s asking for decisions: %d %s, want 403", tok, r.status, r.body)
			}
		}
	}
	after := differences(t, m)
	for k, want := range wantDiff {
		if got := after[k] - before[k]; got != want {
			t.Errorf("%s differences counted %d, want %d", k, got, want)
		}
	}
	if r := call(t, "GET", root+"/readyz", ""); !strings.Contains(string(r.body), `"policyCandidate":"ok"`) {
		t.Errorf("readiness: %s", r.body)
	}
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func fileSize(t *testing.T, path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

type viewLine struct {
	Input struct {
		Action string `json:"action"`
	} `json:"input"`
	Candidate *struct {
		NewlyAllowed []string `json:"newly_allowed"`
		NewlyDenied  []string `json:"newly_denied"`
	} `json:"candidate"`
}

// lastViewLine returns the last listing line written after offset.
func lastViewLine(t *testing.T, path string, offset int64) viewLine {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var last viewLine
	found := false
	sc := bufio.NewScanner(bytes.NewReader(b[offset:]))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l viewLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		if l.Input.Action == "view" {
			last, found = l, true
		}
	}
	if !found {
		t.Fatal("no listing line in the decision log")
	}
	return last
}
