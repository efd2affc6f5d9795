package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/dirgate/dirgate/test/harness/child"
	"github.com/dirgate/dirgate/test/suite/chaos/history"
	goldap "github.com/go-ldap/ldap/v3"
)

// recorder keeps the history: each operation gets its ID and start when it begins,
// so IDs increase with start times, and its end and outcome when it ends.
type recorder struct {
	mu  sync.Mutex
	ops []history.Op
}

func (r *recorder) begin(o history.Op) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	o.ID = int64(len(r.ops) + 1)
	o.Start = time.Now()
	r.ops = append(r.ops, o)
	return len(r.ops) - 1
}

func (r *recorder) end(i int, outcome func(*history.Op)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops[i].End = time.Now()
	if outcome != nil {
		outcome(&r.ops[i])
	}
}

func (r *recorder) history() []history.Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]history.Op(nil), r.ops...)
}

// workload runs the schedule's steps against the deployment and records them.
type workload struct {
	d       *deployment
	f       *fixture
	rec     *recorder
	c       *child.Client
	callers []string // the tokens-file tokens, by caller index

	mu     sync.Mutex
	tokens map[int]string // signed-in tokens by number; never written to the history
}

// run runs one process's steps, each at its offset from start or at once when the
// process lags, until the steps end or ctx is done.
func (w *workload) run(ctx context.Context, start time.Time, steps []step) {
	for _, st := range steps {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(start.Add(st.At))):
		}
		w.do(ctx, st)
	}
}

func (w *workload) do(ctx context.Context, st step) {
	o := history.Op{Process: st.Process, Kind: st.Kind}
	switch st.Kind {
	case history.List, history.Remove, history.Add:
		o.Replica, o.Group = st.Replica, strings.ToLower(w.f.Groups[st.Group])
		if st.Kind == history.List {
			o.Nested = st.Nested
		} else {
			o.Member = strings.ToLower(w.f.Users[st.Member].DN)
		}
		w.api(ctx, o, w.callers[st.Caller])
	case history.DirectAdd, history.DirectRemove, history.Disable, history.Enable:
		w.direct(st, o)
	case history.SignIn:
		w.signIn(ctx, st, o)
	case history.Revoke, history.UseTok:
		w.mu.Lock()
		tok, ok := w.tokens[st.Token]
		w.mu.Unlock()
		if !ok {
			return // its sign-in failed: there is nothing to revoke or use
		}
		o.Replica, o.Token = st.Replica, tokenName(st.Token)
		if st.Kind == history.UseTok {
			o.Group = strings.ToLower(w.f.Groups[st.Group])
			w.api(ctx, o, tok)
			return
		}
		i := w.rec.begin(o)
		u := root(w.d.baseURL(st.Replica)) + "/api/auth?token=" + url.QueryEscape(tok)
		w.rec.end(i, answer(w.c.Do(ctx, http.MethodDelete, u, tok)))
	}
}

func tokenName(n int) string { return fmt.Sprintf("t%d", n) }

// api sends a listing, removal, addition or token use described by o as token.
func (w *workload) api(ctx context.Context, o history.Op, token string) {
	base := w.d.baseURL(o.Replica)
	i := w.rec.begin(o)
	var r child.Result
	switch o.Kind {
	case history.Remove:
		r = w.c.Do(ctx, http.MethodDelete, child.RemoveURL(base, o.Group, o.Member), token)
	case history.Add:
		r = w.c.Add(ctx, base, o.Group, o.Member, token)
	default:
		extra := ""
		if o.Nested {
			extra = "&includeIndirect=true"
		}
		r = w.c.Do(ctx, http.MethodGet, child.ListURL(base, o.Group, extra), token)
	}
	w.rec.end(i, func(op *history.Op) {
		answer(r)(op)
		if !op.OK() {
			return
		}
		switch op.Kind {
		case history.List:
			op.Cache = r.Cache()
			op.Members = lower(r.DNs())
			if op.Members == nil {
				op.Members = []string{} // listed, and empty
			}
		case history.Remove, history.Add:
			var a struct {
				NoChanges *bool `json:"noChanges"`
			}
			if json.Unmarshal(r.Body, &a) == nil {
				op.NoChanges = a.NoChanges
			}
		}
	})
}

// answer records an HTTP answer: its status, or the transport error; a failure's
// body cut to 512 bytes.
func answer(r child.Result) func(*history.Op) {
	return func(op *history.Op) {
		if r.Err != nil {
			op.Err = r.Err.Error()
			if r.Status == 0 {
				return
			}
		}
		op.Status = r.Status
		if r.Status < 200 || r.Status > 299 {
			op.ErrorBody = string(r.Body[:min(len(r.Body), 512)])
		}
	}
}

