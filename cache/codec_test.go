package cache

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/render"
	"github.com/dirgate/dirgate/test/harness/encodedtest"
	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/upstream/memory"
)

// demoObjects returns every object of the demo directory with properties of every
// syntax, and the same without properties (Properties nil).
func demoObjects(t testing.TB) []dirgate.Object {
	t.Helper()
	d, err := memory.Demo()
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	var out []dirgate.Object
	seen := map[string]bool{}
	groups := []string{fixture.DomainUsersDN, fixture.MixedDN, fixture.AccountStatesDN, fixture.ITDepartmentDN}
	props := [][]string{nil, {"objectsid", "pwdlastset", "whenchanged", "mail", "memberof", "description", "objectguid", "thumbnailphoto"}}
	for _, g := range groups {
		grp, err := d.Lookup(ctx, dirgate.MustParseIdentifier(g), nil)
		if err != nil {
			t.Fatalf("lookup %s: %v", g, err)
		}
		for _, p := range props {
			ms, err := d.Members(ctx, grp, p)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range ms {
				k := m.GUID + "|" + string(rune(len(p)))
				if !seen[k] {
					seen[k] = true
					out = append(out, m)
				}
			}
		}
	}
	if len(out) < 10 {
		t.Fatalf("only %d demo objects", len(out))
	}
	return out
}

// TestCodecRoundTrip: an entry decodes to exactly what was encoded, field for field
// (nil and empty kept apart), and its fragments are the objects' JSON.
func TestCodecRoundTrip(t *testing.T) {
	objs := demoObjects(t)
	// Shapes the directory does not produce but an Object can hold.
	objs = append(objs,
		dirgate.Object{GUID: "g", Properties: map[string][]string{}},
		dirgate.Object{GUID: "h", Properties: map[string][]string{"empty": {}, "nil": nil}, ObjectTypeCode: -1, PrimaryGroupID: 513},
		dirgate.Object{GUID: "i", AccountStatus: &dirgate.AccountStatus{IsLocked: true}, PasswordStatus: &dirgate.PasswordStatus{ExpirationStatus: 1,
			WhenChanged: dirgate.NewTimestamp(time.Date(1601, 1, 1, 0, 0, 0, 100, time.UTC))}},
	)
	el, err := encodedtest.EncodeListing(objs)
	if err != nil {
		t.Fatal(err)
	}
	in := &entry{check: "listing|x", filled: time.Unix(1700000000, 123), fresh: time.Unix(1700000300, 0),
		deps: []dep{{"00000000-0000-0000-0000-000000000001", "tok"}}}
	for _, frags := range [][]string{el.Encoded.Fragments(), nil} {
		got, err := decodeEntry(encodeFrags(in, objs, frags))
		if err != nil {
			t.Fatal(err)
		}
		if got.check != in.check || !got.filled.Equal(in.filled) || !got.fresh.Equal(in.fresh) || !reflect.DeepEqual(got.deps, in.deps) {
			t.Errorf("header = %+v, want %+v", got, in)
		}
		if !reflect.DeepEqual(got.objs, objs) {
			for i := range objs {
				if !reflect.DeepEqual(got.objs[i], objs[i]) {
					g, w := got.objs[i], objs[i]
					t.Fatalf("object %d = %+v %+v %+v\nwant %+v %+v %+v", i, g, g.AccountStatus, g.PasswordStatus, w, w.AccountStatus, w.PasswordStatus)
				}
			}
		}
		if !reflect.DeepEqual(got.list.Fragments(), frags) {
			t.Errorf("fragments differ (with fragments: %v)", frags != nil)
		}
		want, _ := json.Marshal(objs)
		body, err := render.AppendJSON(nil, dirgate.Listing{Objects: got.objs, Encoded: got.list}, got.objs)
		if err != nil || string(body) != string(want) {
			t.Errorf("joined body differs from json.Marshal (err %v)", err)
		}
		if frags != nil && got.list.JSON() != string(want) {
			t.Errorf("the listing's JSON differs from json.Marshal")
		}
		if frags == nil && got.list.JSON() != "" {
			t.Errorf("a listing without encodings has JSON %.40q", got.list.JSON())
		}
	}
}

