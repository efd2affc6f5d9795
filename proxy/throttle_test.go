package proxy

import (
	"net/http/httptest"
	"net/netip"
	"strconv"
	"testing"
	"time"
)

var t0 = time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)

func TestThrottleSlidingWindow(t *testing.T) {
	th := newThrottle(ThrottleConfig{MaxFailures: 3, Window: time.Minute, MaxClients: 10})
	const a = "192.0.2.1"
	// Failures at 0s, 10s, 20s: the third one blocks.
	for i, at := range []time.Duration{0, 10 * time.Second, 20 * time.Second} {
		if _, blocked := th.blocked(a, t0.Add(at)); blocked {
			t.Fatalf("blocked before failure %d", i+1)
		}
		th.fail(a, t0.Add(at))
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
		wait, blocked := th.blocked(a, t0.Add(tt.at))
		if blocked != tt.wantBlock || wait != tt.wantWait {
			t.Errorf("%s: blocked %v wait %v, want %v %v", tt.name, blocked, wait, tt.wantBlock, tt.wantWait)
		}
	}
	// At 60s two failures remain; one more blocks again, now until 10s+60s.
	th.fail(a, t0.Add(60*time.Second))
	if wait, blocked := th.blocked(a, t0.Add(60*time.Second)); !blocked || wait != 10*time.Second {
		t.Errorf("after a fourth failure: blocked %v wait %v, want true 10s", blocked, wait)
	}
}

func TestThrottleAddressesAreIndependent(t *testing.T) {
	th := newThrottle(ThrottleConfig{MaxFailures: 2, Window: time.Minute, MaxClients: 10})
	th.fail("a", t0)
	th.fail("a", t0)
	th.fail("b", t0)
	if _, blocked := th.blocked("a", t0); !blocked {
		t.Errorf("a is not blocked after 2 failures")
	}
	if _, blocked := th.blocked("b", t0); blocked {
		t.Errorf("b is blocked after 1 failure")
	}
	if _, blocked := th.blocked("c", t0); blocked {
		t.Errorf("an unknown address is blocked")
	}
}

func TestThrottleBoundedMemory(t *testing.T) {
	th := newThrottle(ThrottleConfig{MaxFailures: 2, Window: time.Minute, MaxClients: 3})
	// a fails twice first, then b, c, d fail once: a's last failure is the oldest and
	// a is forgotten when d makes a fourth address.
	th.fail("a", t0)
	th.fail("a", t0.Add(time.Second))
	th.fail("b", t0.Add(2*time.Second))
	th.fail("c", t0.Add(3*time.Second))
	if _, blocked := th.blocked("a", t0.Add(3*time.Second)); !blocked {
		t.Fatalf("a is not blocked before eviction")
	}
	th.fail("d", t0.Add(4*time.Second))
	if n := th.clients.Len(); n != 3 {
		t.Errorf("tracking %d addresses, want 3", n)
	}
	if _, blocked := th.blocked("a", t0.Add(4*time.Second)); blocked {
		t.Errorf("a is still blocked after it was evicted")
	}
	// A recent failure keeps b tracked: b fails again and is now the newest, so e
	// evicts c.
	th.fail("b", t0.Add(5*time.Second))
	th.fail("e", t0.Add(6*time.Second))
	if th.clients.Contains("c") {
		t.Errorf("c was kept, the least recently failing address")
	}
	if _, blocked := th.blocked("b", t0.Add(6*time.Second)); !blocked {
		t.Errorf("b lost its failures to eviction")
	}
	// Failures per address never exceed MaxFailures, however many arrive.
	for i := 0; i < 100; i++ {
		th.fail("b", t0.Add(7*time.Second))
	}
	if f, _ := th.clients.Peek("b"); len(f.times) != 2 {
		t.Errorf("b keeps %d timestamps, want 2", len(f.times))
	}
}

