package throttle

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
)

var t0 = time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)

var ctx = context.Background()

// fail counts a failure of key in c with limit.
func fail(c Counter, key string, limit int, now time.Time) {
	if _, _, _, err := c.Fail(ctx, key, limit, now); err != nil {
		panic(err)
	}
}

func blocked(c Counter, key string, limit int, now time.Time) (time.Duration, bool) {
	wait, b, err := c.Blocked(ctx, key, limit, now)
	if err != nil {
		panic(err)
	}
	return wait, b
}

func TestLocalSlidingWindow(t *testing.T) {
	c := NewLocal(time.Minute, 10).Addresses()
	const a, limit = "192.0.2.1", 3
	// Failures at 0s, 10s, 20s: the third one blocks.
	for i, at := range []time.Duration{0, 10 * time.Second, 20 * time.Second} {
		if _, b := blocked(c, a, limit, t0.Add(at)); b {
			t.Fatalf("blocked before failure %d", i+1)
		}
		fail(c, a, limit, t0.Add(at))
	}
	tests := []struct {
		name      string
		at        time.Duration
		wantBlock bool
		wantWait  time.Duration
	}{
		// Blocked until the oldest failure (at 0s) leaves the window at 60s.
		{"right after the third", 20 * time.Second, true, 40 * time.Second},
		{"just before the oldest expires", 59*time.Second + 999*time.Millisecond, true, time.Millisecond},
		// A failure counts during [t, t+window).
		{"oldest expired", 60 * time.Second, false, 0},
	}
	for _, tt := range tests {
		wait, b := blocked(c, a, limit, t0.Add(tt.at))
		if b != tt.wantBlock || wait != tt.wantWait {
			t.Errorf("%s: blocked %v wait %v, want %v %v", tt.name, b, wait, tt.wantBlock, tt.wantWait)
		}
	}
	// At 60s two failures remain; one more blocks again, now until 10s+60s.
	fail(c, a, limit, t0.Add(60*time.Second))
	if wait, b := blocked(c, a, limit, t0.Add(60*time.Second)); !b || wait != 10*time.Second {
		t.Errorf("after a fourth failure: blocked %v wait %v, want true 10s", b, wait)
	}
}

func TestLocalAddressesAreIndependent(t *testing.T) {
	c := NewLocal(time.Minute, 10).Addresses()
	fail(c, "a", 2, t0)
	fail(c, "a", 2, t0)
	fail(c, "b", 2, t0)
	if _, b := blocked(c, "a", 2, t0); !b {
		t.Errorf("a is not blocked after 2 failures")
	}
	if _, b := blocked(c, "b", 2, t0); b {
		t.Errorf("b is blocked after 1 failure")
	}
	if _, b := blocked(c, "c", 2, t0); b {
		t.Errorf("an unknown address is blocked")
	}
}

// TestLocalFailJudgedInOneStep: Fail reports whether the key was blocked before the
// failure it counts, so that of failures counted one after another exactly limit
// pass.
func TestLocalFailJudgedInOneStep(t *testing.T) {
	c := NewLocal(time.Minute, 10).Addresses()
	for i := range 5 {
		_, wait, b, _ := c.Fail(ctx, "a", 3, t0)
		if b != (i >= 3) {
			t.Errorf("failure %d: blocked %v", i+1, b)
		}
		if b && wait != time.Minute {
			t.Errorf("failure %d: wait %v, want 1m", i+1, wait)
		}
	}
}

func TestLocalBoundedMemory(t *testing.T) {
	l := NewLocal(time.Minute, 3)
	c := l.Addresses()
	// a fails twice first, then b, c, d fail once: a's last failure is the oldest and
	// a is forgotten when d makes a fourth address.
	fail(c, "a", 2, t0)
	fail(c, "a", 2, t0.Add(time.Second))
	fail(c, "b", 2, t0.Add(2*time.Second))
	fail(c, "c", 2, t0.Add(3*time.Second))
	if _, b := blocked(c, "a", 2, t0.Add(3*time.Second)); !b {
		t.Fatalf("a is not blocked before eviction")
	}
	fail(c, "d", 2, t0.Add(4*time.Second))
	if n := l.addresses.Len(); n != 3 {
		t.Errorf("tracking %d addresses, want 3", n)
	}
	if _, b := blocked(c, "a", 2, t0.Add(4*time.Second)); b {
		t.Errorf("a is still blocked after it was evicted")
	}
	// A recent failure keeps b tracked: b fails again and is now the newest, so e
	// evicts c.
	fail(c, "b", 2, t0.Add(5*time.Second))
	fail(c, "e", 2, t0.Add(6*time.Second))
	if l.addresses.Contains("c") {
		t.Errorf("c was kept, the least recently failing address")
	}
	if _, b := blocked(c, "b", 2, t0.Add(6*time.Second)); !b {
		t.Errorf("b lost its failures to eviction")
	}
	// Failures per address never exceed the limit, however many arrive.
	for range 100 {
		fail(c, "b", 2, t0.Add(7*time.Second))
	}
	if f, _ := l.addresses.Peek("b"); len(f.times) != 2 {
		t.Errorf("b keeps %d timestamps, want 2", len(f.times))
	}
}

func TestLocalForgetsExpiredAddresses(t *testing.T) {
	l := NewLocal(time.Minute, 10)
	fail(l.Addresses(), "a", 2, t0)
	blocked(l.Addresses(), "a", 2, t0.Add(time.Minute))
	if l.addresses.Len() != 0 {
		t.Errorf("an address without failures in the window is still tracked")
	}
}

