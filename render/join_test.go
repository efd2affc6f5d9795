package render_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/render"
	"github.com/dirgate/dirgate/test/harness/encodedtest"
)

func encodedTestObjects() []dirgate.Object {
	return []dirgate.Object{
		{GUID: "a", DN: "CN=A", ObjectType: dirgate.TypeUser, Properties: map[string][]string{"mail": {"a@x"}},
			AccountStatus: &dirgate.AccountStatus{ExpirationDate: dirgate.NewTimestamp(time.Unix(1, 0))}, PasswordStatus: &dirgate.PasswordStatus{}},
		{GUID: "b", DN: "CN=B<&>", ObjectType: dirgate.TypeGroup},
		{GUID: "c", DN: "CN=C", Properties: map[string][]string{}},
		{GUID: "d", DN: "CN=D", Properties: map[string][]string{"x": nil}},
	}
}

// TestAppendJSON: a response joined from recorded encodings is byte for byte what
// json.Marshal gives, whatever the filter did to the listing, and an object the filter
// changed is encoded afresh rather than taken from the listing.
func TestAppendJSON(t *testing.T) {
	objs := encodedTestObjects()
	e, err := encodedtest.EncodeListing(objs)
	if err != nil {
		t.Fatal(err)
	}
	changed := objs[0]
	changed.Properties = map[string][]string{} // a filter that hides properties
	dimmed := objs[0]
	dimmed.AccountStatus = &dirgate.AccountStatus{IsLocked: true}
	tests := []struct {
		name string
		objs []dirgate.Object
	}{
		// The unfiltered listing, and the filters that keep order (subsequences).
		{"whole listing", objs},
		{"subsequence", []dirgate.Object{objs[1], objs[3]}},
		{"empty", []dirgate.Object{}},
		// A filter that reorders falls back to the index and must still match.
		{"reordered", []dirgate.Object{objs[3], objs[0], objs[2]}},
		// Copies with different content must not be served from the old encoding.
		{"properties changed", []dirgate.Object{changed, objs[1]}},
		{"status changed", []dirgate.Object{dimmed}},
		// Objects the listing does not hold are encoded as they are.
		{"foreign object", []dirgate.Object{{GUID: "z", DN: "CN=Z"}, objs[2]}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want, _ := json.Marshal(tc.objs)
			for name, enc := range map[string]dirgate.Listing{"encoded": e, "without encodings": {Objects: objs}} {
				got, err := render.AppendJSON(nil, enc, tc.objs)
				if err != nil || string(got) != string(want) {
					t.Errorf("%s: got %s, %v\nwant %s", name, got, err, want)
				}
			}
		})
	}
	// A nil slice is still an array: the API never sends null.
	if got, _ := render.AppendJSON(nil, e, nil); string(got) != "[]" {
		t.Errorf("nil slice: %s", got)
	}
}

// BenchmarkAppendJSON joins 1,000 pre-encoded objects, half of them kept by a filter.
func BenchmarkAppendJSON(b *testing.B) {
	objs := make([]dirgate.Object, 1000)
	for i := range objs {
		objs[i] = dirgate.Object{GUID: string(rune('a'+i%26)) + time.Duration(i).String(), DN: "CN=User,OU=Staff,DC=corp,DC=example,DC=com",
			Properties: map[string][]string{"mail": {"user@corp.example.com"}}, AccountStatus: &dirgate.AccountStatus{}, PasswordStatus: &dirgate.PasswordStatus{}}
	}
	e, err := encodedtest.EncodeListing(objs)
	if err != nil {
		b.Fatal(err)
	}
	half := make([]dirgate.Object, 0, 500)
	for i := 0; i < len(objs); i += 2 {
		half = append(half, objs[i])
	}
	for b.Loop() {
		if _, err := render.AppendJSON(nil, e, half); err != nil {
			b.Fatal(err)
		}
	}
}
