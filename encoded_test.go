package dirgate

import (
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
	frags := make([]string, len(objs))
	for i := range objs {
		frags[i] = string(objs[i].AppendJSON(nil))
	}
	e, err := NewEncodedListing(objs, frags)
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

// TestCacheStatusWorse: the most degraded status wins, so a listing resolved through
// a stale or bypassed lookup says so.
func TestCacheStatusWorse(t *testing.T) {
	tests := []struct {
		name string
		set  []CacheStatus
		want CacheStatus
	}{
		{"nothing reported", nil, ""},
		{"one status", []CacheStatus{CacheMiss}, CacheMiss},
		{"stale lookup, hit listing", []CacheStatus{CacheStale, CacheHit}, CacheStale},
		{"bypassed lookup, hit", []CacheStatus{CacheBypass, CacheHit}, CacheBypass},
		{"hit then miss", []CacheStatus{CacheHit, CacheMiss}, CacheMiss},
		{"nothing then hit", []CacheStatus{"", CacheHit}, CacheHit},
	}
	for _, tc := range tests {
		var got CacheStatus
		for _, s := range tc.set {
			got = got.Worse(s)
		}
		if got != tc.want {
			t.Errorf("%s: status %q, want %q", tc.name, got, tc.want)
		}
	}
}
