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

// The index finds every object of the listing, and nothing else; FragmentBytes counts
// every encoding.
func TestEncodedListingIndex(t *testing.T) {
	objs := encodedTestObjects()
	e, err := EncodeListing(objs)
	if err != nil {
		t.Fatal(err)
	}
	size := 0
	for i := range objs {
		if got := e.Index(objs[i].GUID); got != i {
			t.Errorf("Index(%s) = %d, want %d", objs[i].GUID, got, i)
		}
		b, _ := json.Marshal(objs[i])
		if e.Fragments()[i] != string(b) {
			t.Errorf("fragment %d = %s, want %s", i, e.Fragments()[i], b)
		}
		size += len(b)
	}
	if got := e.Index("z"); got != -1 {
		t.Errorf("Index of a foreign GUID = %d", got)
	}
	if got := e.FragmentBytes(); got != size {
		t.Errorf("FragmentBytes = %d, want %d", got, size)
	}
	if _, err := NewEncodedListing(objs, []string{"{}"}); err == nil {
		t.Error("a listing with fewer encodings than objects was accepted")
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
	if none.Encoded() != nil {
		t.Error("nil report has an encoded listing")
	}
}
