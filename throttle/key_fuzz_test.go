package throttle

import (
	"strings"
	"testing"

	"github.com/dirgate/dirgate"
)

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
