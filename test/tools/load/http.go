package load

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// TokenHeader carries the caller's token (docs/auth.md).
const TokenHeader = "Adm-Authorization"

// CacheHeader is how dirgate says a listing was served (docs/cache.md).
const CacheHeader = "X-Dirgate-Cache"

// HTTPTarget issues a workload's operations over HTTP to URL: a dirgate's resource
// (http://127.0.0.1:8080/restApi/api/directoryObjects/groupMembers) or anything that
// answers like it (the bare server).
type HTTPTarget struct {
	Label    string
	URL      string
	Workload Workload
	Checker  *Checker
	Client   *http.Client
	// AcceptEncoding is sent as the Accept-Encoding header when not empty; answers in
	// a content coding are decoded before they are checked.
	AcceptEncoding string

	rem *removals
}

// NewHTTPTarget returns a target for url with a client that keeps a connection per
// client open (as real clients of a gateway do) and never asks for compression.
func NewHTTPTarget(label, url string, w Workload, c *Checker) *HTTPTarget {
	tr := &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024, IdleConnTimeout: time.Minute, DisableCompression: true}
	return &HTTPTarget{Label: label, URL: url, Workload: w, Checker: c,
		Client: &http.Client{Transport: tr, Timeout: time.Minute}, rem: newRemovals(w.Removals)}
}

// Name is the target's label.
func (t *HTTPTarget) Name() string { return t.Label }

// NewWorker returns a client.
func (t *HTTPTarget) NewWorker(context.Context) (Worker, error) { return &httpWorker{t: t}, nil }

// Close drops idle connections.
func (t *HTTPTarget) Close() { t.Client.CloseIdleConnections() }

type httpWorker struct {
	t     *HTTPTarget
	buf   bytes.Buffer // the body as received
	plain []byte       // the body decoded, when it came in a content coding
	dec   decoders
}

func (w *httpWorker) Close() { w.dec.close() }

func (w *httpWorker) Do(ctx context.Context, op *Op, rec *Recorder) {
	if op.Kind == OpRemoveCycle {
		w.cycle(ctx, op, rec)
		return
	}
	w.list(ctx, op.Caller, op.Query, rec)
}

// list issues one listing and checks it against the caller's expected listing, in
// the states the group went through meanwhile when it is a removal group.
func (w *httpWorker) list(ctx context.Context, caller int, q Query, rec *Recorder) {
	from := w.t.rem.now()
	start := time.Now()
	status, hdr, err := w.send(ctx, http.MethodGet, q.RawQuery(), nil, caller)
	lat := time.Since(start)
	want := w.t.Checker.WantStatus(caller, q)
	o := Outcome{Status: status, Want: want, Err: err, Cache: hdr.Get(CacheHeader), Bytes: w.buf.Len()}
	if status == want {
		states := w.t.rem.statesOf(q.Group, from, w.t.rem.now())
		if body, err := w.body(hdr); err != nil {
			o.Wrong = err.Error()
		} else if want == http.StatusOK {
			o.Wrong = w.t.Checker.CheckListing(caller, q, states, body)
		} else {
			o.Wrong = CheckHidden(body)
		}
	} else if err == nil {
		o.Err = fmt.Errorf("body %.200q", w.buf.Bytes())
	}
	rec.Add("list", lat, o)
}

// cycle removes a member of a removal group, lists the group (the member must be
// gone), adds it back through the gateway and lists the group again (the member must
// be there). When every removal group is being cycled by another client, it lists one
// instead.
func (w *httpWorker) cycle(ctx context.Context, op *Op, rec *Recorder) {
	rem := w.t.rem
	s, member, ok := rem.acquire()
	if !ok {
		w.list(ctx, op.Caller, Query{Group: w.t.Workload.Removals[0].Group}, rec)
		return
	}
	defer rem.release(s)
	mk := dnKey(member)
	rem.set(s, append(rem.current(s), mk)...)
	raw := "group=" + url.QueryEscape(s.Group) + "&member=" + url.QueryEscape(member)
	start := time.Now()
	status, hdr, err := w.send(ctx, http.MethodDelete, raw, nil, op.Caller)
	w.change(rec, "remove", time.Since(start), status, hdr, err, func() { rem.set(s, mk) })
	w.list(ctx, op.Caller, Query{Group: s.Group}, rec)

	rem.set(s, mk, "")
	body, _ := json.Marshal(map[string]string{"group": s.Group, "newMember": member})
	start = time.Now()
	status, hdr, err = w.send(ctx, http.MethodPost, "", body, op.Caller)
	w.change(rec, "add", time.Since(start), status, hdr, err, func() { rem.set(s, "") })
	w.list(ctx, op.Caller, Query{Group: s.Group}, rec)
}

// change records a removal's or an addition's answer; done runs on a 200, which must
// report a change made (the member was present, or absent, as the cycle left it).
func (w *httpWorker) change(rec *Recorder, name string, lat time.Duration, status int, hdr http.Header, err error, done func()) {
	o := Outcome{Status: status, Want: http.StatusOK, Err: err}
	if status == http.StatusOK {
		done()
		if body, err := w.body(hdr); err != nil {
			o.Wrong = err.Error()
		} else {
			o.Wrong = checkChange(name, body)
		}
	} else if err == nil {
		o.Err = fmt.Errorf("body %.200q", w.buf.Bytes())
	}
	rec.Add(name, lat, o)
}

