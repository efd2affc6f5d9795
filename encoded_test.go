package dirgate

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

func encodedTestObjects() []Object {
	return []Object{
		{GUID: "a", DN: "CN=A", ObjectType: TypeUser, Properties: map[string][]string{"mail": {"a@x"}},
			AccountStatus: &AccountStatus{ExpirationDate: NewTimestamp(time.Unix(1, 0))}, PasswordStatus: &PasswordStatus{}},
		{GUID: "b", DN: "CN=B<&>", ObjectType: TypeGroup},
		{GUID: "c", DN: "CN=C", Properties: map[string][]string{}},
		{GUID: "d", DN: "CN=D", Properties: map[string][]string{"x": nil}},
	}
}

// TestAppendJSON: a response joined from recorded encodings is byte for byte what
// json.Marshal gives, whatever the filter did to the listing, and an object the filter
// changed is encoded afresh rather than taken from the listing.
func TestAppendJSON(t *testing.T) {
	objs := encodedTestObjects()
	e, err := EncodeListing(objs)
	if err != nil {
		t.Fatal(err)
	}
	changed := objs[0]
	changed.Properties = map[string][]string{} // a filter that hides properties
	dimmed := objs[0]
	dimmed.AccountStatus = &AccountStatus{IsLocked: true}
	tests := []struct {
		name string
		objs []Object
	}{
		// The unfiltered listing, and the filters that keep order (subsequences).
		{"whole listing", objs},
		{"subsequence", []Object{objs[1], objs[3]}},
		{"empty", []Object{}},
		// A filter that reorders falls back to the index and must still match.
		{"reordered", []Object{objs[3], objs[0], objs[2]}},
		// Copies with different content must not be served from the old encoding.
		{"properties changed", []Object{changed, objs[1]}},
		{"status changed", []Object{dimmed}},
		// Objects the listing does not hold are encoded as they are.
		{"foreign object", []Object{{GUID: "z", DN: "CN=Z"}, objs[2]}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want, _ := json.Marshal(tc.objs)
			for name, enc := range map[string]*EncodedListing{"encoded": e, "nil": nil} {
				got, err := enc.AppendJSON(nil, tc.objs)
				if err != nil || string(got) != string(want) {
					t.Errorf("%s: got %s, %v\nwant %s", name, got, err, want)
				}
			}
		})
	}
	// A nil slice is still an array: the API never sends null.
	if got, _ := e.AppendJSON(nil, nil); string(got) != "[]" {
		t.Errorf("nil slice: %s", got)
	}
}

// TestListingReport: the most degraded status wins, and a nil report (no cache in
// the request) is a no-op that still encodes.
func TestListingReport(t *testing.T) {
	tests := []struct {
		name string
		set  []CacheStatus
		want CacheStatus
	}{
		{"nothing reported", nil, ""},
		{"one status", []CacheStatus{CacheMiss}, CacheMiss},
		// A stale lookup then a fresh listing: the response is stale.
		{"stale lookup, hit listing", []CacheStatus{CacheStale, CacheHit}, CacheStale},
		{"bypassed lookup, hit", []CacheStatus{CacheBypass, CacheHit}, CacheBypass},
		{"hit then miss", []CacheStatus{CacheHit, CacheMiss}, CacheMiss},
	}
	for _, tc := range tests {
		ctx, r := WithListingReport(context.Background())
		for _, s := range tc.set {
			ListingReportFrom(ctx).SetCacheStatus(s)
		}
		if got := r.CacheStatus(); got != tc.want {
			t.Errorf("%s: status %q, want %q", tc.name, got, tc.want)
		}
	}
	var none *ListingReport = ListingReportFrom(context.Background())
	none.SetCacheStatus(CacheHit)
	none.SetEncoded(nil)
	if none.CacheStatus() != "" {
		t.Error("nil report has a status")
	}
	if got, err := none.AppendJSON(nil, encodedTestObjects()[:1]); err != nil || len(got) == 0 {
		t.Errorf("nil report AppendJSON: %s, %v", got, err)
	}
}

// BenchmarkAppendJSON joins 1,000 pre-encoded objects, half of them kept by a filter.
func BenchmarkAppendJSON(b *testing.B) {
	objs := make([]Object, 1000)
	for i := range objs {
		objs[i] = Object{GUID: string(rune('a'+i%26)) + time.Duration(i).String(), DN: "CN=User,OU=Staff,DC=corp,DC=example,DC=com",
			Properties: map[string][]string{"mail": {"user@corp.example.com"}}, AccountStatus: &AccountStatus{}, PasswordStatus: &PasswordStatus{}}
	}
	e, err := EncodeListing(objs)
	if err != nil {
		b.Fatal(err)
	}
	half := make([]Object, 0, 500)
	for i := 0; i < len(objs); i += 2 {
		half = append(half, objs[i])
	}
	for b.Loop() {
		if _, err := e.AppendJSON(nil, half); err != nil {
			b.Fatal(err)
		}
	}
}
