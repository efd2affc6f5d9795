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

// FuzzSignInKey checks what password checks are counted by, for any name sign-in
// accepts: the key is bounded whatever folding does to the name, never equals the
// address's own count (clientSignInKey), and spellings that differ in case or width
// share it.
func FuzzSignInKey(f *testing.F) {
	for _, s := range []string{"alice@corp.example.com", `CORP\ＡＬＩＣＥ`, "Straße@x.y", "\ufdfa\ufdfa@x.y", "İ@x.y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		name, err := dirgate.ParseSignInName(s)
		if err != nil {
			return
		}
		const client = "192.0.2.1"
		key := signInKey(client, name)
		if len(key) != len(client)+1+32 || key == clientSignInKey(client) || key == client {
			t.Fatalf("key %q of %q", key, s)
		}
		wide := name
		wide.User = strings.Map(func(r rune) rune {
			if '!' <= r && r <= '~' {
				return r - '!' + '！' // the full-width form of each ASCII character
			}
			return r
		}, name.User)
		if signInKey(client, wide) != key {
			t.Fatalf("%q and its full-width spelling %q count apart", name.User, wide.User)
		}
		// Case beyond ASCII has letters whose upper case folds elsewhere (dotless ı
		// becomes I): ASCII names are compared in upper case.
		upper := name
		upper.User = strings.ToUpper(name.User)
		if isASCII(name.User) && signInKey(client, upper) != key {
			t.Fatalf("%q and %q count apart", name.User, upper.User)
		}
	})
}

func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
