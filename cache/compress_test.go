package cache

import (
	"fmt"
	"strings"
	"testing"
	"unsafe"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/test/harness/encodedtest"
)

// TestPackLargeEntries: an entry above compressAbove is stored compressed, several
// times smaller, and unpacks to exactly what was encoded; a small one is stored as
// it is; a damaged compressed value is refused as corrupt, never decoded.
func TestPackLargeEntries(t *testing.T) {
	d := newBenchDir(5000)
	objs, _ := d.Members(t.Context(), d.group, benchProps)
	el, err := encodedtest.EncodeListing(objs)
	if err != nil {
		t.Fatal(err)
	}
	blob := encodeFrags(&entry{check: "x"}, objs, el.Encoded.Fragments())
	if len(blob) <= compressAbove {
		t.Fatalf("a listing of 5,000 is %d bytes, not above %d", len(blob), compressAbove)
	}
	packed := pack(blob)
	if !strings.HasPrefix(packed, magicCompressed) || len(packed) > len(blob)/4 {
		t.Fatalf("packed %d bytes into %d", len(blob), len(packed))
	}
	t.Logf("%d objects: %d bytes encoded, %d stored", len(objs), len(blob), len(packed))
	got, err := unpack(packed)
	if err != nil || got != blob {
		t.Fatalf("unpack: %v (equal: %v)", err, got == blob)
	}
	// The decompressed bytes are a fresh string that the decoded entry slices: the
	// whole listing's JSON included, so a response of every member copies nothing.
	e, err := decodeEntry(got)
	if err != nil {
		t.Fatal(err)
	}
	j := e.list.JSON()
	if start := uintptr(unsafe.Pointer(unsafe.StringData(j))) - uintptr(unsafe.Pointer(unsafe.StringData(got))); j == "" || start+uintptr(len(j)) != uintptr(len(got)) {
		t.Fatalf("the listing's JSON (%d bytes) is not the end of the unpacked value", len(j))
	}
	small := blob[:1000]
	if pack(small) != small {
		t.Fatal("a small entry was compressed")
	}
	for name, v := range map[string]string{
		"truncated":    packed[:len(packed)/2],
		"length lies":  magicCompressed + "\x05" + packed[len(magicCompressed)+3:],
		"huge length":  magicCompressed + "\xff\xff\xff\xff\xff\xff\xff\xff\x7f",
		"magic only":   magicCompressed,
		"garbage body": magicCompressed + "\x10garbage",
	} {
		if _, err := unpack(v); err == nil {
			t.Errorf("%s: unpacked", name)
		}
	}
}

// FuzzUnpack: whatever a stored value holds, unpack returns an error or a string,
// never panics, and never more than maxUnpacked.
func FuzzUnpack(f *testing.F) {
	f.Add(pack(strings.Repeat("dgc1 listing ", 100_000)))
	f.Add(magicCompressed + "\x01x")
	// A compressed entry of the joined layout, which a mutation may damage anywhere.
	objs := make([]dirgate.Object, 2000)
	frags := make([]string, len(objs))
	for i := range objs {
		objs[i] = dirgate.Object{GUID: fmt.Sprint(i), DN: "CN=member,OU=people,DC=example,DC=com"}
		frags[i] = `{"guid":"` + objs[i].GUID + `","dn":"CN=member,OU=people,DC=example,DC=com"}`
	}
	f.Add(pack(encodeFrags(&entry{check: "c"}, objs, frags)))
	f.Fuzz(func(t *testing.T, v string) {
		out, err := unpack(v)
		if err == nil && len(out) > maxUnpacked {
			t.Fatalf("unpacked %d bytes", len(out))
		}
		if err != nil {
			return
		}
		// What unpacks is decoded next: it must not panic, and a listing that
		// decodes has the JSON its encodings make.
		if e, err := decodeEntry(out); err == nil {
			if j := e.list.JSON(); j != "" && j != "["+strings.Join(e.list.Fragments(), ",")+"]" {
				t.Fatal("the listing's JSON is not its encodings joined")
			}
		}
	})
}

// BenchmarkPack is what a fill of a 5,000-object listing pays to store it
// compressed, and a read from Redis to unpack it.
func BenchmarkPack(b *testing.B) {
	d := newBenchDir(5000)
	objs, _ := d.Members(b.Context(), d.group, benchProps)
	el, _ := encodedtest.EncodeListing(objs)
	blob := encodeFrags(&entry{check: "x"}, objs, el.Encoded.Fragments())
	packed := pack(blob)
	b.Run("pack", func(b *testing.B) {
		b.SetBytes(int64(len(blob)))
		for b.Loop() {
			pack(blob)
		}
	})
	b.Run("unpack", func(b *testing.B) {
		b.SetBytes(int64(len(blob)))
		for b.Loop() {
			if _, err := unpack(packed); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(blob)))
		for b.Loop() {
			if _, err := decodeEntry(blob); err != nil {
				b.Fatal(err)
			}
		}
	})
}
