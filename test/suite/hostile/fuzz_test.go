package hostile

// Fuzz targets for the parsers of untrusted input that had none.
// Already fuzzed elsewhere: ParseDN, ParseIdentifier, NormalizeProperties (root),
// proxy's parseListQuery, ldap's parseRange, memory's LDIF loader, the cache's entry
// decoder, policy's mask, pattern, JSON and lower-casing helpers. Added here, through
// exported functions:
//
//   - FuzzHandler: the whole HTTP handler (path matching, methods, the token header,
//     the query of both methods, hence parseRemoveQuery, which had no fuzz target):
//     every answer is documented, the service only ever sees validated values, and
//     the token never reaches the log.
//   - FuzzAddHandler: the same for POST, whose input is a JSON body and its
//     Content-Type (proxy's own FuzzParseAddBody checks the parser against
//     encoding/json).
//   - FuzzEntryToObject: rendering a directory entry (values an attacker can set on
//     their own directory object) into the API's object and its JSON.
//   - FuzzSIDBytes, FuzzGUIDBytes: the conversions that turn a request's identifier
//     into the binary LDAP filter value, both ways.
//   - FuzzTokenAuthenticate: the token from the header against a tokens file.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/auth/tokenfile"
	"github.com/dirgate/dirgate/internal/ldapentry"
	"github.com/dirgate/dirgate/proxy"
	"github.com/dirgate/dirgate/render"
	"github.com/dirgate/dirgate/test/harness/child"
	"github.com/dirgate/dirgate/test/harness/encodedtest"
	"github.com/dirgate/dirgate/throttle"
)

// fuzzToken is the only token fuzzAuth accepts.
const fuzzToken = "fuzz-token-7c1d"

type fuzzAuth struct{}

func (fuzzAuth) Authenticate(_ context.Context, token string) (dirgate.Principal, error) {
	if token != fuzzToken {
		return dirgate.Principal{}, dirgate.Errorf(dirgate.EUNAUTHENTICATED, "unknown token")
	}
	return dirgate.Principal{DN: "CN=Fuzz,DC=corp,DC=example,DC=com", GUID: "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"}, nil
}

// fuzzService records what the handler passes on and answers like a directory with
// one member in every group.
type fuzzService struct {
	mu    sync.Mutex
	calls []string
	err   error
}

func (s *fuzzService) record(call string, ids ...dirgate.Identifier) {
	for _, id := range ids {
		// Only validated identifiers reach the service: they parse again to
		// themselves.
		again, err := dirgate.ParseIdentifier(id.String())
		if err != nil || again.Canonical() != id.Canonical() || again.Kind() != id.Kind() {
			s.fail("identifier %q reached the service but does not parse to itself: %v", id.String(), err)
		}
	}
	s.mu.Lock()
	s.calls = append(s.calls, call)
	s.mu.Unlock()
}

// fail keeps the first broken expectation.
func (s *fuzzService) fail(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = fmt.Errorf(format, args...)
	}
}

func (s *fuzzService) List(_ context.Context, _ dirgate.Principal, group dirgate.Identifier, opts dirgate.ListOptions) ([]dirgate.Object, error) {
	s.record("list", group)
	if norm, err := dirgate.NormalizeProperties(opts.Properties); err != nil || !slices.Equal(norm, opts.Properties) {
		s.fail("properties %q reached the service unnormalised (%v)", opts.Properties, err)
	}
	if opts.SizeLimit < 0 || opts.SizeLimit > proxy.MaxSizeLimit {
		s.fail("sizeLimit %d reached the service", opts.SizeLimit)
	}
	return []dirgate.Object{{GUID: "11111111-2222-3333-4444-555555555555", DN: "CN=M,DC=corp,DC=example,DC=com", ObjectType: "user"}}, nil
}

func (s *fuzzService) Remove(_ context.Context, _ dirgate.Principal, group, member dirgate.Identifier) (dirgate.OperationResult, error) {
	s.record("remove", group, member)
	return dirgate.OperationResult{ActualObjectDN: group.Canonical()}, nil
}

