package hostile

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dirgate/dirgate/test/harness/child"
	"github.com/dirgate/dirgate/test/harness/fixture"
)

// rawSend writes req byte for byte on a new connection (Go's client refuses to send
// most of these requests) and reads the answer.
func rawSend(t *testing.T, addr, req string) child.Result {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		return child.Result{Err: err}
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return child.Result{Err: err}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return child.Result{Status: res.StatusCode, Header: res.Header, Body: b, Err: err}
}

// TestHeaderTricks sends requests with malformed, repeated, oversized or misnamed
// headers to the demo.
//
// Most reach dirgate and must be answered in the error shape. A few are refused by
// Go's HTTP server before dirgate sees them (a header block over 64 KiB, a bare CR,
// a NUL, a space before the colon): net/http answers those with a plain-text 400 or
// 431 that docs/api.md does not describe (reported as a documentation gap); the test
// checks their status and that the answer reflects nothing of the request.
func TestHeaderTricks(t *testing.T) {
	e := demoTarget(t)
	u, _ := url.Parse(child.ListURL(e.p.Base, fixture.HelpDeskDN, ""))
	line := "GET " + u.RequestURI() + " HTTP/1.1\r\nHost: " + e.p.Addr + "\r\nConnection: close\r\n"
	const end = "\r\n"
	tok := "Adm-Authorization: demo-admin\r\n"
	tests := []struct {
		name string
		req  string
		want int
		// plain: refused by net/http itself, with a text/plain body.
		plain bool
	}{
		// The baseline: a well-formed request is served.
		{name: "well formed", req: line + tok + end, want: 200},
		// Two tokens: which one was meant is unknowable (docs/api.md).
		{name: "header twice", req: line + tok + tok + end, want: 401},
		{name: "header twice in two letter cases", req: line + tok + "adm-authorization: demo-admin\r\n" + end, want: 401},
		// CRLF smuggling a second header is just two headers.
		{name: "second header through CRLF", req: line + "Adm-Authorization: nope\r\nAdm-Authorization: demo-admin\r\n" + end, want: 401},
		// A comma-separated list is not a token.
		{name: "token list", req: line + "Adm-Authorization: demo-admin, demo-admin\r\n" + end, want: 401},
		// The product's header only: the standard one, with or without a scheme, is
		// an unknown credential.
		{name: "Authorization instead", req: line + "Authorization: demo-admin\r\n" + end, want: 401},
		{name: "Authorization Bearer", req: line + "Authorization: Bearer demo-admin\r\n" + end, want: 401},
		{name: "Bearer scheme in Adm-Authorization", req: line + "Adm-Authorization: Bearer demo-admin\r\n" + end, want: 401},
		// Whitespace around a field value is not part of it (RFC 9110 5.5): the token
		// is the same token. Whitespace inside is a different token.
		{name: "token with surrounding spaces", req: line + "Adm-Authorization:   demo-admin   \r\n" + end, want: 200},
		{name: "token with surrounding tabs", req: line + "Adm-Authorization:\tdemo-admin\t\r\n" + end, want: 200},
		{name: "token with an inner space", req: line + "Adm-Authorization: demo- admin\r\n" + end, want: 401},
		// An obsolete line fold joins the lines with a space: an inner space.
		{name: "obs-fold continuation", req: line + "Adm-Authorization: demo-\r\n admin\r\n" + end, want: 401},
		{name: "empty token", req: line + "Adm-Authorization: \r\n" + end, want: 401},
		{name: "token with byte FF", req: line + "Adm-Authorization: demo-admin\xff\r\n" + end, want: 401},
		{name: "token over 4096 bytes", req: line + "Adm-Authorization: " + strings.Repeat("t", 5000) + "\r\n" + end, want: 401},
		// Bodies are refused, including a request smuggling one with both framings.
		{name: "Content-Length body", req: line + tok + "Content-Length: 3\r\n" + end + "abc", want: 400},
		{name: "chunked and Content-Length", req: line + tok + "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n" + end + "0\r\n\r\n", want: 400},
		// A method override header changes nothing: this stays a listing.
		{name: "method override header", req: line + tok + "X-HTTP-Method-Override: DELETE\r\n" + end, want: 200},
		// Refused by net/http before dirgate.
		{name: "header block over 64 KiB", req: line + tok + "X-Pad: " + strings.Repeat("p", 70<<10) + "\r\n" + end, want: 431, plain: true},
		{name: "token over 64 KiB", req: line + "Adm-Authorization: " + strings.Repeat("t", 70<<10) + "\r\n" + end, want: 431, plain: true},
		{name: "request line over 64 KiB", req: "GET " + u.RequestURI() + "&pad=" + strings.Repeat("p", 70<<10) + " HTTP/1.1\r\nHost: x\r\n" + tok + end, want: 431, plain: true},
		{name: "bare CR in a value", req: line + "Adm-Authorization: demo-admin\rX-Evil: 1\r\n" + end, want: 400, plain: true},
		{name: "NUL in a value", req: line + "Adm-Authorization: demo-admin\x00\r\n" + end, want: 400, plain: true},
		{name: "space before the colon", req: line + "Adm-Authorization : demo-admin\r\n" + end, want: 400, plain: true},
		{name: "garbage request line", req: "GET\r\n\r\n", want: 400, plain: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := rawSend(t, e.p.Addr, tc.req)
			if r.Err != nil {
				t.Fatalf("no answer: %v", r.Err)
			}
			if r.Status != tc.want {
				t.Fatalf("status %d, want %d: %.300s", r.Status, tc.want, r.Body)
			}
			switch {
			case tc.plain:
				// Nothing of the request comes back (no reflected token or padding).
				if strings.Contains(string(r.Body), "demo-admin") || strings.Contains(string(r.Body), "ppp") || len(r.Body) > 200 {
					t.Errorf("the refusal reflects the request: %.300s", r.Body)
				}
				t.Logf("GAP: answered by net/http, not in the documented error shape: %d %q", r.Status, r.Body)
			case r.Status == 200:
				if len(dnKeys(t, r.Body)) == 0 {
					t.Errorf("empty listing")
				}
			default:
				if _, err := child.CheckError(r); err != nil {
					t.Error(err)
				}
			}
		})
	}
	// The override header did not remove anything.
	if got := e.members(); len(got) == 0 || !strings.Contains(strings.Join(got, "|"), "hugo helpdesk") {
		t.Errorf("Help Desk lost members: %v", got)
	}
}

