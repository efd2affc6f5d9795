package objectjson

import (
	"encoding/json"
	"testing"
	"time"
)

// TestAppendTimestamp holds the digit-by-digit timestamp to Format's, at the edges of
// its four-digit years and beyond them (where it defers to Format).
func TestAppendTimestamp(t *testing.T) {
	for _, tm := range []time.Time{
		{}, time.Unix(0, 0), time.Date(1601, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2020, 7, 14, 16, 27, 49, 559044899, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(30828, 9, 14, 2, 48, 5, 477580700, time.UTC), // the largest FILETIME
	} {
		want := tm.UTC().Format(TimestampLayout)
		if got := string(appendTimestamp([]byte("x"), tm.UTC())); got != "x"+want {
			t.Errorf("appendTimestamp(%v) = %q, want x%q", tm, got, want)
		}
	}
}

// FuzzDecoded: Decoded is what encoding/json gives back for a string it encoded.
func FuzzDecoded(f *testing.F) {
	for _, s := range []string{"", "CN=a", "\xff", "a\xe2\x82", "Zoë", "\xed\xa0\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var want string
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		if got := Decoded(s); got != want {
			t.Fatalf("Decoded(%q) = %q, encoding/json gives %q", s, got, want)
		}
	})
}
