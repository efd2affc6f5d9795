package render

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unsafe"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/encodedlisting"
	"github.com/dirgate/dirgate/test/harness/encodedtest"
)

// joinedListing returns a listing of n objects whose encodings lie in its JSON, as a
// cache's decoded entry has them (cache/codec.go).
func joinedListing(t *testing.T, n int) dirgate.Listing {
	t.Helper()
	objs := make([]dirgate.Object, n)
	for i := range objs {
		objs[i] = dirgate.Object{GUID: fmt.Sprint(i), DN: fmt.Sprintf("CN=u%d,DC=x", i)}
	}
	el, err := encodedtest.EncodeListing(objs)
	if err != nil {
		t.Fatal(err)
	}
	joined := "[" + strings.Join(el.Encoded.Fragments(), ",") + "]"
	frags := make([]string, n)
	off := 1
	for i, f := range el.Encoded.Fragments() {
		frags[i] = joined[off : off+len(f)]
		off += len(f) + 1
	}
	e, err := encodedlisting.NewJoined(n, frags, joined, encodedlisting.GUIDFunc(func(i int) string { return objs[i].GUID }))
	if err != nil {
		t.Fatal(err)
	}
	return dirgate.Listing{Objects: objs, Encoded: e}
}

// TestWholeListingBodyIsShared: a body of every object of a listing that has its
// JSON is that JSON, not a copy, and cannot be written through: its capacity ends at
// its length, so appending to it copies. A partial selection, or a listing without
// the JSON, is joined afresh. Every body is exactly json.Marshal's.
func TestWholeListingBodyIsShared(t *testing.T) {
	l := joinedListing(t, 300)
	e := l.Encoded
	want, _ := json.Marshal(l.Objects)
	for _, c := range []*BodyCache{nil, NewBodyCache(64 << 20), NewBodyCache(1)} {
		b := c.body(e, dirgate.AllSelected(300, 0)).JSON()
		if string(b) != string(want) {
			t.Fatal("whole body differs from json.Marshal")
		}
		if unsafe.SliceData(b) != unsafe.StringData(e.JSON()) || cap(b) != len(b) {
			t.Fatalf("whole body is a copy (or has spare capacity %d)", cap(b)-len(b))
		}
		grown := append(b, 'x')
		if unsafe.SliceData(grown) == unsafe.SliceData(b) || e.JSON() != string(want) {
			t.Fatal("appending to the body wrote into the listing")
		}
	}
	limited := NewBodyCache(64<<20).body(e, dirgate.AllSelected(300, 299)).JSON()
	wantLimited, _ := json.Marshal(l.Objects[:299])
	if string(limited) != string(wantLimited) || unsafe.SliceData(limited) == unsafe.StringData(e.JSON()) {
		t.Fatal("a partial selection is not joined afresh")
	}
	plain, err := encodedtest.EncodeListing(l.Objects)
	if err != nil {
		t.Fatal(err)
	}
	if b := renderSelection(plain.Encoded, dirgate.AllSelected(300, 0)); string(b) != string(want) {
		t.Fatal("whole body of a listing without JSON differs from json.Marshal")
	}
	empty := joinedListing(t, 0)
	if b := renderSelection(empty.Encoded, dirgate.AllSelected(0, 0)); string(b) != "[]" {
		t.Fatalf("empty listing: %q", b)
	}
}
