package proxy

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// largeJSON is a body shaped as a listing: objects that repeat their shape every few
// hundred bytes, as compressible as a real one, of about n KB.
func largeJSON(n int) []byte {
	var b bytes.Buffer
	b.WriteByte('[')
	for i := 0; b.Len() < n<<10; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"guid":"%08x-0000-4000-8000-%012x","dn":"CN=User %d,OU=Staff,DC=corp,DC=example,DC=com","objectType":"user"}`, i*7919, i, i)
	}
	b.WriteByte(']')
	return b.Bytes()
}

// A compressed form lives as long as its body: it must not keep the quarter of the
// JSON reserved for it when it needs much less.
func TestCompressedFormsFitted(t *testing.T) {
	b := largeJSON(4 << 10)
	for name, c := range map[string][]byte{"gzip": gzipVariant(b), "zstd": zstdVariant(b)} {
		if c == nil || len(c) > len(b)/8 {
			t.Fatalf("%s: %d bytes for %d of JSON: not compressed as expected", name, len(c), len(b))
		}
		if cap(c)-len(c) > len(c)/8 {
			t.Errorf("%s: %d bytes kept in an array of %d", name, len(c), cap(c))
		}
	}
}

// The zstd form is made with a 1 MiB window (the encoder's history stays small): a
// decoder that allows no more decodes it.
func TestZstdWindowOneMiB(t *testing.T) {
	b := largeJSON(4 << 10)
	dec, err := zstd.NewReader(nil, zstd.WithDecoderMaxWindow(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	got, err := dec.DecodeAll(zstdVariant(b), nil)
	if err != nil {
		t.Fatalf("decode with a 1 MiB window: %v", err)
	}
	if !bytes.Equal(got, b) {
		t.Fatal("decoded body differs")
	}
}
