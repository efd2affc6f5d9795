package proxy

import (
	"strconv"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
)

// BenchmarkThrottle is the throttle's cost. "blocked" is what a rejected token, an
// unknown session id and a sign-in pay before they are answered: the key unknown to
// the throttle (no failure in the window, the usual case) or known with failures
// below the limit. "fail" is a
// failed authentication: from one address, and from more addresses than MaxClients
// (a guessing attack spread wide), where each failure adds an address and forgets
// the one whose last failure is oldest.
func BenchmarkThrottle(b *testing.B) {
	cfg := ThrottleConfig{}.withDefaults()
	addrs := make([]string, 2*cfg.MaxClients)
	for i := range addrs {
		addrs[i] = "10." + strconv.Itoa(i>>16&255) + "." + strconv.Itoa(i>>8&255) + "." + strconv.Itoa(i&255)
	}
	full := func(now time.Time) *throttle {
		th := newThrottle(cfg)
		for _, a := range addrs[:cfg.MaxClients] {
			th.fail(a, now)
		}
		return th
	}
	b.Run("blocked/unknown", func(b *testing.B) {
		now := time.Unix(1e9, 0)
		th := full(now)
		for b.Loop() {
			if _, blocked := th.blocked("192.0.2.1", now); blocked {
				b.Fatal("blocked")
			}
		}
	})
	b.Run("blocked/known", func(b *testing.B) {
		now := time.Unix(1e9, 0)
		th := full(now)
		i := 0
		for b.Loop() {
			if _, blocked := th.blocked(addrs[i%cfg.MaxClients], now); blocked {
				b.Fatal("blocked")
			}
			i++
		}
	})
	b.Run("fail/one", func(b *testing.B) {
		now := time.Unix(1e9, 0)
		th := full(now)
		for b.Loop() {
			th.fail("192.0.2.1", now)
		}
	})
	b.Run("fail/spread", func(b *testing.B) {
		now := time.Unix(1e9, 0)
		th := full(now)
		i := cfg.MaxClients
		for b.Loop() {
			th.fail(addrs[i%len(addrs)], now)
			i++
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