// signIn creates a session on the step's replica as the step's user, exchanges it
// for a token, and keeps the token under the step's number.
func (w *workload) signIn(ctx context.Context, st step, o history.Op) {
	u := w.f.Users[st.User]
	o.Replica, o.Member, o.Token = st.Replica, strings.ToLower(u.DN), tokenName(st.Token)
	r0 := root(w.d.baseURL(st.Replica))
	i := w.rec.begin(o)
	post := func(path string, body any) child.Result {
		b, _ := json.Marshal(body)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, r0+path, strings.NewReader(string(b)))
		if err != nil {
			return child.Result{Err: err}
		}
		req.Header.Set("Content-Type", "application/json")
		return w.c.Send(req)
	}
	r := post("/api/authSessions/create", map[string]string{"username": u.UPN, "password": u.Password})
	var s struct{ SessionID string }
	if r.Status != 200 || json.Unmarshal(r.Body, &s) != nil || s.SessionID == "" {
		w.rec.end(i, answer(r))
		return
	}
	r = post("/api/auth", map[string]string{"sessionId": s.SessionID})
	var tk struct{ Token string }
	if r.Status != 200 || json.Unmarshal(r.Body, &tk) != nil || tk.Token == "" {
		w.rec.end(i, answer(r))
		return
	}
	w.mu.Lock()
	w.tokens[st.Token] = tk.Token
	w.mu.Unlock()
	w.rec.end(i, answer(r))
}

// direct makes a change on one DC as its administrator, over a connection of its
// own, and records the LDAP result code. A failure to connect or bind is recorded
// as no answer (Status 0), like a change whose answer was lost.
func (w *workload) direct(st step, o history.Op) {
	o.DC = st.DC
	var req *goldap.ModifyRequest
	switch st.Kind {
	case history.Disable, history.Enable:
		o.Member = strings.ToLower(w.f.Users[st.Member].DN)
		uac := "512"
		if st.Kind == history.Disable {
			uac = "514" // NORMAL_ACCOUNT | ACCOUNTDISABLE
		}
		req = goldap.NewModifyRequest(w.f.Users[st.Member].DN, nil)
		req.Replace("userAccountControl", []string{uac})
	default:
		o.Group = strings.ToLower(w.f.Groups[st.Group])
		member := ""
		if st.MemberGroup >= 0 {
			member = w.f.Groups[st.MemberGroup]
		} else {
			member = w.f.Users[st.Member].DN
		}
		o.Member = strings.ToLower(member)
		req = goldap.NewModifyRequest(w.f.Groups[st.Group], nil)
		if st.Kind == history.DirectAdd {
			req.Add("member", []string{member})
		} else {
			req.Delete("member", []string{member})
		}
	}
	i := w.rec.begin(o)
	conn, err := dialAdmin(w.d.pair.DC(st.DC))
	if err != nil {
		w.rec.end(i, func(op *history.Op) { op.Err = err.Error() })
		return
	}
	defer conn.Close()
	err = conn.Modify(req)
	w.rec.end(i, func(op *history.Op) {
		if err == nil {
			return
		}
		op.Err = err.Error()
		var le *goldap.Error
		// Codes of 200 and above are go-ldap's own (network, timeout): no answer.
		if errors.As(err, &le) && le.ResultCode < 200 {
			op.Status = nothingToChange(op.Kind, int(le.ResultCode), le.Error())
		}
	})
}

// nothingToChange maps Samba's answers to a member value that is already there or
// already gone onto the codes AD gives and the history expects, 20
// (attributeOrValueExists) and 16 (noSuchAttribute): for member, a linked attribute,
// Samba answers 68 (entryAlreadyExists) "Attribute member already exists for target
// GUID …" and 53 (unwillingToPerform) "Attribute member doesn't exist (or already
// deleted) for target GUID …". Err keeps Samba's own answer.
func nothingToChange(kind string, code int, msg string) int {
	switch {
	case kind == history.DirectAdd && code == int(goldap.LDAPResultEntryAlreadyExists) && strings.Contains(msg, "already exists for target"):
		return int(goldap.LDAPResultAttributeOrValueExists)
	case kind == history.DirectRemove && code == int(goldap.LDAPResultUnwillingToPerform) &&
		(strings.Contains(msg, "doesn't exist for target") || strings.Contains(msg, "already deleted for target")):
		return int(goldap.LDAPResultNoSuchAttribute)
	}
	return code
}