// clock is a settable clock; tests never sleep.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

// TestThrottleSlowsDownProgressively: the product slows repeated failed sign-ins
// down progressively before refusing them (docs/compatibility.md, "The sign-in
// flow"); so does the throttle.
func TestThrottleSlowsDownProgressively(t *testing.T) {
	clk := &clock{now: time.Unix(0, 0)}
	th, err := New(Config{MaxFailures: 10, Window: time.Minute, MaxClients: 10, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	var got []time.Duration
	for range 9 {
		got = append(got, th.TokenFailed(ctx, "192.0.2.1").Hold)
	}
	want := []time.Duration{0, 0, 250 * time.Millisecond, 500 * time.Millisecond, time.Second,
		2 * time.Second, 4 * time.Second, 4 * time.Second, 4 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("delays = %v, want %v", got, want)
		}
	}
	// Another address is not slowed by the first one's failures.
	if d := th.TokenFailed(ctx, "192.0.2.2").Hold; d != 0 {
		t.Fatalf("a fresh address is delayed %v", d)
	}
	// Unknown session ids share the address's count with tokens.
	if v := th.SessionIDFailed(ctx, "192.0.2.1"); v.Hold != 4*time.Second || v.Refused != dirgate.NotThrottled {
		t.Fatalf("a session id after 9 bad tokens: %+v", v)
	}
	if v := th.TokenFailed(ctx, "192.0.2.1"); v.Refused != dirgate.ThrottledAddress || v.RetryAfter != time.Minute {
		t.Fatalf("the eleventh failure: %+v", v)
	}
	// Once the failures leave the window, answers are prompt again.
	clk.now = clk.now.Add(2 * time.Minute)
	if v := th.TokenFailed(ctx, "192.0.2.1"); v.Hold != 0 || v.Refused != dirgate.NotThrottled {
		t.Fatalf("after the window: %+v", v)
	}
}

// Concurrent sign-ins take their times before the throttle's lock, so a reservation
// may find the address's oldest attempt later than its own time: the wait it is
// told is still at most the window (Retry-After never exceeds it).
func TestLocalTakeWaitAtMostWindow(t *testing.T) {
	c := NewLocal(time.Minute, 10).Pairs()
	for i := range 2 {
		if _, _, give, _ := c.Take(ctx, "a", 2, t0.Add(time.Second+time.Duration(i))); give == nil {
			t.Fatalf("reservation %d refused", i)
		}
	}
	_, wait, give, _ := c.Take(ctx, "a", 2, t0)
	if give != nil {
		t.Fatal("a third reservation within the window was accepted")
	}
	if wait <= 0 || wait > time.Minute {
		t.Errorf("wait %v, want within (0, 1m]", wait)
	}
}

// TestThrottleSignInBudget: an address's password checks across names are bounded
// by MaxClientSignInFailures in a window that starts at its first one; a success
// gives its place back, and the window's end restores the budget.
func TestThrottleSignInBudget(t *testing.T) {
	clk := &clock{now: t0}
	th, err := New(Config{MaxFailures: 2, MaxClientSignInFailures: 3, Window: time.Minute, MaxClients: 10, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	const a = "192.0.2.1"
	name := func(user string) dirgate.SignInName {
		return dirgate.SignInName{User: user, Domain: "corp.example.com"}
	}
	refused := errors.New("refused")
	var finishes []func(context.Context, error) time.Duration
	for i := range 3 {
		clk.now = t0.Add(time.Duration(i) * time.Second)
		finish, v := th.StartSignIn(ctx, a, name(fmt.Sprint("name", i)))
		if finish == nil {
			t.Fatalf("check %d refused: %+v", i+1, v)
		}
		finishes = append(finishes, finish)
	}
	finishes[0](ctx, refused)
	finishes[1](ctx, refused)
	clk.now = t0.Add(10 * time.Second)
	finish, v := th.StartSignIn(ctx, a, name("another"))
	if finish != nil || v.Refused != dirgate.ThrottledAddressSignIns || v.RetryAfter != 50*time.Second {
		t.Fatalf("fourth name: %+v; want refused for the address, 50s", v)
	}
	if finish, _ := th.StartSignIn(ctx, "192.0.2.2", name("another")); finish == nil {
		t.Errorf("another address was refused")
	}
	// A success gives its place back.
	finishes[2](ctx, nil)
	clk.now = t0.Add(11 * time.Second)
	finish, _ = th.StartSignIn(ctx, a, name("another"))
	if finish == nil {
		t.Fatalf("refused after a place was given back")
	}
	finish(ctx, refused)
	clk.now = t0.Add(12 * time.Second)
	if _, v := th.StartSignIn(ctx, a, name("yet another")); v.Refused != dirgate.ThrottledAddressSignIns {
		t.Errorf("the budget used up again: %+v, want the address refused", v)
	}
	clk.now = t0.Add(time.Minute)
	if finish, _ := th.StartSignIn(ctx, a, name("another")); finish == nil {
		t.Errorf("refused after the window")
	}
}

// TestThrottleValidate: every problem is reported at once.
func TestThrottleValidate(t *testing.T) {
	_, err := New(Config{MaxFailures: -1, Window: -1})
	if err == nil || !strings.Contains(err.Error(), "MaxFailures") || !strings.Contains(err.Error(), "Window") {
		t.Errorf("err %v, want both MaxFailures and Window named", err)
	}
}
