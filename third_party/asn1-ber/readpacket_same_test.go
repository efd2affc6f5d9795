package ber

// The patched readPacket must decode exactly what v1.5.8's did: the same packets
// (identifiers, values, data, children), the same count of bytes read, the same
// errors. See PATCHES.md.

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// plainReader hides bytes.Reader's ReadByte, so readByte takes v1.5.8's path.
type plainReader struct{ r io.Reader }

func (p plainReader) Read(b []byte) (int, error) { return p.r.Read(b) }

func samePacket(t *testing.T, path string, got, want *Packet) {
	t.Helper()
	if (got == nil) != (want == nil) {
		t.Fatalf("%s: packet %v, want %v", path, got, want)
	}
	if got == nil {
		return
	}
	if got.Identifier != want.Identifier || got.Description != want.Description {
		t.Fatalf("%s: identifier %+v %q, want %+v %q", path, got.Identifier, got.Description, want.Identifier, want.Description)
	}
	if !sameValue(got.Value, want.Value) {
		t.Fatalf("%s: value %#v, want %#v", path, got.Value, want.Value)
	}
	if !bytes.Equal(got.ByteValue, want.ByteValue) || (got.ByteValue == nil) != (want.ByteValue == nil) {
		t.Fatalf("%s: byte value %x, want %x", path, got.ByteValue, want.ByteValue)
	}
	if !bytes.Equal(got.Data.Bytes(), want.Data.Bytes()) {
		t.Fatalf("%s: data %x, want %x", path, got.Data.Bytes(), want.Data.Bytes())
	}
	if len(got.Children) != len(want.Children) || cap(got.Children) < 2 {
		t.Fatalf("%s: %d children (cap %d), want %d", path, len(got.Children), cap(got.Children), len(want.Children))
	}
	for i := range got.Children {
		samePacket(t, fmt.Sprintf("%s/%d", path, i), got.Children[i], want.Children[i])
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatalf("%s: bytes %x, want %x", path, got.Bytes(), want.Bytes())
	}
}

// sameValue is reflect.DeepEqual, but a NaN real equals a NaN.
func sameValue(got, want interface{}) bool {
	g, gok := got.(float64)
	w, wok := want.(float64)
	if gok && wok && math.IsNaN(g) && math.IsNaN(w) {
		return true
	}
	return reflect.DeepEqual(got, want)
}

// checkSame reads data to its end with both readers, packet by packet.
func checkSame(t *testing.T, data []byte) {
	got := bufio.NewReader(bytes.NewReader(data))
	want := plainReader{bytes.NewReader(data)}
	for i := 0; ; i++ {
		gp, gn, gerr := readPacket(got, 0)
		wp, wn, werr := readPacketV158(want, 0)
		if fmt.Sprint(gerr) != fmt.Sprint(werr) || gn != wn {
			t.Fatalf("packet %d: read %d, %v; want %d, %v", i, gn, gerr, wn, werr)
		}
		if gerr != nil {
			return
		}
		samePacket(t, fmt.Sprint(i), gp, wp)
	}
}

func ldapSeeds(t testing.TB) [][]byte {
	seeds := [][]byte{searchEntry(1), searchEntry(2), bytes.Repeat(searchEntry(3), 3)}
	files, _ := filepath.Glob("tests/*.ber")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	return append(seeds,
		[]byte{0x30, 0x80, 0x04, 0x01, 'a', 0x00, 0x00},                      // indefinite length
		[]byte{0x04, 0x84, 0x7f, 0xff, 0xff, 0xff, 'a'},                      // a length the input does not back
		[]byte{0x04, 0x82, 0x01, 0x00},                                       // 256 bytes promised, none given
		append([]byte{0x04, 0x83, 0x01, 0x00, 0x00}, make([]byte, 1<<16)...), // just past the preallocation bound
		[]byte{0x1f, 0x81, 0x00, 0x00},                                       // high tag
		[]byte{0x0c, 0x02, 0xff, 0xfe},                                       // invalid UTF-8
		[]byte{0x02, 0x00}, []byte{0x01, 0x01, 0xff}, []byte{0x06, 0x03, 0x2a, 0x86, 0x48},
	)
}

func TestReadPacketSameAsV158(t *testing.T) {
	for i, seed := range ldapSeeds(t) {
		t.Run(fmt.Sprint(i), func(t *testing.T) { checkSame(t, seed) })
	}
}

func FuzzReadPacketSameAsV158(f *testing.F) {
	for _, seed := range ldapSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(checkSame)
}

// searchEntry is an LDAP SearchResultEntry as a directory sends one for a group
// member: a DN and nine attributes, binary GUID and SID among them.
func searchEntry(i int) []byte {
	msg := Encode(ClassUniversal, TypeConstructed, TagSequence, nil, "")
	msg.AppendChild(NewInteger(ClassUniversal, TypePrimitive, TagInteger, int64(7), ""))
	res := Encode(ClassApplication, TypeConstructed, 4, nil, "")
	res.AppendChild(NewString(ClassUniversal, TypePrimitive, TagOctetString, fmt.Sprintf("CN=user%05d,OU=large,DC=corp,DC=example,DC=com", i), ""))
	attrs := Encode(ClassUniversal, TypeConstructed, TagSequence, nil, "")
	add := func(name string, vals ...string) {
		a := Encode(ClassUniversal, TypeConstructed, TagSequence, nil, "")
		a.AppendChild(NewString(ClassUniversal, TypePrimitive, TagOctetString, name, ""))
		set := Encode(ClassUniversal, TypeConstructed, TagSet, nil, "")
		for _, v := range vals {
			set.AppendChild(NewString(ClassUniversal, TypePrimitive, TagOctetString, v, ""))
		}
		a.AppendChild(set)
		attrs.AppendChild(a)
	}
	add("objectGUID", string(bytes.Repeat([]byte{byte(i)}, 16)))
	add("objectSid", string(bytes.Repeat([]byte{byte(i)}, 28)))
	add("objectClass", "top", "person", "organizationalPerson", "user")
	add("userAccountControl", "514")
	add("msDS-User-Account-Control-Computed", "0")
	add("accountExpires", "9223372036854775807")
	add("pwdLastSet", "0")
	add("msDS-UserPasswordExpiryTimeComputed", "9223372036854775807")
	add("primaryGroupID", "513")
	res.AppendChild(attrs)
	msg.AppendChild(res)
	return msg.Bytes()
}

// BenchmarkReadSearchEntries reads 2,000 entries through bufio, as go-ldap's
// reader does, with the patched reader and with v1.5.8's; compare their ns/entry,
// B/op and allocs/op in one run.
func BenchmarkReadSearchEntries(b *testing.B) {
	const n = 2000
	var stream bytes.Buffer
	for i := 0; i < n; i++ {
		stream.Write(searchEntry(i))
	}
	for _, r := range []struct {
		name string
		read func(io.Reader, int) (*Packet, int, error)
		wrap func(io.Reader) io.Reader
	}{
		{"patched", readPacket, func(r io.Reader) io.Reader { return r }},
		// plainReader: v1.5.8's readByte too, which ignored ReadByte.
		{"v1.5.8", readPacketV158, func(r io.Reader) io.Reader { return plainReader{r} }},
	} {
		b.Run(r.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				br := r.wrap(bufio.NewReader(bytes.NewReader(stream.Bytes())))
				for i := 0; i < n; i++ {
					if _, _, err := r.read(br, 0); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/entry")
		})
	}
}