func (s *fuzzService) Add(_ context.Context, _ dirgate.Principal, group, member dirgate.Identifier) (dirgate.OperationResult, error) {
	s.record("add", group, member)
	return dirgate.OperationResult{ActualObjectDN: group.Canonical()}, nil
}

// documented are every status the API may answer with a working service.
var documented = []int{200, 400, 401, 404, 405, 413, 415, 429}

func FuzzHandler(f *testing.F) {
	g := url.QueryEscape("CN=Help Desk,OU=Groups,DC=corp,DC=example,DC=com")
	for _, s := range []struct{ method, path, query, token string }{
		{"GET", "/restApi/api/directoryObjects/groupMembers", "group=" + g, fuzzToken},
		{"GET", "/restApi/api/directoryObjects/groupMembers", "group=" + g + "&includeIndirect=True&properties=mail,cn&sizeLimit=2", fuzzToken},
		{"DELETE", "/restApi/api/directoryObjects/groupMembers", "group=" + g + "&member=S-1-5-21-1-2-3-1105", fuzzToken},
		{"DELETE", "/RESTAPI/api/directoryobjects/groupmembers/", "group={0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0}&member=" + g, fuzzToken},
		{"GET", "/restApi/api/directoryObjects/groupMembers", "group=*)(member=*", fuzzToken},
		{"GET", "/restApi/api/directoryObjects/groupMembers", "group=%3CGUID%3Dx%3E&group=y", fuzzToken},
		{"DELETE", "/restApi/api/directoryObjects/groupMembers", "group=CN%3Dx%5C00%2CDC%3Dy&member=%FF&Member=1", fuzzToken},
		{"GET", "/restApi/api/directoryObjects/groupMembers", "group=" + g + "&properties=member;range=0-*", "wrong " + fuzzToken},
		{"PUT", "/restApi/api/directoryObjects/groupMembers", "", ""},
		{"GET", "/healthz", "x=%zz", fuzzToken},
		{"GET", "/restApi/api/directoryObjects/groupMember\u017f", "", fuzzToken},
	} {
		f.Add(s.method, s.path, s.query, s.token)
	}
	f.Fuzz(func(t *testing.T, method, path, rawQuery, token string) {
		if !validMethod(method) || !strings.HasPrefix(path, "/") || !validHeaderValue(token) {
			return // net/http refuses these before any handler runs
		}
		var logs bytes.Buffer
		svc := &fuzzService{}
		h, err := proxy.New(proxy.Config{Authenticator: fuzzAuth{}, Service: svc,
			Logger:   slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
			Throttle: mustThrottle(t, throttle.Config{MaxFailures: 10_000}),
			Mounts:   map[string]http.Handler{"/healthz": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {})}})
		if err != nil {
			t.Fatal(err)
		}
		req := &http.Request{Method: method, URL: &url.URL{Path: path, RawQuery: rawQuery}, Header: http.Header{},
			RemoteAddr: "127.0.0.1:40000", Body: http.NoBody, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}
		if token != "" {
			req.Header.Set("Adm-Authorization", token)
		}
		req = req.WithContext(context.Background())
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if path == "/healthz" {
			return
		}
		r := child.Result{Status: rec.Code, Header: rec.Header(), Body: rec.Body.Bytes()}
		if !slices.Contains(documented, r.Status) {
			t.Fatalf("%s %s?%s: undocumented status %d: %s", method, path, rawQuery, r.Status, r.Body)
		}
		if r.Status != 200 {
			if _, err := child.CheckError(r); err != nil {
				t.Fatalf("%s %s?%s: %v", method, path, rawQuery, err)
			}
		} else if !json.Valid(r.Body) {
			t.Fatalf("200 with invalid JSON: %q", r.Body)
		}
		if svc.err != nil {
			t.Fatal(svc.err)
		}
		if (r.Status == 200) != (len(svc.calls) == 1) {
			t.Fatalf("status %d after %d service calls", r.Status, len(svc.calls))
		}
		if len(token) >= 8 && !strings.Contains(path+rawQuery, token) && !strings.Contains(unescapeAll(rawQuery), token) &&
			bytes.Contains(logs.Bytes(), []byte(token)) {
			t.Fatalf("the token reached the log: %s", logs.Bytes())
		}
	})
}