// TestPathTricks: anything but the resource's path is 404 in the error shape, without
// authentication, and never reaches the listing.
func TestPathTricks(t *testing.T) {
	e := demoTarget(t)
	q := "?group=" + url.QueryEscape(fixture.HelpDeskDN)
	for _, tc := range []struct {
		name, path string
		want       int
	}{
		// Documented: case-insensitive path, one trailing slash.
		{name: "letter case", path: "/RESTAPI/api/DirectoryObjects/GroupMembers", want: 200},
		{name: "trailing slash", path: "/restApi/api/directoryObjects/groupMembers/", want: 200},
		// Documented: other escapes are decoded before matching...
		{name: "encoded letter", path: "/restApi/%61pi/directoryObjects/groupMembers", want: 200},
		// ...but an encoded slash is never a separator (docs/api.md): a front proxy
		// routing or filtering by the raw path sees the same resource as dirgate.
		{name: "encoded slash", path: "/restApi/api%2FdirectoryObjects/groupMembers", want: 404},
		{name: "encoded slash, lower case", path: "/restApi/api/directoryObjects%2fgroupMembers", want: 404},
		{name: "encoded slash in the base", path: "/restApi%2Fapi/directoryObjects/groupMembers", want: 404},
		{name: "encoded trailing slash", path: "/restApi/api/directoryObjects/groupMembers%2F", want: 404},
		{name: "double-encoded slash", path: "/restApi/api%252FdirectoryObjects/groupMembers", want: 404},
		{name: "encoded slash to the decisions API", path: "/restApi/api/policy%2Fdecisions", want: 404},
		{name: "encoded slash to sign-in", path: "/restApi/api/authSessions%2Fcreate", want: 404},
		// Not the path: dot segments, doubled slashes, parameters in the path, an
		// encoded NUL, Unicode look-alikes.
		{name: "dot segment", path: "/restApi/api/directoryObjects/groupMembers/../groupMembers", want: 404},
		{name: "encoded dot segment", path: "/restApi/api/directoryObjects/x/%2e%2e/groupMembers", want: 404},
		{name: "double slash", path: "//restApi/api/directoryObjects/groupMembers", want: 404},
		{name: "path parameter", path: "/restApi/api/directoryObjects/groupMembers;x=1", want: 404},
		{name: "encoded NUL", path: "/restApi/api/directoryObjects/groupMembers%00", want: 404},
		{name: "long s look-alike", path: "/restApi/api/directoryObjects/groupMember%C5%BF", want: 404},
		{name: "two trailing slashes", path: "/restApi/api/directoryObjects/groupMembers//", want: 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rawSend(t, e.p.Addr, "GET "+tc.path+q+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAdm-Authorization: demo-admin\r\n\r\n")
			if r.Err != nil || r.Status != tc.want {
				t.Fatalf("%s: %v %d, want %d: %.200s", tc.path, r.Err, r.Status, tc.want, r.Body)
			}
			if r.Status != 200 {
				if _, err := child.CheckError(r); err != nil {
					t.Error(err)
				}
			}
		})
	}
}
