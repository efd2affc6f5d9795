package opaconfig

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"testing"
)

// window is how far a fresh decompression of what boundedBody handed out may
// run past the count: flate's history window, decoded but not yet returned.
const window = 64 << 10

func gzipped(t testing.TB, content []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	gz.Write(content)
	gz.Close()
	return buf.Bytes()
}

// readBounded reads body through a boundedBody, as OPA would, and returns what
// it handed out and the error it ended with.
func readBounded(body []byte, limit int64) ([]byte, error) {
	b := newBoundedBody(io.NopCloser(bytes.NewReader(body)), limit)
	var out bytes.Buffer
	p := make([]byte, 4096) // OPA's gzip reader reads through a 4 KiB bufio.Reader
	for {
		n, err := b.Read(p)
		out.Write(p[:n])
		if err == io.EOF {
			return out.Bytes(), nil
		}
		if err != nil {
			return out.Bytes(), err
		}
	}
}

// decompressed is the content a gzip reader gets from a prefix of a stream.
func decompressed(prefix []byte) int64 {
	zr, err := gzip.NewReader(bytes.NewReader(prefix))
	if err != nil {
		return 0
	}
	n, _ := io.Copy(io.Discard, zr)
	return n
}

// TestBoundedBody: a gzip stream whose content passes the bound is refused while
// it is read, and what was handed out before decompresses to no more than the
// bound (and flate's window); one within the bound, and a body that is not gzip
// within the bound, pass unchanged; a plain body past the bound is refused.
func TestBoundedBody(t *testing.T) {
	const limit = 1 << 20
	bomb := gzipped(t, make([]byte, 100<<20))
	out, err := readBounded(bomb, limit)
	if !errors.Is(err, ErrBundleTooLarge) {
		t.Fatalf("a 100 MiB gzip stream under a 1 MiB bound: %v", err)
	}
	if n := decompressed(out); n > limit+window {
		t.Errorf("what was handed out decompresses to %d bytes, over the bound %d", n, limit)
	}
	small := gzipped(t, bytes.Repeat([]byte("policy "), 1000))
	if out, err := readBounded(small, limit); err != nil || !bytes.Equal(out, small) {
		t.Errorf("a small gzip stream: %d bytes of %d, %v", len(out), len(small), err)
	}
	plain := []byte("<html>not a bundle</html>")
	if out, err := readBounded(plain, limit); err != nil || !bytes.Equal(out, plain) {
		t.Errorf("a small plain body: %q, %v", out, err)
	}
	if _, err := readBounded(make([]byte, limit+1), limit); !errors.Is(err, ErrBundleTooLarge) {
		t.Errorf("a plain body past the bound: %v", err)
	}
}

// FuzzBoundedBody: whatever a bundle service sends, boundedBody returns, hands
// out no more than the bound, gives a gzip stream within the bound unchanged,
// and never hands out a gzip prefix that decompresses far past the bound.
func FuzzBoundedBody(f *testing.F) {
	f.Add([]byte("not gzip"), uint16(16))
	f.Add(gzipped(f, []byte("hello")), uint16(1024))
	f.Add(gzipped(f, make([]byte, 4096)), uint16(100))
	f.Add([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}, uint16(100))
	f.Fuzz(func(t *testing.T, body []byte, limit uint16) {
		out, err := readBounded(body, int64(limit))
		if len(out) > int(limit) || len(out) > len(body) {
			t.Fatalf("handed out %d bytes of %d, bound %d", len(out), len(body), limit)
		}
		if !bytes.Equal(out, body[:len(out)]) {
			t.Fatal("handed out bytes that are not the body's")
		}
		if n := decompressed(out); n > int64(limit)+window {
			t.Fatalf("the prefix handed out decompresses to %d bytes, bound %d", n, limit)
		}
		if err == nil && len(body) > 0 && body[0] != 0x1f && len(out) != len(body) {
			t.Fatalf("a plain body within the bound was cut: %d of %d", len(out), len(body))
		}
		if zr, zerr := gzip.NewReader(bytes.NewReader(body)); zerr == nil {
			content, cerr := io.ReadAll(io.LimitReader(zr, int64(limit)+1))
			if cerr == nil && len(content) <= int(limit) && int64(len(body)) <= int64(limit) && err != nil {
				t.Fatalf("a valid gzip stream within the bound was refused: %v", err)
			}
		}
	})
}

// TestBoundedBodyEmptyBlocks: deflate blocks that decompress to nothing are
// counted as read, even within one read of the decompressor: a stream of them is
// refused at the bound, not kept.
func TestBoundedBodyEmptyBlocks(t *testing.T) {
	body := []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff} // gzip header
	for range (4 << 20) / 5 {
		body = append(body, 0, 0, 0, 0xff, 0xff) // a stored block of no bytes
	}
	body = append(body, 1, 0, 0, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0) // the last, CRC and size
	if n := decompressed(body); n != 0 {
		t.Fatalf("the stream decompresses to %d bytes, want none", n)
	}
	b := newBoundedBody(io.NopCloser(bytes.NewReader(body)), 1<<20)
	_, err := io.Copy(io.Discard, b)
	if !errors.Is(err, ErrBundleTooLarge) {
		t.Errorf("4 MiB of empty blocks under a 1 MiB bound: %v", err)
	}
	if cap(b.pending) > 2<<20 {
		t.Errorf("%d bytes kept for a 1 MiB bound", cap(b.pending))
	}
}
