package proxy_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/proxy"
)

// manyObjects is a listing whose JSON is well above the compression threshold.
func manyObjects(n int) []dirgate.Object {
	objs := make([]dirgate.Object, n)
	for i := range objs {
		objs[i] = dirgate.Object{GUID: fmt.Sprintf("%08d-0000-4000-8000-000000000000", i),
			DN: fmt.Sprintf("CN=User %d,OU=Staff,DC=corp,DC=example,DC=com", i), ObjectType: "user"}
	}
	return objs
}

// decode undoes a response's content coding.
func decode(t *testing.T, enc string, b []byte) []byte {
	t.Helper()
	switch enc {
	case "":
		return b
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		out, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		return out
	case "zstd":
		zr, err := zstd.NewReader(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		out, err := zr.DecodeAll(b, nil)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	t.Fatalf("unexpected Content-Encoding %q", enc)
	return nil
}

// TestAcceptEncoding: the coding follows RFC 9110's rules for Accept-Encoding, with
// zstd preferred over gzip at equal weight and identity whenever nothing else is
// acceptable; the body decodes to exactly the listing, with a Content-Length of the
// bytes sent, and every listing varies with Accept-Encoding.
func TestAcceptEncoding(t *testing.T) {
	objs := manyObjects(50)
	want, _ := json.Marshal(objs)
	tests := []struct{ accept, want string }{
		{"", ""},
		{"gzip", "gzip"},
		{"GZIP", "gzip"},
		{"x-gzip", "gzip"},
		{"zstd", "zstd"},
		{"gzip, deflate, br, zstd", "zstd"},
		{"gzip, zstd;q=0.9", "gzip"},
		{"gzip;q=0.5, zstd;q=0.5", "zstd"},
		{"gzip;q=1.000, zstd;q=0.999", "gzip"},
		{"zstd;q=0, gzip", "gzip"},
		{"zstd;q=0, gzip;q=0", ""},
		{"identity", ""},
		{"identity;q=0", ""}, // nothing else acceptable: identity all the same, never 406
		{"*", "zstd"},
		{"*;q=0", ""},
		{"*;q=0.1, zstd;q=0", "gzip"},
		{"gzip;q=0, *", "zstd"},
		{"br, deflate, compress", ""},
		{"unknown-coding", ""},
		{"gzip;q=2", ""},      // out of range: ignored
		{"gzip;q=0.1234", ""}, // more than three decimals
		{"gzip;level=9", ""},  // a parameter other than q
		{"gzip;q=abc, zstd", "zstd"},
		{" gzip ; q=0.8 ,zstd;q=0.2", "gzip"},
		{",,,", ""},
	}
	for _, tc := range tests {
		t.Run(tc.accept, func(t *testing.T) {
			e := newEnv(t, nil)
			e.svc.objs = objs
			w := e.do(http.MethodGet, api+"?group=CN%3DG", map[string]string{"Accept-Encoding": tc.accept})
			if w.Code != http.StatusOK {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			checkJSONHeaders(t, w)
			if got := w.Header().Get("Content-Encoding"); got != tc.want {
				t.Errorf("Content-Encoding %q, want %q", got, tc.want)
			}
			if v := w.Header().Get("Vary"); v != "Accept-Encoding" {
				t.Errorf("Vary %q", v)
			}
			if cl := w.Header().Get("Content-Length"); cl != fmt.Sprint(w.Body.Len()) {
				t.Errorf("Content-Length %s for %d bytes", cl, w.Body.Len())
			}
			if tc.want != "" && w.Body.Len() >= len(want)/2 {
				t.Errorf("%d bytes compressed from %d", w.Body.Len(), len(want))
			}
			if got := decode(t, tc.want, w.Body.Bytes()); !bytes.Equal(got, want) {
				t.Errorf("decoded body differs from the listing")
			}
		})
	}
	// Two Accept-Encoding fields are one list.
	e := newEnv(t, nil)
	e.svc.objs = objs
	r := httptest.NewRequest(http.MethodGet, api+"?group=CN%3DG", nil)
	r.Header.Set(proxy.HeaderToken, goodToken)
	r.Header.Add("Accept-Encoding", "zstd;q=0")
	r.Header.Add("Accept-Encoding", "gzip")
	if w := e.serve(r); w.Header().Get("Content-Encoding") != "gzip" {
		t.Errorf("two fields: Content-Encoding %q", w.Header().Get("Content-Encoding"))
	}
}

// TestSmallAndErrorBodiesUncompressed: a listing below the threshold and every error
// answer are sent as they are, whatever the client accepts.
func TestSmallAndErrorBodiesUncompressed(t *testing.T) {
	e := newEnv(t, nil)
	e.svc.objs = manyObjects(1)
	w := e.do(http.MethodGet, api+"?group=CN%3DG", map[string]string{"Accept-Encoding": "gzip, zstd"})
	if w.Code != http.StatusOK || w.Header().Get("Content-Encoding") != "" {
		t.Errorf("small listing: status %d, Content-Encoding %q", w.Code, w.Header().Get("Content-Encoding"))
	}
	if w.Header().Get("Vary") != "Accept-Encoding" {
		t.Errorf("small listing: Vary %q", w.Header().Get("Vary"))
	}
	for _, target := range []string{api + "?group=", api + "?group=CN%3DG&sizeLimit=-1", "/nowhere"} {
		w := e.do(http.MethodGet, target, map[string]string{"Accept-Encoding": "gzip, zstd"})
		if w.Code == http.StatusOK || w.Header().Get("Content-Encoding") != "" {
			t.Errorf("%s: status %d, Content-Encoding %q", target, w.Code, w.Header().Get("Content-Encoding"))
		}
		if !json.Valid(w.Body.Bytes()) {
			t.Errorf("%s: error body is not plain JSON: %q", target, w.Body)
		}
	}
	e.svc.err = dirgate.Errorf(dirgate.ENOTFOUND, "The group was not found.")
	w = e.do(http.MethodGet, api+"?group=CN%3DG", map[string]string{"Accept-Encoding": "gzip"})
	if w.Code != http.StatusNotFound || w.Header().Get("Content-Encoding") != "" {
		t.Errorf("service error: status %d, Content-Encoding %q", w.Code, w.Header().Get("Content-Encoding"))
	}
}