func FuzzAddHandler(f *testing.F) {
	g := "CN=Help Desk,OU=Groups,DC=corp,DC=example,DC=com"
	for _, s := range []struct{ contentType, body, token string }{
		{"application/json", `{"group":"` + g + `","newMember":"S-1-5-21-1-2-3-1105"}`, fuzzToken},
		{"application/json; charset=utf-8", `{"GROUP":"{0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0}","newmember":"` + g + `","x":[1,{}]}`, fuzzToken},
		{"text/json", "\xef\xbb\xbf" + `{"group":"` + g + `","newMember":"CN=x\\00,DC=y"}`, fuzzToken},
		{"application/json", `{"group":"*)(member=*","newMember":"\ud800"}`, fuzzToken},
		{"application/json", `{"group":"` + g + `","group":"` + g + `"}`, fuzzToken},
		{"application/json", `[1,2,3]`, fuzzToken},
		{"text/plain", `{"group":"` + g + `","newMember":"` + g + `"}`, fuzzToken},
		{"application/json", `{"group":"` + g + `","newMember":"` + g + `"}`, "wrong " + fuzzToken},
	} {
		f.Add(s.contentType, s.body, s.token)
	}
	f.Fuzz(func(t *testing.T, contentType, body, token string) {
		if !validHeaderValue(token) || !validHeaderValue(contentType) {
			return // net/http refuses these before any handler runs
		}
		var logs bytes.Buffer
		svc := &fuzzService{}
		h, err := proxy.New(proxy.Config{Authenticator: fuzzAuth{}, Service: svc,
			Logger:   slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
			Throttle: mustThrottle(t, throttle.Config{MaxFailures: 10_000})})
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest("POST", "/restApi/api/directoryObjects/groupMembers", strings.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		if token != "" {
			req.Header.Set("Adm-Authorization", token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		r := child.Result{Status: rec.Code, Header: rec.Header(), Body: rec.Body.Bytes()}
		if !slices.Contains(documented, r.Status) {
			t.Fatalf("POST %q (%s): undocumented status %d: %s", body, contentType, r.Status, r.Body)
		}
		if r.Status != 200 {
			if _, err := child.CheckError(r); err != nil {
				t.Fatalf("POST %q: %v", body, err)
			}
		} else if !json.Valid(r.Body) || !json.Valid([]byte(strings.TrimPrefix(body, "\xef\xbb\xbf"))) {
			t.Fatalf("200 for body %q, answer %q", body, r.Body)
		}
		if svc.err != nil {
			t.Fatal(svc.err)
		}
		if (r.Status == 200) != (len(svc.calls) == 1) {
			t.Fatalf("status %d after %d service calls", r.Status, len(svc.calls))
		}
		if len(token) >= 8 && !strings.Contains(body, token) && bytes.Contains(logs.Bytes(), []byte(token)) {
			t.Fatalf("the token reached the log: %s", logs.Bytes())
		}
	})
}

func unescapeAll(q string) string {
	u, err := url.QueryUnescape(q)
	if err != nil {
		return q
	}
	return u
}

// validMethod is net/http's rule: a token of visible ASCII without separators.
func validMethod(m string) bool {
	if m == "" {
		return false
	}
	for i := 0; i < len(m); i++ {
		c := m[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// validHeaderValue is net/http's rule for a field value it accepts: no controls but
// tab, no leading or trailing whitespace (it would have been trimmed).
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return strings.TrimSpace(v) == v
}

func FuzzEntryToObject(f *testing.F) {
	guid := []byte{0x08, 0xa0, 0x72, 0x1e, 0x77, 0xe2, 0xfd, 0x4b, 0x81, 0x2f, 0x2f, 0x72, 0xc3, 0xc8, 0x85, 0xdf}
	sid, _ := ldapentry.SIDToBytes("S-1-5-21-508194244-2207095322-3016344161-1104")
	f.Add("CN=alice,CN=Users,DC=corp,DC=example,DC=com", guid, sid, "user", "512", "0", "133000000000000000", "9223372036854775807", "20240102030405.0Z", []byte("alice@corp.example.com"))
	f.Add(`CN=Smith\, John (Ünïcode)*,OU=x,DC=corp,DC=example,DC=com`, guid, sid, "computer", "4098", "9223372036854775806", "-1", "0", "bad", []byte{0xff, 0xfe})
	f.Add("CN=g,DC=corp", guid[:15], []byte{1, 200}, "group", "x", "", "", "", "20240102030405.5e3Z", []byte{})
	f.Fuzz(func(t *testing.T, dn string, guid, sid []byte, class, uac, accountExpires, pwdLastSet, expiry, whenChanged string, mail []byte) {
		e := ldapentry.NewEntry(dn)
		e.Add("objectGUID", guid)
		e.Add("objectSid", sid)
		e.Add("objectClass", []byte("top"), []byte(class))
		e.Add("userAccountControl", []byte(uac))
		e.Add("accountExpires", []byte(accountExpires))
		e.Add("pwdLastSet", []byte(pwdLastSet))
		e.Add("msDS-UserPasswordExpiryTimeComputed", []byte(expiry))
		e.Add("whenChanged", []byte(whenChanged))
		e.Add("mail", mail)
		e.Add("thumbnailPhoto", guid, mail)
		props := []string{"mail", "objectguid", "objectsid", "whenchanged", "accountexpires", "thumbnailphoto", "absent"}
		o, err := e.ToObject(props, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		if err != nil {
			return
		}
		if id, err := dirgate.ParseIdentifier(o.GUID); err != nil || id.Kind() != dirgate.KindGUID || id.Canonical() != o.GUID {
			t.Fatalf("GUID %q is not canonical", o.GUID)
		}
		if o.DN != dn {
			t.Fatalf("DN %q rendered as %q", dn, o.DN)
		}
		for _, p := range props {
			vals, ok := o.Properties[p]
			if !ok || vals == nil {
				t.Fatalf("property %s missing or null", p)
			}
			for _, v := range vals {
				if !utf8.ValidString(v) {
					t.Fatalf("property %s value %q is not UTF-8", p, v)
				}
			}
		}
		b, err := json.Marshal(o)
		if err != nil || !json.Valid(b) {
			t.Fatalf("object does not encode: %v", err)
		}
		// The cache's pre-encoded path must give what json.Marshal gives.
		enc, err := encodedtest.EncodeListing([]dirgate.Object{o})
		if err != nil {
			t.Fatal(err)
		}
		joined, err := render.AppendJSON(nil, enc, []dirgate.Object{o})
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal([]dirgate.Object{o})
		if !bytes.Equal(joined, want) {
			t.Fatalf("encoded listing %s, json.Marshal %s", joined, want)
		}
	})
}

func FuzzSIDBytes(f *testing.F) {
	for _, s := range []string{"S-1-5-21-508194244-2207095322-3016344161-1104", "s-1-5-11", "S-1-0", "S-1-281474976710655-4294967295",
		"S-1-5-21-0-0-0-0-0-0-0-0-0-0-0-0-0-0", "S-1-5-01", "S-2-5", "S-1-5-21-*", "S-1-5-4294967296"} {
		f.Add(s, []byte(nil))
	}
	f.Add("", []byte{1, 1, 0, 0, 0, 0, 0, 5, 11, 0, 0, 0})
	f.Add("", []byte{1, 200, 0, 0, 0, 0, 0, 5})
	f.Fuzz(func(t *testing.T, s string, raw []byte) {
		// A request's SID: if it converts, the bytes convert back to its canonical form.
		if b, err := ldapentry.SIDToBytes(s); err == nil {
			id, perr := dirgate.ParseIdentifier(s)
			if perr != nil || id.Kind() != dirgate.KindSID {
				t.Fatalf("SIDToBytes accepted %q, ParseIdentifier refuses it: %v", s, perr)
			}
			back, err := ldapentry.SIDFromBytes(b)
			if err != nil || back != id.Canonical() {
				t.Fatalf("%q -> %x -> %q, %v; want %q", s, b, back, err, id.Canonical())
			}
		}
		// A directory's SID bytes: if they render, the string converts back to them.
		if str, err := ldapentry.SIDFromBytes(raw); err == nil && raw[0] == 1 && len(raw) <= 8+4*15 {
			b, err := ldapentry.SIDToBytes(str)
			if err != nil || !bytes.Equal(b, raw) {
				t.Fatalf("%x -> %q -> %x, %v", raw, str, b, err)
			}
		}
	})
}

func FuzzGUIDBytes(f *testing.F) {
	f.Add("1e72a008-e277-4bfd-812f-2f72c3c885df", []byte("0123456789abcdef"))
	f.Add("{1E72A008-E277-4BFD-812F-2F72C3C885DF}", []byte{})
	f.Add("1e72a008e2774bfd812f2f72c3c885df", []byte{0})
	f.Add("1e72a008-e277-4bfd-812f-2f72c3c885d", []byte{0})
	f.Fuzz(func(t *testing.T, s string, raw []byte) {
		if b, err := ldapentry.GUIDToBytes(s); err == nil {
			id, perr := dirgate.ParseIdentifier(s)
			if perr != nil || id.Kind() != dirgate.KindGUID || len(b) != 16 || ldapentry.GUIDFromBytes(b) != id.Canonical() {
				t.Fatalf("%q -> %x -> %q; ParseIdentifier %v %q", s, b, ldapentry.GUIDFromBytes(b), perr, id.Canonical())
			}
		}
		if len(raw) == 16 {
			b, err := ldapentry.GUIDToBytes(ldapentry.GUIDFromBytes(raw))
			if err != nil || !bytes.Equal(b, raw) {
				t.Fatalf("%x -> %x, %v", raw, b, err)
			}
		}
	})
}

// fuzzResolver gives every subject a principal.
type fuzzResolver struct{}

func (fuzzResolver) Principal(_ context.Context, id dirgate.Identifier) (dirgate.Principal, error) {
	return dirgate.Principal{DN: id.Canonical()}, nil
}

func FuzzTokenAuthenticate(f *testing.F) {
	const plain, hashed = "plain-token-1", "hashed-token-2"
	sum := sha256.Sum256([]byte(hashed))
	file := "- token: " + plain + "\n  subject: CN=A,DC=corp,DC=example,DC=com\n" +
		"- sha256: " + hex.EncodeToString(sum[:]) + "\n  subject: S-1-5-21-1-2-3-1105\n"
	tf, err := tokenfile.Open(tokenfile.Config{Path: "fuzz", Data: []byte(file), Resolver: fuzzResolver{},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{plain, plain + " ", " " + plain, strings.ToUpper(plain), plain[:len(plain)-1], hashed, hashed + "\n",
		hex.EncodeToString(sum[:]), "", strings.Repeat("a", 5000), plain + "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, token string) {
		p, err := tf.Authenticate(context.Background(), token)
		switch {
		case token == plain:
			if err != nil || p.DN != "CN=A,DC=corp,DC=example,DC=com" {
				t.Fatalf("the plain token was refused: %v", err)
			}
		case token == hashed:
			if err != nil || p.DN != "S-1-5-21-1-2-3-1105" {
				t.Fatalf("the hashed token was refused: %v", err)
			}
		case err == nil:
			t.Fatalf("token %q authenticated as %q", token, p.DN)
		case dirgate.ErrorCode(err) != dirgate.EUNAUTHENTICATED:
			t.Fatalf("token %q: %v, want unauthenticated", token, err)
		}
	})
}

// mustThrottle is the throttle of cfg (the defaults without one).
func mustThrottle(t testing.TB, cfg ...throttle.Config) *throttle.Throttle {
	t.Helper()
	var c throttle.Config
	if len(cfg) > 0 {
		c = cfg[0]
	}
	th, err := throttle.New(c)
	if err != nil {
		t.Fatalf("throttle.New: %v", err)
	}
	return th
}