// TestEncodeEntryObjectJSON: a fill's value (the encodings made by objectJSON into
// the value) holds what the same objects with the encodings EncodeListing gives
// hold, and an encoder that appends other bytes when asked again is
// an error, not a value that decodes wrong.
func TestEncodeEntryObjectJSON(t *testing.T) {
	objs := demoObjects(t)
	el, err := encodedtest.EncodeListing(objs)
	if err != nil {
		t.Fatal(err)
	}
	in := &entry{check: "listing|x", filled: time.Unix(1700000000, 123), deps: []dep{{"g", "tok"}}}
	got, err := encodeEntry(in, objs, objectJSON(objs))
	if err != nil {
		t.Fatal(err)
	}
	// Properties are stored in map order, so the values are compared decoded.
	g, err := decodeEntry(got)
	if err != nil {
		t.Fatal(err)
	}
	w, err := decodeEntry(encodeFrags(in, objs, el.Encoded.Fragments()))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != entrySize(in, objs, lensOf(el.Encoded.Fragments())) || g.list.JSON() != w.list.JSON() ||
		!reflect.DeepEqual(g.list.Fragments(), w.list.Fragments()) || !reflect.DeepEqual(g.objs, objs) {
		t.Errorf("objectJSON's value differs from EncodeListing's")
	}
	calls := 0
	unsteady := func(dst []byte, i int) []byte {
		calls++
		return append(dst, strings.Repeat("1", calls)...)
	}
	if v, err := encodeEntry(in, objs[:1], unsteady); err == nil {
		t.Errorf("an encoder that changed its bytes gave a value: %.60q", v)
	}
}

// TestEncodeEntryAllocations: a fill's value is allocated once, beside the lengths
// of its encodings and the scratch buffer they are measured in, whatever the number
// of objects: never a buffer per encoding (those were a third of what a
// first listing allocated).
func TestEncodeEntryAllocations(t *testing.T) {
	objs := demoObjects(t)
	for len(objs) < 1600 {
		objs = append(objs, objs...)
	}
	e := &entry{check: "c", deps: []dep{{"g", "tok"}}}
	allocs := func(objs []dirgate.Object) float64 {
		frags := objectJSON(objs)
		return testing.AllocsPerRun(5, func() {
			if _, err := encodeEntry(e, objs, frags); err != nil {
				t.Fatal(err)
			}
		})
	}
	few, many := allocs(objs[:len(objs)/8]), allocs(objs)
	if many > few || many > 16 {
		t.Errorf("encoding %d objects made %.0f allocations, %d objects %.0f", len(objs), many, len(objs)/8, few)
	}
}

// TestDecodeEntryInto: a fill's objects take the decoded ones in their own array,
// equal to what decodeEntry gives; an array too small is left alone.
func TestDecodeEntryInto(t *testing.T) {
	objs := demoObjects(t)
	v, err := encodeEntry(&entry{check: "c"}, objs, objectJSON(objs))
	if err != nil {
		t.Fatal(err)
	}
	want, err := decodeEntry(v)
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]dirgate.Object, len(objs), len(objs)+3)
	dst[0] = dirgate.Object{GUID: "before", Properties: map[string][]string{"stale": {"x"}}}
	got, err := decodeEntryInto(v, dst)
	if err != nil {
		t.Fatal(err)
	}
	if &got.objs[0] != &dst[0] || !reflect.DeepEqual(got.objs, want.objs) {
		t.Errorf("decoded into dst: same array %v, equal %v", &got.objs[0] == &dst[0], reflect.DeepEqual(got.objs, want.objs))
	}
	small := make([]dirgate.Object, 1)
	got, err = decodeEntryInto(v, small)
	if err != nil || &got.objs[0] == &small[0] || small[0].GUID != "" || !reflect.DeepEqual(got.objs, want.objs) {
		t.Errorf("an array too small was used or changed (err %v)", err)
	}
}

// TestDecodedEntrySharesTheValue: the decoded entry's encodings and the whole
// listing's JSON are all slices of the one stored value, so a response of every
// object costs no copy.
func TestDecodedEntrySharesTheValue(t *testing.T) {
	objs := demoObjects(t)
	el, err := encodedtest.EncodeListing(objs)
	if err != nil {
		t.Fatal(err)
	}
	v := encodeFrags(&entry{check: "c"}, objs, el.Encoded.Fragments())
	e, err := decodeEntry(v)
	if err != nil {
		t.Fatal(err)
	}
	within := func(s string) bool {
		p, base := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(unsafe.StringData(v)))
		return p >= base && p+uintptr(len(s)) <= base+uintptr(len(v))
	}
	if j := e.list.JSON(); j == "" || !within(j) {
		t.Fatalf("the listing's JSON (%d bytes) is not a slice of the stored value", len(j))
	}
	for i, f := range e.list.Fragments() {
		if !within(f) {
			t.Fatalf("encoding %d is not a slice of the stored value", i)
		}
	}
	if got, want := e.list.FragmentBytes(), len(strings.Join(el.Encoded.Fragments(), "")); got != want {
		t.Errorf("FragmentBytes = %d, want %d", got, want)
	}
}