// checkChange returns "" for the answer to a removal of a present member or an
// addition of an absent one: success with a change made (docs/compatibility.md,
// "Removal" and "Addition").
func checkChange(name string, body []byte) string {
	var res struct {
		ResultType *int  `json:"resultType"`
		NoChanges  *bool `json:"noChanges"`
	}
	if err := json.Unmarshal(body, &res); err != nil {
		return fmt.Sprintf("%s answer is not JSON: %v", name, err)
	}
	if res.ResultType == nil || *res.ResultType != 0 || res.NoChanges == nil || *res.NoChanges {
		return fmt.Sprintf("%s answered %.200s, want resultType 0 and noChanges false", name, body)
	}
	return ""
}

// send issues one request, with a JSON body when body is not nil, and reads the whole
// answer into the worker's buffer.
func (w *httpWorker) send(ctx context.Context, method, rawQuery string, body []byte, caller int) (int, http.Header, error) {
	u := w.t.URL
	if rawQuery != "" {
		u += "?" + rawQuery
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, nil, fmt.Errorf("new request: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set(TokenHeader, w.t.Workload.Callers[caller].Token)
	if w.t.AcceptEncoding != "" {
		req.Header.Set("Accept-Encoding", w.t.AcceptEncoding)
	}
	resp, err := w.t.Client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	w.buf.Reset()
	if _, err := w.buf.ReadFrom(resp.Body); err != nil {
		return 0, nil, fmt.Errorf("read body: %w", err)
	}
	return resp.StatusCode, resp.Header, nil
}

// body returns the answer in the worker's buffer, decoded from its content coding.
func (w *httpWorker) body(hdr http.Header) ([]byte, error) {
	enc := hdr.Get("Content-Encoding")
	if enc == "" {
		return w.buf.Bytes(), nil
	}
	if !asked(w.t.AcceptEncoding, enc) {
		return nil, fmt.Errorf("answer in content coding %q, Accept-Encoding %q", enc, w.t.AcceptEncoding)
	}
	var err error
	w.plain, err = w.dec.decode(enc, w.buf.Bytes(), w.plain[:0])
	return w.plain, err
}

// Captured is one answer as it was sent: the bare server replays it byte for byte.
type Captured struct {
	Body     []byte
	Encoding string // its Content-Encoding, "" for none
	Status   int    // its status (0: 200)
}

// Capture issues every listing of w once, checks each answer, and returns the bodies
// keyed as the bare server looks them up. It is also how a run warms a cache.
func (t *HTTPTarget) Capture(ctx context.Context, w Workload) (map[string]Captured, error) {
	wk := &httpWorker{t: t}
	defer wk.Close()
	out := map[string]Captured{}
	var errs []error
	for i := range w.Ops {
		op := &w.Ops[i]
		if op.Kind != OpList {
			continue
		}
		status, hdr, err := wk.send(ctx, http.MethodGet, op.Query.RawQuery(), nil, op.Caller)
		want := t.Checker.WantStatus(op.Caller, op.Query)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", op.Name, err))
		case status != want:
			errs = append(errs, fmt.Errorf("%s: status %d, want %d: %.200q", op.Name, status, want, wk.buf.Bytes()))
		default:
			body, err := wk.body(hdr)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", op.Name, err))
				continue
			}
			wrong := CheckHidden(body)
			if want == http.StatusOK {
				wrong = t.Checker.CheckListing(op.Caller, op.Query, nil, body)
			}
			if wrong != "" {
				errs = append(errs, fmt.Errorf("%s: wrong answer: %s", op.Name, wrong))
			}
			out[bareKey(w.Callers[op.Caller].Token, op.Query.RawQuery())] = Captured{bytes.Clone(wk.buf.Bytes()), hdr.Get("Content-Encoding"), status}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("capture from %s: %w", t.Label, err)
	}
	return out, nil
}

func bareKey(token, rawQuery string) string { return token + "\x00" + rawQuery }

// BareServer answers each captured request with the captured bytes and nothing
// else: the most a Go HTTP server on this machine can serve, the ceiling dirgate
// is measured against.
type BareServer struct {
	URL    string
	srv    *http.Server
	bodies map[string]Captured
	served chan error
}

// StartBare serves bodies on a free loopback port.
func StartBare(bodies map[string]Captured) (*BareServer, error) {
	b := &BareServer{bodies: bodies, served: make(chan error, 1)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bare server: %w", err)
	}
	b.srv = &http.Server{Handler: b, ReadHeaderTimeout: 10 * time.Second}
	b.URL = "http://" + ln.Addr().String() + "/api/directoryObjects/groupMembers"
	go func() { b.served <- b.srv.Serve(ln) }()
	return b, nil
}

func (b *BareServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, ok := b.bodies[bareKey(r.Header.Get(TokenHeader), r.URL.RawQuery)]
	if !ok {
		http.Error(w, "not captured", http.StatusNotFound)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Content-Length", fmt.Sprint(len(c.Body)))
	if c.Encoding != "" {
		h.Set("Content-Encoding", c.Encoding)
	}
	if c.Status != 0 {
		w.WriteHeader(c.Status)
	}
	w.Write(c.Body)
}

// Close stops the server.
func (b *BareServer) Close() error {
	if err := b.srv.Close(); err != nil {
		return fmt.Errorf("bare server: %w", err)
	}
	if err := <-b.served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("bare server: %w", err)
	}
	return nil
}

// asked reports whether the Accept-Encoding value accept names coding enc with a
// weight above 0 (the tool sends plain lists: "*" is not offered).
func asked(accept, enc string) bool {
	for _, item := range strings.Split(accept, ",") {
		name, params, _ := strings.Cut(item, ";")
		if !strings.EqualFold(strings.TrimSpace(name), enc) {
			continue
		}
		_, q, ok := strings.Cut(params, "=")
		return !ok || strings.Trim(strings.TrimSpace(q), "0.") != ""
	}
	return false
}
