package proxy

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/dirgate/dirgate"
)

// FuzzParseSignInBody checks the sign-in body parser against encoding/json, as
// FuzzParseAddBody checks the addition's: it accepts only objects encoding/json
// accepts, returns exactly their username and password strings (fields matched in
// ASCII letter case only), and whatever name it then accepts as a sign-in name
// holds no control character nor any DN or filter metacharacter outside the
// allowed separator.
func FuzzParseSignInBody(f *testing.F) {
	for _, s := range []string{
		`{"username":"dana.admin@corp.example.com","password":"Demo-Admin-1"}`,
		`{"UserName":"CORP\\dana","Password":"p\u00e9","x":[1,{"y":null}]}`,
		"\xef\xbb\xbf" + `{"username":"a@b.c","password":""}`,
		`{"username":"a@b.c","username":"a@b.c"}`, `{"username":"a\ud800@b.c"}`,
		`{"username":"CN=x,DC=y","password":null}`, `{"username":"*)(cn=*@x.y"}`, `[]`, ``, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := parseSignInBody(b, fieldUsername, fieldPassword)
		if err != nil {
			return
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(strings.TrimPrefix(string(b), "\xef\xbb\xbf")), &m); err != nil {
			t.Fatalf("accepted %q, which encoding/json refuses: %v", b, err)
		}
		want := map[string]string{}
		for k, v := range m {
			for _, f := range []string{fieldUsername, fieldPassword} {
				if asciiEqualFold(k, f) {
					want[f], _ = v.(string)
				}
			}
		}
		if got.Username != want[fieldUsername] || got.Password != want[fieldPassword] {
			t.Fatalf("%q gave %q/%q, encoding/json %q", b, got.Username, got.Password, want)
		}
		name, err := dirgate.ParseSignInName(got.Username)
		if err != nil {
			return
		}
		user := name.User
		if strings.ContainsAny(user, "\\,=+<>#;\"*()\x00") || strings.ContainsAny(name.Domain, "\\,=+<>#;\"*()\x00@") {
			t.Fatalf("name %q accepted with a metacharacter in %q or %q", got.Username, user, name.Domain)
		}
		for _, r := range got.Username {
			if r < 0x20 || r == 0x7f {
				t.Fatalf("name %q accepted with a control character", got.Username)
			}
		}
	})
}
