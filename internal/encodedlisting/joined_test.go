package encodedlisting_test

import (
	"strings"
	"testing"

	"github.com/dirgate/dirgate/internal/encodedlisting"
)

// TestNewJoined: encodings are accepted only as the very elements of the joined
// array (substrings at their places, separated by commas, within brackets), never as
// equal copies, so that JSON and the encodings are one copy of the bytes.
func TestNewJoined(t *testing.T) {
	guids := []string{"a", "b"}
	guid := encodedlisting.GUIDFunc(func(i int) string { return guids[i] })
	joined := `[{"a":1},{"b":22}]`
	frags := []string{joined[1:8], joined[9:17]}
	e, err := encodedlisting.NewJoined(len(guids), frags, joined, guid)
	if err != nil || e.JSON() != joined || e.FragmentBytes() != 15 || e.Index("b") != 1 {
		t.Fatalf("good listing: %v", err)
	}
	if _, err := encodedlisting.NewJoined(0, []string{}, "[]", guid); err != nil {
		t.Fatalf("empty listing: %v", err)
	}
	copies := []string{strings.Clone(frags[0]), strings.Clone(frags[1])}
	spaced := `[{"a":1} {"b":22}]`
	for name, tc := range map[string]struct {
		n      int
		frags  []string
		joined string
	}{
		"copies, not slices":  {2, copies, joined},
		"second at the first": {2, []string{frags[0], joined[1:9]}, joined},
		"missing separator":   {2, []string{spaced[1:8], spaced[9:17]}, spaced},
		"bytes after last":    {2, []string{joined[1:8], joined[9:16]}, joined},
		"no closing bracket":  {2, frags, joined[:17]},
		"too few encodings":   {2, frags[:1], joined},
		"nil encodings":       {0, nil, "[]"},
	} {
		if _, err := encodedlisting.NewJoined(tc.n, tc.frags, tc.joined, guid); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
