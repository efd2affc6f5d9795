package ldap

import (
	"encoding/base64"
	"encoding/binary"
	"testing"

	"github.com/dirgate/dirgate"
)

// samba417Vector is DC2's replUpToDateVector as the harness's Samba 4.17 pair returned
// it to the service account: version 2, one cursor, for DC1.
const samba417Vector = "AgAAAAAAAAABAAAAAAAAAN7EonispK5FrazC7Ddz1eFqGAAAAAAAAACAPtXesZ0B"

func TestParseUpToDateVector(t *testing.T) {
	raw, err := base64.StdEncoding.DecodeString(samba417Vector)
	if err != nil {
		t.Fatal(err)
	}
	got, err := parseUpToDateVector(raw)
	if err != nil {
		t.Fatal(err)
	}
	// DC1's invocationId attribute was 3sSieKykrkWtrMLsN3PV4Q== (the same bytes).
	if len(got) != 1 || got["78a2c4de-a4ac-45ae-adac-c2ec3773d5e1"] != 6250 {
		t.Errorf("cursors = %v", got)
	}
	v1 := make([]byte, 16+2*24)
	binary.LittleEndian.PutUint32(v1, 1)
	binary.LittleEndian.PutUint32(v1[8:], 2)
	v1[16], v1[16+24] = 1, 2
	binary.LittleEndian.PutUint64(v1[16+16:], 7)
	binary.LittleEndian.PutUint64(v1[16+24+16:], 9)
	if got, err := parseUpToDateVector(v1); err != nil || len(got) != 2 {
		t.Errorf("version 1: %v, %v", got, err)
	}
	for name, b := range map[string][]byte{
		"short":         raw[:10],
		"version 3":     append([]byte{3}, raw[1:]...),
		"count too big": append(append([]byte{}, raw[:8]...), append([]byte{2, 0, 0, 0}, raw[12:]...)...),
		"trailing byte": append(append([]byte{}, raw...), 0),
	} {
		if got, err := parseUpToDateVector(b); err == nil {
			t.Errorf("%s: parsed as %v", name, got)
		}
	}
}

func TestReplStateHolds(t *testing.T) {
	dc1, dc2 := "78a2c4de-a4ac-45ae-adac-c2ec3773d5e1", "0183e202-b383-43f0-9859-5cca4530ef26"
	st := replState{self: dc2, cursors: map[string]int64{dc1: 100}}
	for _, tt := range []struct {
		w    dirgate.MembershipWrite
		want bool
	}{
		{dirgate.MembershipWrite{Origin: dc1, USN: 99}, true},
		{dirgate.MembershipWrite{Origin: dc1, USN: 100}, true},
		{dirgate.MembershipWrite{Origin: dc1, USN: 101}, false},
		{dirgate.MembershipWrite{Origin: dc2, USN: 5000}, true}, // its own write
		{dirgate.MembershipWrite{Origin: "11111111-2222-3333-4444-555555555555", USN: 1}, false},
	} {
		if got := st.holds(tt.w); got != tt.want {
			t.Errorf("holds(%+v) = %v, want %v", tt.w, got, tt.want)
		}
	}
}

// FuzzParseUpToDateVector: a vector comes from the DC; whatever its bytes, parsing
// returns an error or cursors whose count the header gave, and never panics.
func FuzzParseUpToDateVector(f *testing.F) {
	raw, _ := base64.StdEncoding.DecodeString(samba417Vector)
	f.Add(raw)
	f.Add([]byte{})
	f.Add(make([]byte, 16))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := parseUpToDateVector(b)
		if err != nil {
			return
		}
		if n := binary.LittleEndian.Uint32(b[8:]); uint32(len(got)) > n {
			t.Fatalf("%d cursors from a header of %d", len(got), n)
		}
		for _, usn := range got {
			if usn < 0 {
				t.Fatal("negative USN")
			}
		}
	})
}
