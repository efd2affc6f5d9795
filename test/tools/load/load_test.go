package load

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"
)

// runOpts bounds test runs by request count; the duration is only a safety net (a
// hung server), never something a test asserts on.
func runOpts(conc int, requests int64) Options {
	return Options{Concurrency: conc, Requests: requests, Duration: time.Minute, Seed: 1}
}

// The whole tool against dirgate in process: the mixed workload with removal cycles
// gets only right answers, the cycles happen, and repeated listings come from the
// cache.
func TestMixAgainstDirgate(t *testing.T) {
	g := startGateway(t)
	w := g.Setup.MixWorkload()
	for i := range w.Callers {
		w.Callers[i].Token = g.Setup.Callers[i].Token
	}
	target := NewHTTPTarget("dirgate", g.URL, w, expectDemo(t, w))
	defer target.Close()
	rep, err := Run(t.Context(), target, w, runOpts(4, 800))
	if err != nil {
		t.Fatal(err)
	}
	if n := rep.All.ErrorCount(); n != 0 || rep.All.Wrong != 0 {
		t.Fatalf("errors %v, wrong %d: %q", rep.All.Errors, rep.All.Wrong, rep.All.Examples)
	}
	rm, add, list := rep.Classes["remove"], rep.Classes["add"], rep.Classes["list"]
	if rm == nil || rm.Requests == 0 || add == nil || add.Requests != rm.Requests || list == nil {
		t.Fatalf("classes %v: want removals, as many additions, and listings", rep.Classes)
	}
	if list.Cache["hit"] == 0 {
		t.Errorf("cache %v: want hits", list.Cache)
	}
	// Every cycle lists the group after removing and after adding back; the other
	// listings are the mix's.
	if list.Requests < 2*rm.Requests {
		t.Errorf("%d listings for %d removals", list.Requests, rm.Requests)
	}
}

// The bare server replays dirgate's captured bytes, which are all right.
func TestBareReplaysCapture(t *testing.T) {
	g := startGateway(t)
	w := g.Setup.MixWorkload().Listings()
	w.Callers = g.Setup.Callers
	c := expectDemo(t, w)
	bodies, err := NewHTTPTarget("dirgate", g.URL, w, c).Capture(t.Context(), w)
	if err != nil {
		t.Fatal(err)
	}
	bare, err := StartBare(bodies)
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	rep, err := Run(t.Context(), NewHTTPTarget("bare", bare.URL, w, c), w, runOpts(3, 300))
	if err != nil {
		t.Fatal(err)
	}
	if rep.All.Requests != 300 || rep.All.ErrorCount() != 0 || rep.All.Wrong != 0 {
		t.Fatalf("requests %d errors %v wrong %d: %q", rep.All.Requests, rep.All.Errors, rep.All.Wrong, rep.All.Examples)
	}
}