// TestDecodeEarlierLayout: a value written by the release before the joined layout
// (flag 1, each encoding beside its object; testdata/entry-flag1.bin, written by that
// release's encodeEntry) still decodes, to the same objects and encodings, with no
// whole-listing JSON (its responses are joined as before).
func TestDecodeEarlierLayout(t *testing.T) {
	v, err := os.ReadFile("testdata/entry-flag1.bin")
	if err != nil {
		t.Fatal(err)
	}
	if v[len(magic)] != flagFragments {
		t.Fatalf("testdata is not of the earlier layout: flags %d", v[len(magic)])
	}
	e, err := decodeEntry(string(v))
	if err != nil {
		t.Fatal(err)
	}
	if e.check != "listing|legacy" || len(e.objs) != 6 || e.list.JSON() != "" {
		t.Fatalf("decoded %q, %d objects, JSON %.20q", e.check, len(e.objs), e.list.JSON())
	}
	want, _ := json.Marshal(e.objs)
	if got := "[" + strings.Join(e.list.Fragments(), ",") + "]"; got != string(want) {
		t.Errorf("encodings differ from the objects' JSON:\n%s\n%s", got, want)
	}
	// Re-encoded, it takes the joined layout, with the same content.
	again, err := decodeEntry(encodeFrags(e, e.objs, e.list.Fragments()))
	if err != nil || again.list.JSON() != string(want) || !reflect.DeepEqual(again.objs, e.objs) {
		t.Fatalf("re-encoded: %v", err)
	}
}

// TestDecodeRejectsJoined: a joined array whose separators or lengths do not match
// the encodings' lengths is refused, whole.
func TestDecodeRejectsJoined(t *testing.T) {
	objs := []dirgate.Object{{GUID: "x"}, {GUID: "y"}}
	good := encodeFrags(&entry{check: "c"}, objs, []string{`{"a":1}`, `{"b":2}`})
	if e, err := decodeEntry(good); err != nil || e.list.JSON() != `[{"a":1},{"b":2}]` {
		t.Fatalf("good value: %v", err)
	}
	arr := strings.Index(good, "[{")
	tests := []struct{ name, value string }{
		{"no opening bracket", good[:arr] + "(" + good[arr+1:]},
		{"no closing bracket", good[:len(good)-1] + ")"},
		{"no separator", strings.Replace(good, "},{", "} {", 1)},
		// The lengths stored beside the objects say where each encoding ends.
		{"length past the array", strings.Replace(good, "\x07", "\x20", 1)},
		{"shorter encoding", strings.Replace(good, "\x07", "\x06", 1)},
		{"array cut short", good[:arr-1] + "\x10" + good[arr:len(good)-1]},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.value == good {
				t.Fatal("the test does not change the value")
			}
			if e, err := decodeEntry(tc.value); err == nil {
				t.Errorf("decoded %q", e.list.JSON())
			}
		})
	}
}

// TestDecodeRejects: what a foreign or damaged value looks like is refused, never
// half-decoded.
func TestDecodeRejects(t *testing.T) {
	good := encodeFrags(&entry{check: "c", deps: []dep{{"a", "b"}}}, []dirgate.Object{{GUID: "x", Properties: map[string][]string{"p": {"v"}}}}, []string{"{}"})
	if _, err := decodeEntry(good); err != nil {
		t.Fatalf("good value: %v", err)
	}
	tests := []struct {
		name, value string
	}{
		// Not written by this codec (or by an older format).
		{"wrong magic", "dgc0" + good[4:]},
		{"empty", ""},
		// A value cut short anywhere must fail, not read past its end.
		{"truncated", good[:len(good)-1]},
		{"header only", good[:5]},
		// Unknown flags mean a format this code does not know.
		{"unknown flag", good[:4] + "\x04" + good[5:]},
		{"both layouts", good[:4] + "\x03" + good[5:]},
		// Bytes after the last object: not a value this codec wrote.
		{"trailing bytes", good + "x"},
		// A count larger than the value could hold must not allocate it.
		{"huge object count", magic + "\x00\x00\x00\x00\x00\xff\xff\xff\xff\x0f"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if e, err := decodeEntry(tc.value); err == nil {
				t.Errorf("decoded %+v", e)
			}
		})
	}
}

