package proxy

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzParseAddBody checks the POST body parser against encoding/json: it accepts
// only JSON objects that encoding/json accepts, whose group and newMember (matched
// in ASCII letter case only) are the strings it returns, parsed; and what it accepts
// it accepts again when re-encoded.
func FuzzParseAddBody(f *testing.F) {
	for _, s := range []string{
		`{"group":"CN=Sales,OU=Groups,DC=corp,DC=com","newMember":"S-1-5-21-1-2-3-1105"}`,
		`{"GROUP":"{0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0}","NewMember":"CN=a\\,b,DC=x","x":{"y":[null]}}`,
		"\xef\xbb\xbf" + `{"group":"CN=x,DC=y","newMember":"CN=\u00e9,DC=y"}`,
		`{"group":"CN=x,DC=y","group":"CN=x,DC=y","newMember":"CN=z,DC=y"}`,
		`{"group":"CN=\ud800,DC=y","newMember":"CN=\ufffd,DC=y"}`,
		`{"group":null,"newMember":5}`, `[]`, `"x"`, ``, `{`, `{"a":1} x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := parseAddBody(b)
		if err != nil {
			return
		}
		raw := strings.TrimPrefix(string(b), "\xef\xbb\xbf")
		var m map[string]any
		if err := json.Unmarshal([]byte(raw), &m); err != nil {
			t.Fatalf("accepted %q, which encoding/json refuses: %v", b, err)
		}
		values := map[string]string{}
		for k, v := range m {
			for _, f := range []string{fieldGroup, fieldNewMember} {
				if asciiEqualFold(k, f) {
					values[f], _ = v.(string)
				}
			}
		}
		if got.Group.String() != values[fieldGroup] || got.NewMember.String() != values[fieldNewMember] {
			t.Fatalf("%q gave %q and %q, encoding/json %q", b, got.Group.String(), got.NewMember.String(), values)
		}
		again, err := json.Marshal(map[string]string{fieldGroup: got.Group.String(), fieldNewMember: got.NewMember.String()})
		if err != nil {
			t.Fatal(err)
		}
		if back, err := parseAddBody(again); err != nil || back.Group.Canonical() != got.Group.Canonical() || back.NewMember.Canonical() != got.NewMember.Canonical() {
			t.Fatalf("re-encoded %s: %+v, %v", again, back, err)
		}
	})
}