// A server that answers wrongly is counted on every request, whatever the wrong:
// the tool must never let one through.
func TestWrongAnswersAreCounted(t *testing.T) {
	g := startGateway(t)
	s := g.Setup
	// Two listings that differ between the callers (the help desk sees fewer members
	// of Mixed Members), so that swapping callers is always wrong.
	q := Query{Group: "CN=Mixed Members,OU=Groups,DC=corp,DC=example,DC=com", Properties: Properties}
	w := Workload{Name: "mixed", Callers: s.Callers, Ops: []Op{
		{Name: "admin", Caller: CallerAdmin, Query: q, Weight: 1},
		{Name: "helpdesk", Caller: CallerHelpdesk, Query: q, Weight: 1},
	}}
	c := expectDemo(t, w)
	captured, err := NewHTTPTarget("dirgate", g.URL, w, c).Capture(t.Context(), w)
	if err != nil {
		t.Fatal(err)
	}
	body := func(caller int) []byte { return captured[bareKey(s.Callers[caller].Token, q.RawQuery())].Body }
	objects := func(caller int) []json.RawMessage {
		var objs []json.RawMessage
		if err := json.Unmarshal(body(caller), &objs); err != nil {
			t.Fatal(err)
		}
		return objs
	}
	encode := func(v any) []byte {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	other := map[string]int{s.Callers[CallerAdmin].Token: CallerHelpdesk, s.Callers[CallerHelpdesk].Token: CallerAdmin}
	self := map[string]int{s.Callers[CallerAdmin].Token: CallerAdmin, s.Callers[CallerHelpdesk].Token: CallerHelpdesk}
	tests := []struct {
		name      string
		answer    func(token string) (int, []byte)
		wantWrong bool   // every request is a wrong answer
		wantError string // every request is an error of this status
	}{
		// The control: the captured bodies themselves are right.
		{"captured", func(tok string) (int, []byte) { return 200, body(self[tok]) }, false, ""},
		// An equivalent encoding (indented) is not a wrong answer.
		{"re-encoded", func(tok string) (int, []byte) {
			var b bytes.Buffer
			json.Indent(&b, body(self[tok]), "", "  ")
			return 200, b.Bytes()
		}, false, ""},
		{"member missing", func(tok string) (int, []byte) { o := objects(self[tok]); return 200, encode(o[:len(o)-1]) }, true, ""},
		{"member twice", func(tok string) (int, []byte) { o := objects(self[tok]); return 200, encode(append(o, o[0])) }, true, ""},
		{"other order", func(tok string) (int, []byte) { o := objects(self[tok]); slices.Reverse(o); return 200, encode(o) }, true, ""},
		{"another caller's view", func(tok string) (int, []byte) { return 200, body(other[tok]) }, true, ""},
		{"a property changed", func(tok string) (int, []byte) {
			return 200, bytes.Replace(body(self[tok]), []byte(`"mail":[`), []byte(`"mail":["x@y",`), 1)
		}, true, ""},
		{"not JSON", func(string) (int, []byte) { return 200, []byte("<html>") }, true, ""},
		{"empty", func(string) (int, []byte) { return 200, nil }, true, ""},
		// A failure is an error by status, not a wrong answer.
		{"server error", func(string) (int, []byte) { return 502, []byte(`{"code":"upstreamError"}`) }, false, "502"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
				status, b := tt.answer(r.Header.Get(TokenHeader))
				rw.WriteHeader(status)
				rw.Write(b)
			}))
			defer fake.Close()
			rep, err := Run(t.Context(), NewHTTPTarget("fake", fake.URL, w, c), w, runOpts(2, 40))
			if err != nil {
				t.Fatal(err)
			}
			wantWrong, wantErrors := 0, map[string]int{}
			if tt.wantWrong {
				wantWrong = 40
			}
			if tt.wantError != "" {
				wantErrors[tt.wantError] = 40
			}
			if rep.All.Requests != 40 || rep.All.Wrong != wantWrong || !equalCounts(rep.All.Errors, wantErrors) {
				t.Errorf("requests %d wrong %d errors %v, want 40, %d, %v; examples %q",
					rep.All.Requests, rep.All.Wrong, rep.All.Errors, wantWrong, wantErrors, rep.All.Examples)
			}
		})
	}
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// A gateway that acknowledges a removal but keeps listing the member (a stale
// cache), or acknowledges an addition but keeps listing the group without it, gives a
// wrong answer on the listing that follows; one whose answer says nothing changed
// gives a wrong removal or addition answer. An exact one gives none.
func TestStaleListingAfterChangeIsWrong(t *testing.T) {
	g := startGateway(t)
	s := g.Setup
	w := Workload{Name: "cycles", Callers: s.Callers, Removals: s.Removals[:1],
		Ops: []Op{{Name: "cycle", Kind: OpRemoveCycle, Caller: CallerAdmin, Weight: 1}}}
	c := expectDemo(t, w)
	group := s.Removals[0].Group
	do := func(req *http.Request) []byte {
		t.Helper()
		req.Header.Set(TokenHeader, s.Callers[CallerAdmin].Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s %s: %d %s %v", req.Method, req.URL, resp.StatusCode, b, err)
		}
		return b
	}
	capture := func() []byte {
		req, _ := http.NewRequest(http.MethodGet, g.URL+"?"+Query{Group: group}.RawQuery(), nil)
		return do(req)
	}
	// The group's listing with every member, and without each member in turn: taken
	// out and put back through the gateway (which the cycle does too).
	with, without := capture(), map[string][]byte{}
	for _, m := range s.Removals[0].Members {
		for _, method := range []string{http.MethodDelete, http.MethodPost} {
			var req *http.Request
			if method == http.MethodDelete {
				req, _ = http.NewRequest(method, g.URL+"?group="+url.QueryEscape(group)+"&member="+url.QueryEscape(m), nil)
			} else {
				body, _ := json.Marshal(map[string]string{"group": group, "newMember": m})
				req, _ = http.NewRequest(method, g.URL, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
			}
			do(req)
			if method == http.MethodDelete {
				without[dnKey(m)] = capture()
			}
		}
	}
	const changed = `{"resultType":0,"innerMessages":[],"exception":null,"actualObjectDN":"x","noChanges":false,"extraInfo":{}}`
	const unchanged = `{"resultType":0,"innerMessages":[],"exception":null,"actualObjectDN":"x","noChanges":true,"extraInfo":{}}`
	tests := []struct {
		name                     string
		answer                   string // the DELETE and POST answers
		staleAfterRemove         bool   // GET after DELETE still lists the member
		staleAfterAdd            bool   // GET after POST still lacks the member
		wantRm, wantAdd, wantLst int    // wrong answers per class
	}{
		{"exact", changed, false, false, 0, 0, 0},
		{"stale after removal", changed, true, false, 0, 0, 5},
		{"stale after addition", changed, false, true, 0, 0, 5},
		{"no change reported", unchanged, false, false, 5, 5, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			absent := "" // DN key of the member the fake's directory lacks
			fake := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				switch r.Method {
				case http.MethodDelete:
					if !tt.staleAfterRemove {
						absent = dnKey(r.URL.Query().Get("member"))
					}
					rw.Write([]byte(tt.answer))
				case http.MethodPost:
					if !tt.staleAfterAdd {
						absent = ""
					}
					rw.Write([]byte(tt.answer))
				default:
					if absent == "" {
						rw.Write(with)
					} else {
						rw.Write(without[absent])
					}
				}
			}))
			defer fake.Close()
			rep, err := Run(t.Context(), NewHTTPTarget("fake", fake.URL, w, c), w, runOpts(1, 5))
			if err != nil {
				t.Fatal(err)
			}
			rm, add, list := rep.Classes["remove"], rep.Classes["add"], rep.Classes["list"]
			if rm == nil || add == nil || list == nil || rm.Requests != 5 || add.Requests != 5 || list.Requests != 10 ||
				rm.Wrong != tt.wantRm || add.Wrong != tt.wantAdd || list.Wrong != tt.wantLst {
				t.Errorf("classes %+v %+v %+v: want 5 removals (%d wrong), 5 additions (%d wrong), 10 listings (%d wrong)",
					rm, add, list, tt.wantRm, tt.wantAdd, tt.wantLst)
			}
		})
	}
}