// FuzzDecodeEntry: Redis is shared, so stored values are untrusted input. Decoding
// must never panic or over-allocate, and whatever decodes must re-encode to a value
// that decodes to the same entry.
func FuzzDecodeEntry(f *testing.F) {
	objs := []dirgate.Object{{GUID: "g", DN: "CN=x", Properties: map[string][]string{"a": {"1", "2"}, "b": nil},
		AccountStatus:  &dirgate.AccountStatus{IsDisabled: true, ExpirationDate: dirgate.NewTimestamp(time.Unix(5, 6))},
		PasswordStatus: &dirgate.PasswordStatus{ExpirationStatus: 1}, SID: "S-1-5-11", PrimaryGroupID: 513}}
	f.Add(encodeFrags(&entry{check: "c", deps: []dep{{"a", "b"}}}, objs, []string{`{"guid":"g"}`}))
	f.Add(encodeFrags(&entry{check: "lookup"}, objs, nil))
	f.Add(magic + "\x00")
	f.Add(encodeFrags(&entry{check: "c"}, append(objs, objs[0]), []string{`{"guid":"g"}`, `[1,2]`}))
	f.Add(encodeFrags(&entry{check: "c"}, nil, []string{}))
	if legacy, err := os.ReadFile("testdata/entry-flag1.bin"); err == nil {
		f.Add(string(legacy))
	}
	f.Fuzz(func(t *testing.T, v string) {
		e, err := decodeEntry(v)
		if err != nil {
			return
		}
		if j := e.list.JSON(); j != "" && j != "["+strings.Join(e.list.Fragments(), ",")+"]" {
			t.Fatalf("the listing's JSON %.60q is not its encodings joined", j)
		}
		again, err := decodeEntry(encodeFrags(e, e.objs, e.list.Fragments()))
		if err != nil {
			t.Fatalf("re-encoded entry does not decode: %v", err)
		}
		if again.check != e.check || !reflect.DeepEqual(again.deps, e.deps) || !reflect.DeepEqual(again.objs, e.objs) {
			t.Fatal("re-encoded entry differs")
		}
	})
}

// TestEntrySize: encodeEntry's buffer is sized exactly (entrySize), for objects of
// every shape: lengths and numbers of one to several varint bytes, negative numbers,
// nil and empty properties, times before 1970.
func TestEntrySize(t *testing.T) {
	long := string(make([]byte, 300))
	objs := append(demoObjects(t),
		dirgate.Object{GUID: long, DN: long + long, ObjectTypeCode: -1 << 40, DirectoryType: 1 << 20, PrimaryGroupID: -513,
			Properties: map[string][]string{long: make([]string, 200), "nil": nil, "empty": {}}},
		dirgate.Object{Properties: map[string][]string{}},
		dirgate.Object{AccountStatus: &dirgate.AccountStatus{ExpirationDate: dirgate.NewTimestamp(time.Date(1601, 1, 1, 0, 0, 0, 999999999, time.UTC))},
			PasswordStatus: &dirgate.PasswordStatus{ExpirationStatus: -3}},
	)
	many := make(map[string][]string, 200)
	for i := range 200 {
		many[fmt.Sprint(i)] = []string{long}
	}
	objs = append(objs, dirgate.Object{Properties: many})
	el, err := encodedtest.EncodeListing(objs)
	if err != nil {
		t.Fatal(err)
	}
	deps := make([]dep, 130)
	for i := range deps {
		deps[i] = dep{fmt.Sprint(i), long}
	}
	for _, e := range []*entry{{}, {check: long, filled: time.Unix(-1e10, 5), fresh: time.Unix(1e10, 0), deps: deps}} {
		for _, frags := range [][]string{el.Encoded.Fragments(), nil} {
			if got, want := len(encodeFrags(e, objs, frags)), entrySize(e, objs, lensOf(frags)); got != want {
				t.Errorf("encoded %d bytes, sized %d (fragments %v, %d deps)", got, want, frags != nil, len(e.deps))
			}
			for i := range objs {
				if got, want := len(appendObject(nil, &objs[i])), objectSize(&objs[i]); got != want {
					t.Fatalf("object %d: appended %d bytes, sized %d", i, got, want)
				}
			}
		}
	}
}

// lensOf is the lengths of frags, nil for nil.
func lensOf(frags []string) []int {
	if frags == nil {
		return nil
	}
	lens := make([]int, len(frags))
	for i, f := range frags {
		lens[i] = len(f)
	}
	return lens
}
