package dirgate_test

import (
	"strings"
	"testing"

	"github.com/dirgate/dirgate"
)

// TestNewJoinedListing: encodings are accepted only as the very elements of the
// joined array (substrings at their places, separated by commas, within brackets),
// never as equal copies, so that JSON and the encodings are one copy of the bytes.
func TestNewJoinedListing(t *testing.T) {
	objs := []dirgate.Object{{GUID: "a"}, {GUID: "b"}}
	joined := `[{"a":1},{"b":22}]`
	frags := []string{joined[1:8], joined[9:17]}
	e, err := dirgate.NewJoinedListing(objs, frags, joined)
	if err != nil || e.JSON() != joined || e.FragmentBytes() != 15 {
		t.Fatalf("good listing: %v", err)
	}
	if _, err := dirgate.NewJoinedListing(nil, []string{}, "[]"); err != nil {
		t.Fatalf("empty listing: %v", err)
	}
	copies := []string{strings.Clone(frags[0]), strings.Clone(frags[1])}
	spaced := `[{"a":1} {"b":22}]`
	for name, tc := range map[string]struct {
		objs   []dirgate.Object
		frags  []string
		joined string
	}{
		"copies, not slices":  {objs, copies, joined},
		"second at the first": {objs, []string{frags[0], joined[1:9]}, joined},
		"missing separator":   {objs, []string{spaced[1:8], spaced[9:17]}, spaced},
		"bytes after last":    {objs, []string{joined[1:8], joined[9:16]}, joined},
		"no closing bracket":  {objs, frags, joined[:17]},
		"too few encodings":   {objs, frags[:1], joined},
		"nil encodings":       {nil, nil, "[]"},
	} {
		if _, err := dirgate.NewJoinedListing(tc.objs, tc.frags, tc.joined); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
