package child

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"
)

// Client sends API requests to a Program.
type Client struct {
	HTTP *http.Client
}

// NewClient returns a client with a keep-alive pool sized for the loads here and a
// per-request bound that no correct answer comes near: a hung request shows up as a
// transport error, not as a hung test.
func NewClient() *Client {
	return &Client{HTTP: &http.Client{
		Timeout:   60 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 32, DisableCompression: true},
	}}
}

// ClientFrom returns a client whose connections come from the loopback address ip
// (127.0.0.2, …): dirgate throttles failed authentications per address, so requests
// that fail on purpose come from an address of their own.
func ClientFrom(ip string) *Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &Client{HTTP: &http.Client{Timeout: 60 * time.Second,
		Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 8}}}
}

// CloseIdle closes the client's idle keep-alive connections, so that dirgate's count
// of goroutines and descriptors no longer includes them.
func (c *Client) CloseIdle() { c.HTTP.CloseIdleConnections() }

// Result is one answer.
type Result struct {
	Status  int
	Header  http.Header
	Body    []byte
	Err     error // transport error: no answer at all
	Elapsed time.Duration
}

// Cache returns the X-Dirgate-Cache header ("" when absent).
func (r Result) Cache() string { return r.Header.Get("X-Dirgate-Cache") }

// DNs returns the DNs of a listing body (nil if it is not one).
func (r Result) DNs() []string {
	var objs []struct {
		DN string `json:"dn"`
	}
	if json.Unmarshal(r.Body, &objs) != nil {
		return nil
	}
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = o.DN
	}
	return out
}

func (r Result) String() string {
	if r.Err != nil {
		return "transport error: " + r.Err.Error()
	}
	body := r.Body
	if len(body) > 200 {
		body = append(body[:200:200], "…"...)
	}
	return fmt.Sprintf("%d %s", r.Status, body)
}

// Do sends method to u with the token in Adm-Authorization (none when empty).
func (c *Client) Do(ctx context.Context, method, u, token string) Result {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return Result{Err: err}
	}
	if token != "" {
		req.Header.Set("Adm-Authorization", token)
	}
	return c.Send(req)
}

// Add POSTs {"group", "newMember"} to base, as the product's clients add a member.
func (c *Client) Add(ctx context.Context, base, group, member, token string) Result {
	body, _ := json.Marshal(map[string]string{"group": group, "newMember": member})
	req, err := http.NewRequestWithContext(ctx, "POST", base, bytes.NewReader(body))
	if err != nil {
		return Result{Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Adm-Authorization", token)
	return c.Send(req)
}

// Send sends a prepared request.
func (c *Client) Send(req *http.Request) Result {
	start := time.Now()
	res, err := c.HTTP.Do(req)
	if err != nil {
		return Result{Err: err, Elapsed: time.Since(start)}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return Result{Status: res.StatusCode, Header: res.Header, Body: b, Err: err, Elapsed: time.Since(start)}
}

// ListURL is base?group=<group><extra>, the group query-escaped.
func ListURL(base, group, extra string) string {
	return base + "?group=" + url.QueryEscape(group) + extra
}

// RemoveURL is base?group=<group>&member=<member>, both query-escaped.
func RemoveURL(base, group, member string) string {
	return base + "?group=" + url.QueryEscape(group) + "&member=" + url.QueryEscape(member)
}

// Documented error codes and statuses (docs/api.md, "Errors").
var codeStatus = map[string]int{
	"invalid": 400, "unauthenticated": 401, "forbidden": 403, "notFound": 404,
	"methodNotAllowed": 405, "requestTooLarge": 413, "unsupportedMediaType": 415,
	"tooManyRequests": 429, "internal": 500,
	"upstreamError": 502, "upstreamUnavailable": 503, "upstreamTimeout": 504,
}

// Fixed messages of every 5xx and of 401 (docs/api.md).
var fixedMessages = map[string]string{
	"internal":            "An internal error occurred.",
	"upstreamError":       "The directory could not complete the request.",
	"upstreamUnavailable": "The directory is unavailable; try again later.",
	"upstreamTimeout":     "The directory did not answer in time.",
	"unauthenticated":     "The provided authentication token is either expired or invalid.",
}

// ErrorBody is the documented error shape.
type ErrorBody struct {
	Message    string              `json:"message"`
	Code       string              `json:"code"`
	ModelState map[string][]string `json:"modelState"`
	// InnerError is a refused sign-in's reason (docs/auth.md); only on 403.
	InnerError *struct {
		Message string `json:"message"`
		Code    string `json:"code"`
	} `json:"innerError"`
}

// CheckError reports how r departs from docs/api.md's error shape: a JSON object with
// a non-empty message, a documented code matching the status, the fixed message for
// 401 and every 5xx, a modelState (only on 400) naming one parameter with the
// message, no other fields, and the headers every response carries.
func CheckError(r Result) (ErrorBody, error) {
	var e ErrorBody
	if r.Err != nil {
		return e, r.Err
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
		return e, fmt.Errorf("status %d: Content-Type %q, body %q", r.Status, ct, r.Body)
	}
	if r.Header.Get("Cache-Control") != "no-store" || r.Header.Get("X-Content-Type-Options") != "nosniff" {
		return e, fmt.Errorf("status %d: missing Cache-Control no-store or nosniff", r.Status)
	}
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return e, fmt.Errorf("status %d: body %q is not the error shape: %w", r.Status, r.Body, err)
	}
	want, ok := codeStatus[e.Code]
	switch {
	case !ok:
		return e, fmt.Errorf("status %d: undocumented code %q", r.Status, e.Code)
	case want != r.Status:
		return e, fmt.Errorf("status %d with code %q (documented: %d)", r.Status, e.Code, want)
	case e.Message == "":
		return e, fmt.Errorf("status %d: empty message", r.Status)
	case fixedMessages[e.Code] != "" && e.Message != fixedMessages[e.Code]:
		return e, fmt.Errorf("status %d: message %q, documented %q", r.Status, e.Message, fixedMessages[e.Code])
	case e.ModelState != nil && r.Status != 400:
		return e, fmt.Errorf("status %d carries modelState", r.Status)
	case len(e.ModelState) > 1:
		return e, fmt.Errorf("modelState names %d parameters", len(e.ModelState))
	case e.InnerError != nil && (r.Status != 403 || e.InnerError.Code == "" || e.InnerError.Message == ""):
		return e, fmt.Errorf("status %d: innerError %+v outside a complete sign-in refusal", r.Status, *e.InnerError)
	}
	for p, msgs := range e.ModelState {
		if len(msgs) != 1 || msgs[0] != e.Message {
			return e, fmt.Errorf("modelState[%s] = %q, want [message]", p, msgs)
		}
	}
	return e, nil
}

// Eventually polls cond every 50 ms until it holds, and fails the test with cond's
// last explanation if it does not within limit. It is a bounded wait for something
// the system does by itself (recover, settle), not a timing assertion: limit is far
// above what the step needs.
func Eventually(t testing.TB, limit time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	var last string
	for {
		ok, detail := cond()
		if ok {
			return time.Since(start)
		}
		last = detail
		if time.Since(start) > limit {
			t.Fatalf("%s: not within %v; last: %s", what, limit, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
