package load

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/klauspost/compress/gzip"
)

// Compressed answers are decoded and checked like any other, the bare server
// replays them in their coding, sizes are counted as sent, and the CPU of the
// processes named is reported beside them.
func TestCompressedAnswers(t *testing.T) {
	g := startGateway(t)
	w := g.Setup.MixWorkload().Listings()
	w.Callers = g.Setup.Callers
	c := expectDemo(t, w)
	plain, err := Run(t.Context(), NewHTTPTarget("dirgate", g.URL, w, c), w, runOpts(2, 100))
	if err != nil {
		t.Fatal(err)
	}
	for _, enc := range []string{"gzip", "zstd"} {
		dg := NewHTTPTarget("dirgate", g.URL, w, c)
		dg.AcceptEncoding = enc
		bodies, err := dg.Capture(t.Context(), w)
		if err != nil {
			t.Fatal(err)
		}
		coded := 0
		for _, b := range bodies {
			if b.Encoding == enc {
				coded++
			} else if b.Encoding != "" {
				t.Fatalf("asked for %s, captured %s", enc, b.Encoding)
			}
		}
		if coded == 0 {
			t.Fatalf("%s: no answer came compressed", enc)
		}
		bare, err := StartBare(bodies)
		if err != nil {
			t.Fatal(err)
		}
		defer bare.Close()
		bt := NewHTTPTarget("bare", bare.URL, w, c)
		bt.AcceptEncoding = enc
		for _, target := range []*HTTPTarget{dg, bt} {
			opts := runOpts(2, 100)
			opts.Processes = []Process{{Name: ClientProcess}}
			rep, err := Run(t.Context(), target, w, opts)
			if err != nil {
				t.Fatal(err)
			}
			if rep.All.ErrorCount() != 0 || rep.All.Wrong != 0 {
				t.Fatalf("%s %s: errors %v, wrong %d: %q", enc, target.Label, rep.All.Errors, rep.All.Wrong, rep.All.Examples)
			}
			if rep.All.KBPerRequest >= plain.All.KBPerRequest {
				t.Errorf("%s %s: %.1f KB per answer, %.1f uncompressed", enc, target.Label, rep.All.KBPerRequest, plain.All.KBPerRequest)
			}
			if len(rep.CPU) != 1 || rep.CPU[0].Name != ClientProcess {
				t.Errorf("cpu %+v", rep.CPU)
			}
		}
	}
}

// An answer compressed although the client did not ask, or in a coding it did not
// ask for, is wrong.
func TestUnaskedCodingIsWrong(t *testing.T) {
	g := startGateway(t)
	w := g.Setup.MixWorkload().Listings()
	w.Callers = g.Setup.Callers
	c := expectDemo(t, w)
	captured, err := NewHTTPTarget("dirgate", g.URL, w, c).Capture(t.Context(), w)
	if err != nil {
		t.Fatal(err)
	}
	fake := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		c := captured[bareKey(r.Header.Get(TokenHeader), r.URL.RawQuery)]
		rw.Header().Set("Content-Encoding", "gzip")
		if c.Status != 0 {
			rw.WriteHeader(c.Status) // a hidden group's 404, compressed unasked
		}
		zw := gzip.NewWriter(rw)
		zw.Write(c.Body)
		zw.Close()
	}))
	defer fake.Close()
	for _, accept := range []string{"", "zstd"} {
		target := NewHTTPTarget("fake", fake.URL, w, c)
		target.AcceptEncoding = accept
		rep, err := Run(t.Context(), target, w, runOpts(1, 20))
		if err != nil {
			t.Fatal(err)
		}
		if rep.All.Wrong != 20 {
			t.Errorf("accept %q: %d of 20 wrong", accept, rep.All.Wrong)
		}
	}
}

func TestReadCPU(t *testing.T) {
	d, err := readCPU(0)
	if err != nil || d < 0 {
		t.Fatalf("own cpu %v, %v", d, err)
	}
	if _, err := readCPU(1 << 30); err == nil {
		t.Error("no error for a process that does not exist")
	}
}
