package proxy

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// Content codings a listing is sent in, besides identity, in the server's order of
// preference when a client accepts several equally: zstd compresses these bodies
// slightly better than gzip and decodes faster.
const (
	encZstd = "zstd"
	encGzip = "gzip"
)

// minCompressed is the smallest body worth compressing: below it, the coding's
// headers and the client's work outweigh the bytes saved.
const minCompressed = 1024

// maxAcceptEncoding bounds the header parsed; a longer one is read as identity only.
const maxAcceptEncoding = 1024

// negotiate returns the content coding to send a body in given the request's
// Accept-Encoding fields (RFC 9110, 12.5.3): "" for identity. A coding is acceptable
// when it is named, or covered by "*", with a q-value above 0; the highest q-value
// wins, then the server's preference. Identity is sent when nothing else is
// acceptable, even if the client refused it: a listing is never answered 406.
func negotiate(fields []string) string {
	n := 0
	for _, f := range fields {
		n += len(f)
	}
	if n == 0 || n > maxAcceptEncoding {
		return ""
	}
	qZstd, qGzip, qStar := -1.0, -1.0, -1.0 // -1: not mentioned
	for _, f := range fields {
		for _, item := range strings.Split(f, ",") {
			name, params, _ := strings.Cut(item, ";")
			name = strings.ToLower(strings.TrimSpace(name))
			q, ok := qValue(params)
			if !ok {
				continue // a malformed item is ignored, not the whole header
			}
			switch name {
			case encZstd:
				qZstd = max(qZstd, q)
			case encGzip, "x-gzip":
				qGzip = max(qGzip, q)
			case "*":
				qStar = max(qStar, q)
			}
		}
	}
	if qZstd < 0 {
		qZstd = qStar
	}
	if qGzip < 0 {
		qGzip = qStar
	}
	switch {
	case qZstd > 0 && qZstd >= qGzip:
		return encZstd
	case qGzip > 0:
		return encGzip
	}
	return ""
}

// qValue reads the weight of an Accept-Encoding item from its parameters: 1 when
// there is none, false when it is malformed (RFC 9110, 12.4.2: 0 to 1, at most three
// decimals).
func qValue(params string) (float64, bool) {
	params = strings.TrimSpace(params)
	if params == "" {
		return 1, true
	}
	k, v, ok := strings.Cut(params, "=")
	if !ok || !strings.EqualFold(strings.TrimSpace(k), "q") {
		return 0, false
	}
	v = strings.TrimSpace(v)
	if len(v) == 0 || len(v) > 5 || (v[0] != '0' && v[0] != '1') {
		return 0, false
	}
	for i := 1; i < len(v); i++ {
		if c := v[i]; !(c >= '0' && c <= '9') && !(i == 1 && c == '.') {
			return 0, false
		}
	}
	q, err := strconv.ParseFloat(v, 64)
	if err != nil || q > 1 {
		return 0, false
	}
	return q, true
}

// encoded returns body in coding enc, made once per shared body (Body.Variant), or
// nil when it must be sent as is: identity asked for, a small body, or a compressed
// form no smaller than the JSON.
func encoded(body Body, enc string) []byte {
	if enc == "" || len(body.JSON()) < minCompressed {
		return nil
	}
	// Top-level functions, not a closure: a closure passed through the interface
	// would be allocated on every request.
	variant := gzipVariant
	if enc == encZstd {
		variant = zstdVariant
	}
	return body.Variant(enc, variant)
}

func gzipVariant(b []byte) []byte { return smaller(gzipBytes(b), b) }

func zstdVariant(b []byte) []byte { return smaller(zstdBytes(b), b) }

// smaller returns c, a compressed form of b, when it is smaller than b; nil otherwise.
func smaller(c, b []byte) []byte {
	if len(c) >= len(b) {
		return nil
	}
	return c
}

func gzipBytes(b []byte) []byte {
	var out bytes.Buffer
	out.Grow(len(b) / 4)
	zw, _ := gzip.NewWriterLevel(&out, gzip.DefaultCompression) // the level is valid
	_, _ = zw.Write(b)                                          // a bytes.Buffer does not fail
	_ = zw.Close()
	return fitted(out.Bytes())
}

// zstdEncoder is safe for concurrent EncodeAll calls. Its window is 1 MiB, not the
// level's 8 MiB, and it keeps the smaller history buffers: the encoder lives as long
// as the process, and with the defaults it held 16 MiB of history once it had
// compressed one large listing (a heap profile after a 100,000-member listing, issue
// 26), against about 1 MiB. A listing repeats the shape of its objects every few
// hundred bytes, so the smaller window compresses these bodies as well (2,785,328
// bytes against 2,810,526 for the 44 MB body of 100,000 members), and clients need
// less memory to decode it.
var zstdEncoder, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1),
	zstd.WithWindowSize(1<<20), zstd.WithLowerEncoderMem(true))

func zstdBytes(b []byte) []byte { return fitted(zstdEncoder.EncodeAll(b, make([]byte, 0, len(b)/4))) }

// fitted returns c, or a copy of it in an array of its length when c's array is
// much larger: a compressed form is kept as long as its body, and the quarter of
// the JSON reserved for it is three times what a large listing needs (3.1 MB of
// gzip in 11 MB for 100,000 members). The copy costs one pass over the compressed
// bytes, once per body.
func fitted(c []byte) []byte {
	if cap(c)-len(c) <= len(c)/8 {
		return c
	}
	return bytes.Clone(c)
}

// writeListing writes a listing's body in the coding the client prefers. Every
// listing answer varies with Accept-Encoding, whichever coding it has.
func writeListing(w http.ResponseWriter, r *http.Request, body Body) {
	h := w.Header()
	if len(h["Vary"]) == 0 {
		h["Vary"] = varyEncoding
	} else {
		h.Add("Vary", "Accept-Encoding")
	}
	enc := negotiate(r.Header.Values("Accept-Encoding"))
	if b := encoded(body, enc); b != nil {
		h.Set("Content-Encoding", enc)
		writeJSON(w, http.StatusOK, b)
		return
	}
	writeJSON(w, http.StatusOK, body.JSON())
}