func TestThrottleForgetsExpiredAddresses(t *testing.T) {
	th := newThrottle(ThrottleConfig{MaxFailures: 2, Window: time.Minute, MaxClients: 10})
	th.fail("a", t0)
	th.blocked("a", t0.Add(time.Minute))
	if th.clients.Len() != 0 {
		t.Errorf("an address without failures in the window is still tracked")
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	tests := []struct {
		name string
		d    time.Duration
		want int
	}{
		// Rounded up: waiting the advertised time must be enough.
		{"fraction", 1500 * time.Millisecond, 2},
		{"whole", 40 * time.Second, 40},
		// Never 0, which would invite an immediate retry.
		{"tiny", time.Millisecond, 1},
	}
	for _, tt := range tests {
		if got := retryAfterSeconds(tt.d); got != tt.want {
			t.Errorf("%s: retryAfterSeconds(%v) = %d, want %d", tt.name, tt.d, got, tt.want)
		}
	}
}

func TestRemoteAddr(t *testing.T) {
	tests := []struct {
		name   string
		remote string
		xff    string
		want   string
	}{
		{"IPv4", "192.0.2.7:5123", "", "192.0.2.7"},
		// X-Forwarded-For is client-controlled unless a trusted proxy sets it.
		{"forwarded header ignored", "192.0.2.7:5123", "203.0.113.9", "192.0.2.7"},
		// One host commonly holds a /64: counting per address would let it rotate.
		{"IPv6 by /64", "[2001:db8:1:2:aaaa::1]:443", "", "2001:db8:1:2::/64"},
		{"IPv6 same /64", "[2001:db8:1:2:bbbb::9]:443", "", "2001:db8:1:2::/64"},
		{"IPv6 zone dropped", "[fe80::1%eth0]:443", "", "fe80::/64"},
		{"IPv4-mapped IPv6 is IPv4", "[::ffff:192.0.2.7]:443", "", "192.0.2.7"},
		{"no port", "192.0.2.7", "", "192.0.2.7"},
		{"not an IP", "pipe", "", "pipe"},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tt.remote
		if tt.xff != "" {
			r.Header.Set("X-Forwarded-For", tt.xff)
		}
		if got := remoteAddr(r); got != tt.want {
			t.Errorf("%s: remoteAddr(%q) = %q, want %q", tt.name, tt.remote, got, tt.want)
		}
	}
}

func TestForwardedClientAddr(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("127.0.0.1/32")}
	addr := ForwardedClientAddr(trusted)
	tests := []struct {
		name   string
		remote string
		xff    []string
		want   string
	}{
		// Behind the ingress, each client is throttled on its own address.
		{name: "through a trusted proxy", remote: "10.1.2.3:5555", xff: []string{"203.0.113.7"}, want: "203.0.113.7"},
		// A client cannot choose its key by prepending addresses: the right-most
		// untrusted hop is taken.
		{name: "spoofed left-most entry", remote: "10.1.2.3:5555", xff: []string{"198.51.100.1, 203.0.113.7"}, want: "203.0.113.7"},
		{name: "chain of trusted proxies", remote: "127.0.0.1:1", xff: []string{"203.0.113.7", "10.9.9.9"}, want: "203.0.113.7"},
		// A caller inside the trusted range is itself skipped as a proxy: the entry
		// to its left names it (docs/auth.md, "Throttling", says so).
		{name: "trusted caller through a proxy", remote: "10.1.2.3:5555", xff: []string{"198.51.100.1, 10.5.5.5"}, want: "198.51.100.1"},
		// From an untrusted peer the header is ignored.
		{name: "untrusted peer", remote: "192.0.2.1:1", xff: []string{"203.0.113.7"}, want: "192.0.2.1"},
		{name: "no header", remote: "10.1.2.3:5555", want: "10.1.2.3"},
		{name: "malformed hop", remote: "10.1.2.3:5555", xff: []string{"203.0.113.7, nonsense"}, want: "10.1.2.3"},
		{name: "IPv6 client by /64", remote: "10.1.2.3:5555", xff: []string{"2001:db8::1"}, want: "2001:db8::/64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tt.remote
			for _, v := range tt.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := addr(r); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestThrottleSlowsDownProgressively: the product slows repeated failed sign-ins down
// progressively before refusing them (docs/compatibility.md, "The sign-in flow"); so
// does the throttle.
func TestThrottleSlowsDownProgressively(t *testing.T) {
	cfg := ThrottleConfig{MaxFailures: 10, Window: time.Minute, MaxClients: 10}.withDefaults()
	th := newThrottle(cfg)
	now := time.Unix(0, 0)
	var got []time.Duration
	for range 9 {
		got = append(got, th.fail("192.0.2.1", now))
	}
	want := []time.Duration{0, 0, 250 * time.Millisecond, 500 * time.Millisecond, time.Second,
		2 * time.Second, 4 * time.Second, 4 * time.Second, 4 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("delays = %v, want %v", got, want)
		}
	}
	// Another address is not slowed by the first one's failures.
	if d := th.fail("192.0.2.2", now); d != 0 {
		t.Fatalf("a fresh address is delayed %v", d)
	}
	// Once the failures leave the window, answers are prompt again.
	if d := th.fail("192.0.2.1", now.Add(2*time.Minute)); d != 0 {
		t.Fatalf("after the window: delay %v", d)
	}
}

// APIRoute matches exactly what the handler serves, so telemetry never names a path
// the handler answers 404 by the API's route.
func TestAPIRoute(t *testing.T) {
	tests := []struct {
		base, path string
		want       bool
	}{
		{"", "/restapi/API/directoryObjects/groupmembers/", true},
		{"/", "/api/directoryObjects/groupMembers", true},
		// U+017F folds to "s" in Unicode, not in the handler.
		{"", "/restApi/api/directoryObjects/groupMember\u017f", false},
		{"", "/restApi/api/directoryObjects/groupMembers//", false},
	}
	for _, tt := range tests {
		if _, got := APIRoute(tt.base, tt.path); got != tt.want {
			t.Errorf("APIRoute(%q, %q) = %v, want %v", tt.base, tt.path, got, tt.want)
		}
	}
}

// Concurrent sign-ins take their times before the throttle's lock, so a reservation
// may find the address's oldest attempt later than its own time: the wait it is
// told is still at most the window (Retry-After never exceeds it).
func TestThrottleReserveWaitAtMostWindow(t *testing.T) {
	th := newThrottle(ThrottleConfig{MaxFailures: 2, Window: time.Minute, MaxClients: 10})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 2 {
		if _, ok := th.reserve("a", t0.Add(time.Second+time.Duration(i))); !ok {
			t.Fatalf("reservation %d refused", i)
		}
	}
	wait, ok := th.reserve("a", t0)
	if ok {
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
	th := newThrottle(ThrottleConfig{MaxFailures: 2, MaxClientSignInFailures: 3, Window: time.Minute, MaxClients: 10}.withDefaults())
	const a = "192.0.2.1"
	for i := range 3 {
		if _, _, ok := th.reserveSignIn(a, a+" name"+strconv.Itoa(i), t0.Add(time.Duration(i)*time.Second)); !ok {
			t.Fatalf("check %d refused", i+1)
		}
	}
	wait, clientBlocked, ok := th.reserveSignIn(a, a+" another", t0.Add(10*time.Second))
	if ok || !clientBlocked || wait != 50*time.Second {
		t.Fatalf("fourth name: ok %v clientBlocked %v wait %v; want refused for the address, 50s", ok, clientBlocked, wait)
	}
	if _, _, ok := th.reserveSignIn("192.0.2.2", "192.0.2.2 another", t0.Add(10*time.Second)); !ok {
		t.Errorf("another address was refused")
	}
	// A success gives its place back.
	th.releaseSignIn(a, a+" name2", t0.Add(2*time.Second))
	if _, _, ok := th.reserveSignIn(a, a+" another", t0.Add(11*time.Second)); !ok {
		t.Errorf("refused after a place was given back")
	}
	if _, clientBlocked, blocked := th.signInBlocked(a, a+" yet another", t0.Add(12*time.Second)); !blocked || !clientBlocked {
		t.Errorf("signInBlocked: %v %v, want the address blocked", blocked, clientBlocked)
	}
	if _, _, ok := th.reserveSignIn(a, a+" another", t0.Add(time.Minute)); !ok {
		t.Errorf("refused after the window")
	}
}
