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
	"github.com/dirgate/dirgate/policy/explain"
	bundled "github.com/dirgate/dirgate/rego"
	"github.com/dirgate/dirgate/test/harness/ci"
)

// browser starts Debian's headless Chromium for one test. Without it the test
// skips on a laptop and fails under CI=true (make test installs it).
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		ci.SkipOrFail(t, "chromium is not installed (make test installs Debian's chromium package)")
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

// completeRows waits until every row of an answer is shown, and reads them.
func completeRows(t *testing.T, ctx context.Context) []shownRow {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`#rows[data-complete="true"]`))); err != nil {
		t.Fatal(err)
	}
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[[]shownRow](readRows))
	if err != nil {
		t.Fatal(err)
	}
	return rows
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

// explorerGateway runs the memory demo gateway (its tokens and sign-in passwords)
// with the candidate policy of candidatePolicy and drafts on, plus extra flags, and
// returns its root URL.
func explorerGateway(t *testing.T, extra ...string) string {
	t.Helper()
	cfg, err := LoadConfig(append([]string{"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--log-level", "error", "--decision-log", "off",
		"--policy-candidate-dir", candidatePolicy(t), "--policy-drafts"}, extra...), func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	m := NewMain(cfg, io.Discard, io.Discard)
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return "http://" + m.Addr()
}

// explorerQuery is what the browser tests explore: the help desk on Mixed Members,
// indirect members included.
var explorerQuery = url.Values{"subject": {hugo}, "group": {"CN=Mixed Members,OU=Groups,DC=corp,DC=example,DC=com"}, "includeIndirect": {"true"}}

// explanation is the decisions API's own answer for explorerQuery, asked with
// token, to compare the page with.
func explanation(t *testing.T, root, token string) explain.Explanation {
	t.Helper()
	r := call(t, "GET", root+"/restApi/api/policy/decisions?"+explorerQuery.Encode(), token)
	if r.status != 200 {
		t.Fatalf("decisions API: %d %s", r.status, r.body)
	}
	var want explain.Explanation
	if err := json.Unmarshal(r.body, &want); err != nil {
		t.Fatal(err)
	}
	return want
}

// TestExplorerInBrowser drives the explorer page in headless Chromium against the
// demo gateway with a candidate policy: the token, caller and group are typed, and
// the table's rows and highlighted differences must equal the decisions API's
// answer; a draft likewise. An injected inline script must not run (the CSP).
// With DIRGATE_EXPLORER_SCREENSHOTS=DIR it saves the screenshots of docs/policy.md.
func TestExplorerInBrowser(t *testing.T) {
	ctx := browser(t)
	root := explorerGateway(t)
	query := explorerQuery
	want := explanation(t, root, adminTok)

	err := chromedp.Do(ctx,
		chromedp.Navigate(root+"/explorer/"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		// Typed into the fields (SendKeys focuses each one first), the checkbox
		// clicked, submitted with Enter. TestExplorerKeyboard uses the keyboard alone.
		chromedp.SendKeys(chromedp.CSS("#token"), adminTok),
		chromedp.SendKeys(chromedp.CSS("#subject"), hugo),
		chromedp.SendKeys(chromedp.CSS("#group"), query.Get("group")),
		chromedp.Click(chromedp.CSS("#indirect")),
		chromedp.SendKeys(chromedp.CSS("#group"), "\r"),
	)
	if err != nil {
		t.Fatal(err)
	}
	rows := completeRows(t, ctx)
	checkRows(t, "candidate", rows, want)
	if !slices.ContainsFunc(rows, func(r shownRow) bool { return r.Diff }) {
		t.Error("the candidate differs for the help desk, but no row is highlighted")
	}
	// The caption names the subject with its domain.
	caption, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("caption").textContent`))
	if err != nil || !strings.HasPrefix(caption, "Decisions for Hugo Helpdesk (corp.example.com) on the members of ") {
		t.Errorf("caption %q (%v), want the subject with its domain", caption, err)
	}

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
	var wantDraft explain.Explanation
	if err := json.NewDecoder(res.Body).Decode(&wantDraft); err != nil || res.StatusCode != 200 {
		t.Fatalf("draft: %d %v", res.StatusCode, err)
	}
	res.Body.Close()
	err = chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS("#draft"), draft),
		chromedp.Click(chromedp.CSS("#try")),
		until(`document.getElementById("summary").textContent.includes("draft")`),
	)
	if err != nil {
		t.Fatal(err)
	}
	checkRows(t, "draft", completeRows(t, ctx), wantDraft)

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

// TestExplorerSignIn signs in through the page's form with the memory demo's
// password: the token lands in the token field (in memory only), the password
// field is emptied, and the table loaded with that token equals the API's answer
// for it. A wrong password shows the refusal's message and code, and leaves no
// token.
func TestExplorerSignIn(t *testing.T) {
	ctx := browser(t)
	root := explorerGateway(t)
	err := chromedp.Do(ctx,
		chromedp.Navigate(root+"/explorer/"),
		chromedp.WaitVisible(chromedp.CSS("#username")),
		chromedp.SendKeys(chromedp.CSS("#username"), "dana.admin@corp.example.com"),
		chromedp.SendKeys(chromedp.CSS("#password"), demoPasswords["dana.admin"]+"\r"), // Enter submits the form
		until(`document.getElementById("token").value !== "" || !document.getElementById("signin-error").hidden`),
	)
	if err != nil {
		t.Fatal(err)
	}
	type formState struct {
		Token, Password, Status, Error, Focus string
		ErrorShown                            bool
	}
	const readForm = `({token: document.getElementById("token").value, password: document.getElementById("password").value,
		status: document.getElementById("signin-status").textContent, error: document.getElementById("signin-error").textContent,
		errorShown: !document.getElementById("signin-error").hidden, focus: document.activeElement.id})`
	st, err := chromedp.Run(ctx, chromedp.Evaluate[formState](readForm))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(st.Token, "dgt_") || st.Password != "" || st.ErrorShown ||
		!strings.Contains(st.Status, "Signed in as dana.admin@corp.example.com") || st.Focus != "subject" {
		t.Fatalf("after signing in: %+v", st)
	}
	// The caller's field has the focus: type the query and submit it with Enter.
	err = chromedp.Do(ctx,
		chromedp.KeyEvent(explorerQuery.Get("subject")),
		chromedp.SendKeys(chromedp.CSS("#group"), explorerQuery.Get("group")),
		chromedp.Click(chromedp.CSS("#indirect")),
		chromedp.SendKeys(chromedp.CSS("#group"), "\r"),
	)
	if err != nil {
		t.Fatal(err)
	}
	checkRows(t, "signed in", completeRows(t, ctx), explanation(t, root, st.Token))
	screenshot(t, ctx, "explorer-candidate.png")
	stored, err := chromedp.Run(ctx, chromedp.Evaluate[string](`localStorage.length + "," + sessionStorage.length + "," + document.cookie`))
	if err != nil || stored != "0,0," {
		t.Errorf("storage after signing in: %q %v", stored, err)
	}
	// Sign out revokes the token: the field is emptied and the API refuses it.
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS("#signout-button")),
		until(`document.getElementById("signin-status").textContent.startsWith("Signed out") || !document.getElementById("signin-error").hidden`),
	)
	if err != nil {
		t.Fatal(err)
	}
	if st2, err := chromedp.Run(ctx, chromedp.Evaluate[formState](readForm)); err != nil || st2.Token != "" || st2.ErrorShown {
		t.Errorf("after signing out: %+v %v", st2, err)
	}
	if r := call(t, "GET", root+"/restApi/api/directoryObjects/groupMembers?group="+url.QueryEscape(explorerQuery.Get("group")), st.Token); r.status != 401 {
		t.Errorf("the signed-out token still lists: %d %s", r.status, r.body)
	}

	// A wrong password, on a fresh page: the refusal is shown, no token is set.
	err = chromedp.Do(ctx,
		chromedp.Navigate(root+"/explorer/"),
		chromedp.WaitVisible(chromedp.CSS("#username")),
		chromedp.SendKeys(chromedp.CSS("#username"), "dana.admin@corp.example.com"),
		chromedp.SendKeys(chromedp.CSS("#password"), "not-the-password\r"),
		until(`!document.getElementById("signin-error").hidden`),
	)
	if err != nil {
		t.Fatal(err)
	}
	if st, err = chromedp.Run(ctx, chromedp.Evaluate[formState](readForm)); err != nil {
		t.Fatal(err)
	}
	if st.Token != "" || st.Password != "" || st.Status != "" || st.Focus != "password" ||
		!strings.Contains(st.Error, "The user name or password is incorrect.") || !strings.Contains(st.Error, "403 invalidCredentials") {
		t.Errorf("after a wrong password: %+v", st)
	}
}

// TestExplorerSignInOff: with DIRGATE_SIGNIN=false the page offers no sign-in
// form, only the token field.
func TestExplorerSignInOff(t *testing.T) {
	ctx := browser(t)
	root := explorerGateway(t, "--signin=false")
	err := chromedp.Do(ctx,
		chromedp.Navigate(root+"/explorer/"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
	)
	if err != nil {
		t.Fatal(err)
	}
	form, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("signin") !== null || document.getElementById("password") !== null`))
	if err != nil || form {
		t.Errorf("sign-in is off, but the page has a sign-in form (%v)", err)
	}
}

