package encodedlisting_test

import (
	"testing"

	"github.com/dirgate/dirgate/internal/encodedlisting"
)

// The index finds every object of the listing, and nothing else; FragmentBytes counts
// every encoding.
func TestIndex(t *testing.T) {
	guids := []string{"a", "b", "c", "d"}
	frags := []string{`{"guid":"a","dn":"CN=A"}`, `{"guid":"b","dn":"CN=B\u003c\u0026\u003e"}`, `{"guid":"c"}`, `{}`}
	guid := encodedlisting.GUIDFunc(func(i int) string { return guids[i] })
	e, err := encodedlisting.New(len(guids), frags, guid)
	if err != nil {
		t.Fatal(err)
	}
	size := 0
	for i := range guids {
		if got := e.Index(guids[i]); got != i {
			t.Errorf("Index(%s) = %d, want %d", guids[i], got, i)
		}
		if e.Fragments()[i] != frags[i] {
			t.Errorf("fragment %d = %s, want %s", i, e.Fragments()[i], frags[i])
		}
		size += len(frags[i])
	}
	if got := e.Index("z"); got != -1 {
		t.Errorf("Index of a foreign GUID = %d", got)
	}
	if got := e.FragmentBytes(); got != size {
		t.Errorf("FragmentBytes = %d, want %d", got, size)
	}
	if e.JSON() != "" {
		t.Errorf("JSON of encodings not laid out in an array = %q", e.JSON())
	}
	if _, err := encodedlisting.New(len(guids), []string{"{}"}, guid); err == nil {
		t.Error("a listing with fewer encodings than objects was accepted")
	}
	if e, err := encodedlisting.New(len(guids), nil, guid); err != nil || e.Fragments() != nil || e.FragmentBytes() != 0 {
		t.Errorf("a listing without encodings: %v", err)
	}
}
