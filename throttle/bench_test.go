package throttle

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
)

// BenchmarkThrottle is the throttle's cost through the calls the HTTP layer makes,
// in process, with MaxClients addresses already counted. "token" is a rejected
// token (TokenFailed, which judges and counts in one step): from one address, and
// from more addresses than MaxClients (a guessing attack spread wide), where each
// failure adds an address and forgets the one whose last failure is oldest.
// "signin" is a password check's judging and counting before the check and its
// giving back after a success (StartSignIn and finish): a name the throttle does
// not know, the usual case, or one with failures below the limit.
func BenchmarkThrottle(b *testing.B) {
	cfg := Config{}.withDefaults()
	addrs := make([]string, 2*cfg.MaxClients)
	for i := range addrs {
		addrs[i] = "10." + strconv.Itoa(i>>16&255) + "." + strconv.Itoa(i>>8&255) + "." + strconv.Itoa(i&255)
	}
	ctx := context.Background()
	now := time.Unix(1e9, 0)
	full := func() *Throttle {
		th, err := New(Config{SlowAfter: 1000, Now: func() time.Time { return now }})
		if err != nil {
			b.Fatal(err)
		}
		for _, a := range addrs[:cfg.MaxClients] {
			th.TokenFailed(ctx, a)
		}
		return th
	}
	b.Run("token/one", func(b *testing.B) {
		th := full()
		for b.Loop() {
			th.TokenFailed(ctx, "192.0.2.1")
		}
	})
	b.Run("token/spread", func(b *testing.B) {
		th := full()
		i := cfg.MaxClients
		for b.Loop() {
			th.TokenFailed(ctx, addrs[i%len(addrs)])
			i++
		}
	})
	alice := dirgate.SignInName{User: "alice.smith", Domain: "corp.example.com"}
	b.Run("signin/unknown", func(b *testing.B) {
		th := full()
		for b.Loop() {
			finish, _ := th.StartSignIn(ctx, "192.0.2.1", alice)
			finish(ctx, nil)
		}
	})
	b.Run("signin/known", func(b *testing.B) {
		th := full()
		for range cfg.MaxFailures - 1 {
			finish, _ := th.StartSignIn(ctx, "192.0.2.1", alice)
			finish(ctx, dirgate.Errorf(dirgate.EFORBIDDEN, "wrong password"))
		}
		for b.Loop() {
			finish, v := th.StartSignIn(ctx, "192.0.2.1", alice)
			if finish == nil {
				b.Fatalf("refused: %+v", v)
			}
			finish(ctx, nil)
		}
	})
}

// BenchmarkSignInKey is what naming a password check's count costs: folding the
// account name (NFKC, then Unicode case folding) and hashing it.
func BenchmarkSignInKey(b *testing.B) {
	for _, c := range []struct{ name, user string }{{"ascii", "alice.smith"}, {"full width", "ＡＬＩＣＥ.ＳＭＩＴＨ"}} {
		b.Run(c.name, func(b *testing.B) {
			name := dirgate.SignInName{User: c.user, Domain: "corp.example.com"}
			for b.Loop() {
				_ = signInKey("192.0.2.1", name)
			}
		})
	}
}