// TestExplorerKeyboard operates the page with the keyboard alone (Tab, typing,
// Space, Enter), from the page's start to the table: the tab order, the token,
// caller and group fields, the indirect checkbox and the Show decisions button.
// It also checks that every form control has a label.
func TestExplorerKeyboard(t *testing.T) {
	ctx := browser(t)
	root := explorerGateway(t)
	err := chromedp.Do(ctx,
		chromedp.Navigate(root+"/explorer/"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
	)
	if err != nil {
		t.Fatal(err)
	}
	unlabelled, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("input, select, textarea, button")]
		.filter(e => !(e.labels && e.labels.length > 0) && !e.getAttribute("aria-label") && !(e.tagName === "BUTTON" && e.textContent.trim() !== ""))
		.map(e => e.id || e.outerHTML)`))
	if err != nil {
		t.Fatal(err)
	}
	if len(unlabelled) > 0 {
		t.Errorf("controls without a label: %q", unlabelled)
	}
	controls, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("input, select, textarea").length`))
	if err != nil || controls < 8 {
		t.Fatalf("%d form controls (%v): the label check saw too few", controls, err)
	}

	focused := func() string {
		t.Helper()
		id, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.activeElement ? document.activeElement.id : ""`))
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	key := func(keys string) {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.KeyEvent(keys)); err != nil {
			t.Fatal(err)
		}
	}
	// From the top of the page, Tab reaches the sign-in form, then the token field.
	var order []string
	for len(order) < 10 && (len(order) == 0 || order[len(order)-1] != "token") {
		key("\t")
		order = append(order, focused())
	}
	if want := []string{"username", "password", "signin-button", "token"}; !slices.Equal(order, want) {
		t.Fatalf("tab order %q, want %q", order, want)
	}
	key(adminTok)
	key("\t")
	if f := focused(); f != "subject" {
		t.Fatalf("Tab after the token: focus on %q, want subject", f)
	}
	key(explorerQuery.Get("subject"))
	key("\t")
	if f := focused(); f != "group" {
		t.Fatalf("Tab after the caller: focus on %q, want group", f)
	}
	key(explorerQuery.Get("group"))
	key("\t")
	if f := focused(); f != "indirect" {
		t.Fatalf("Tab after the group: focus on %q, want indirect", f)
	}
	key(" ") // Space ticks the checkbox
	key("\t")
	if f := focused(); f != "show" {
		t.Fatalf("Tab after the checkbox: focus on %q, want show", f)
	}
	type fields struct {
		Token, Subject, Group string
		Indirect              bool
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[fields](`({token: document.getElementById("token").value,
		subject: document.getElementById("subject").value, group: document.getElementById("group").value,
		indirect: document.getElementById("indirect").checked})`))
	if err != nil {
		t.Fatal(err)
	}
	if want := (fields{adminTok, explorerQuery.Get("subject"), explorerQuery.Get("group"), true}); got != want {
		t.Fatalf("typed %+v, want %+v", got, want)
	}
	key("\r") // Enter on the Show decisions button
	checkRows(t, "keyboard", completeRows(t, ctx), explanation(t, root, adminTok))

	// Space on the button, which keeps the focus, asks again.
	if f := focused(); f != "show" {
		t.Fatalf("after the answer: focus on %q, want show", f)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("rows").dataset.complete = "false"`)); err != nil {
		t.Fatal(err)
	}
	key(" ")
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`#rows[data-complete="true"]`))); err != nil {
		t.Fatal(err)
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
func checkRows(t *testing.T, what string, rows []shownRow, want explain.Explanation) {
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
	objs := make([]explain.ObjectExplanation, n)
	diffs := 0
	for i := range objs {
		cand := explain.Decisions{View: i%3 == 0, Remove: false}
		if cand.View != (i%2 == 0) {
			diffs++
		}
		objs[i] = explain.ObjectExplanation{GUID: fmt.Sprintf("00000000-0000-0000-0000-%012d", i), DN: fmt.Sprintf("CN=User %d,OU=Staff,DC=x", i),
			DisplayName: fmt.Sprintf("User %d", i), ObjectType: "user", Active: explain.Decisions{View: i%2 == 0},
			Candidate: &cand, Reasons: explain.ActionReasons{View: []string{"role r, scope {\"all\":true}"}, Remove: []string{}}}
	}
	answer, _ := json.Marshal(explain.Explanation{ActiveRevision: "a", CandidateRevision: "b", CandidateSource: "candidate", Objects: objs})
	mounts, err := explorer.Mounts(explorer.Config{DecisionsURL: "/api/policy/decisions"})
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
