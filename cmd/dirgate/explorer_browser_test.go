package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/dirgate/dirgate/explorer"
	"github.com/dirgate/dirgate/policy"
	bundled "github.com/dirgate/dirgate/rego"
)

// browser starts Debian's headless Chromium for one test. Without it the test
// skips on a laptop and fails under CI=true (make test installs it).
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium is not installed (make test installs Debian's chromium package)")
		}
		t.Skip("chromium is not installed")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true), chromedp.WindowSize(1400, 1000))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatal(err)
	}
	return ctx
}

// shownRow is one row of the page's table as the page shows it.
type shownRow struct {
	GUID    string   `json:"guid"`
	Diff    bool     `json:"diff"`
	Cells   []string `json:"cells"`
	Changed []bool   `json:"changed"`
}

const readRows = `[...document.querySelectorAll("#rows tr")].map(tr => ({
	guid: tr.dataset.guid, diff: tr.dataset.diff === "true",
	cells: [...tr.children].map(td => td.textContent),
	changed: [...tr.children].map(td => td.dataset.changed === "true")}))`

// candidatePolicy writes the bundled policy with the help desk's people role
// narrowed to users and given remove: a candidate that differs from the active
// policy both ways for the help desk.
func candidatePolicy(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := bundled.WriteWithRoles(dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "data.json"))
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(b), `"objectTypes": [
          "user",
          "computer"
        ]`, `"objectTypes": ["user"]`, 1)
	s = strings.Replace(s, `"permissions": [
          "view"
        ],
        "scopes": [
          {
            "subtree": "OU=Staff`, `"permissions": ["view", "remove"],
        "scopes": [
          {
            "subtree": "OU=Staff`, 1)
	if s == string(b) {
		t.Fatal("candidate policy: the bundled data changed shape")
	}
	if err := os.WriteFile(filepath.Join(dir, "data.json"), []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestExplorerInBrowser drives the explorer page in headless Chromium against the
// demo gateway with a candidate policy: the token, caller and group are typed, and
// the table's rows and highlighted differences must equal the decisions API's
// answer; a draft likewise. An injected inline script must not run (the CSP).
// With DIRGATE_EXPLORER_SCREENSHOTS=DIR it saves the screenshots of docs/policy.md.
func TestExplorerInBrowser(t *testing.T) {
	ctx := browser(t)
	cfg, err := LoadConfig([]string{"--listen", "127.0.0.1:0", "--log-level", "error", "--decision-log", "off",
		"--policy-candidate-dir", candidatePolicy(t), "--policy-drafts"}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	m := NewMain(cfg, io.Discard, io.Discard)
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	root := "http://" + m.Addr()
	query := url.Values{"subject": {hugo}, "group": {"CN=Mixed Members,OU=Groups,DC=corp,DC=example,DC=com"}, "includeIndirect": {"true"}}

	// The API's own answer, to compare the page with.
	r := call(t, "GET", root+"/restApi/api/policy/decisions?"+query.Encode(), adminTok)
	if r.status != 200 {
		t.Fatalf("decisions API: %d %s", r.status, r.body)
	}
	var want policy.Explanation
	if err := json.Unmarshal(r.body, &want); err != nil {
		t.Fatal(err)
	}

	err = chromedp.Do(ctx,
		chromedp.Navigate(root+"/explorer/"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		// Keyboard only: type into the focused fields, submit with Enter.
		chromedp.SendKeys(chromedp.CSS("#token"), adminTok),
		chromedp.SendKeys(chromedp.CSS("#subject"), hugo),
		chromedp.SendKeys(chromedp.CSS("#group"), query.Get("group")),
		chromedp.Click(chromedp.CSS("#indirect")),
		chromedp.SendKeys(chromedp.CSS("#group"), "\r"),
		chromedp.WaitVisible(chromedp.CSS(`#rows[data-complete="true"]`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[[]shownRow](readRows))
	if err != nil {
		t.Fatal(err)
	}
	checkRows(t, "candidate", rows, want)
	if !slices.ContainsFunc(rows, func(r shownRow) bool { return r.Diff }) {
		t.Error("the candidate differs for the help desk, but no row is highlighted")
	}
	screenshot(t, ctx, "explorer-candidate.png")

	// A draft: the help desk sees nothing.
	draft := "package dirgate.authz\nallow if input.action == \"explain\"\n"
	body, _ := json.Marshal(map[string]string{"module": draft})
	req, _ := http.NewRequest("POST", root+"/restApi/api/policy/decisions?"+query.Encode(), strings.NewReader(string(body)))
	req.Header.Set("Adm-Authorization", adminTok)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var wantDraft policy.Explanation
	if err := json.NewDecoder(res.Body).Decode(&wantDraft); err != nil || res.StatusCode != 200 {
		t.Fatalf("draft: %d %v", res.StatusCode, err)
	}
	res.Body.Close()
	err = chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS("#draft"), draft),
		chromedp.Click(chromedp.CSS("#try")),
		until(`document.getElementById("summary").textContent.includes("draft")`),
		chromedp.WaitVisible(chromedp.CSS(`#rows[data-complete="true"]`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	if rows, err = chromedp.Run(ctx, chromedp.Evaluate[[]shownRow](readRows)); err != nil {
		t.Fatal(err)
	}
	checkRows(t, "draft", rows, wantDraft)

	// A draft that does not compile: the error, with its line, is shown.
	err = chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS("#draft"), "package dirgate.authz\n\nallow if {\n"),
		chromedp.Click(chromedp.CSS("#try")),
		until(`document.getElementById("error").textContent.includes("draft.rego:")`),
	)
	if err != nil {
		t.Fatal(err)
	}
	screenshot(t, ctx, "explorer-draft-error.png")

	// The CSP: an inline script and an inline event handler injected into the page
	// do not run, and the browser reports the violations.
	injected, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(async () => {
		window.violations = 0;
		document.addEventListener("securitypolicyviolation", () => window.violations++);
		const s = document.createElement("script");
		s.textContent = "window.injected = 1";
		document.body.appendChild(s);
		document.body.insertAdjacentHTML("beforeend", '<img src="data:," onerror="window.injected = 2" onload="window.injected = 3">');
		await new Promise(r => setTimeout(r, 300));
		return window.injected !== undefined || window.violations < 1;
	})()`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if injected {
		t.Error("an injected inline script ran, or no CSP violation was reported")
	}
	// The token is in no storage the page could leave behind.
	stored, err := chromedp.Run(ctx, chromedp.Evaluate[string](`localStorage.length + "," + sessionStorage.length + "," + document.cookie`))
	if err != nil || stored != "0,0," {
		t.Errorf("storage after use: %q %v", stored, err)
	}
}

// until waits for a JavaScript expression to be true.
func until(expr string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Poll[bool](expr)(ctx, t)
		return chromedp.Void{}, err
	}
}

// checkRows compares the page's table with the API's answer, row by row.
func checkRows(t *testing.T, what string, rows []shownRow, want policy.Explanation) {
	t.Helper()
	if len(rows) != len(want.Objects) {
		t.Fatalf("%s: %d rows, the API answered %d objects", what, len(rows), len(want.Objects))
	}
	word := func(b bool) string { return map[bool]string{true: "allowed", false: "denied"}[b] }
	for i, o := range want.Objects {
		r := rows[i]
		c := o.Candidate
		wantCells := []string{o.DisplayName, o.ObjectType, o.DN, word(o.Active.View), word(o.Active.Remove), word(c.View), word(c.Remove)}
		diff := c.View != o.Active.View || c.Remove != o.Active.Remove
		if r.GUID != o.GUID || !slices.Equal(r.Cells[:7], wantCells) || r.Diff != diff ||
			r.Changed[5] != (c.View != o.Active.View) || r.Changed[6] != (c.Remove != o.Active.Remove) {
			t.Errorf("%s: row %d shows %+v, want %v diff=%v", what, i, r, wantCells, diff)
		}
		for _, reason := range append(prefixed("view: ", o.Reasons.View), prefixed("remove: ", o.Reasons.Remove)...) {
			if !strings.Contains(r.Cells[7], reason) {
				t.Errorf("%s: row %d reasons %q lack %q", what, i, r.Cells[7], reason)
			}
		}
	}
}

func prefixed(p string, s []string) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = p + x
	}
	return out
}

// screenshot saves the page to $DIRGATE_EXPLORER_SCREENSHOTS/name, when set.
func screenshot(t *testing.T, ctx context.Context, name string) {
	dir := os.Getenv("DIRGATE_EXPLORER_SCREENSHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestExplorerManyRows: the page renders 2,000 objects (in chunks, the page
// answering between them) and its filter shows only the differences. The time to
// the first and the last rows is reported, not asserted.
func TestExplorerManyRows(t *testing.T) {
	ctx := browser(t)
	const n = 2000
	objs := make([]policy.ObjectExplanation, n)
	diffs := 0
	for i := range objs {
		cand := policy.Decisions{View: i%3 == 0, Remove: false}
		if cand.View != (i%2 == 0) {
			diffs++
		}
		objs[i] = policy.ObjectExplanation{GUID: fmt.Sprintf("00000000-0000-0000-0000-%012d", i), DN: fmt.Sprintf("CN=User %d,OU=Staff,DC=x", i),
			DisplayName: fmt.Sprintf("User %d", i), ObjectType: "user", Active: policy.Decisions{View: i%2 == 0},
			Candidate: &cand, Reasons: policy.ActionReasons{View: []string{"role r, scope {\"all\":true}"}, Remove: []string{}}}
	}
	answer, _ := json.Marshal(policy.Explanation{ActiveRevision: "a", CandidateRevision: "b", CandidateSource: "candidate", Objects: objs})
	mounts, err := explorer.Mounts("/api/policy/decisions")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	for p, h := range mounts {
		mux.Handle(p, h)
	}
	mux.HandleFunc("/api/policy/decisions", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Adm-Authorization") != "t" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(answer)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	var first, last time.Duration
	start := time.Now()
	err = chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/explorer/"),
		chromedp.SendKeys(chromedp.CSS("#token"), "t"),
		chromedp.SendKeys(chromedp.CSS("#subject"), "s"),
		chromedp.SendKeys(chromedp.CSS("#group"), "g\r"),
		chromedp.WaitVisible(chromedp.CSS("#rows tr")),
	)
	first = time.Since(start)
	if err == nil {
		err = chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`#rows[data-complete="true"]`)))
		last = time.Since(start)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("2,000 rows: first rows after %v, all after %v (from typing the query)", first, last)
	count, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#rows tr").length`))
	if err != nil || count != n {
		t.Fatalf("%d rows (%v), want %d", count, err, n)
	}
	err = chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#only-diff")))
	if err != nil {
		t.Fatal(err)
	}
	visible, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#rows tr:not(.hidden)").length`))
	if err != nil || visible != diffs {
		t.Errorf("only differences: %d rows shown (%v), want %d", visible, err, diffs)
	}
}
