package throttle

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
)

// counts is a shared Counter as every replica sees it, in a fixed window of 30 s,
// as the Redis one counts; down makes every call fail.
type counts struct {
	mu   sync.Mutex
	n    map[string]int
	down bool
}

var errDown = errors.New("shared count down")

func (c *counts) Fail(_ context.Context, key string, limit int, _ time.Time) (int, time.Duration, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down {
		return 0, 0, false, errDown
	}
	c.n[key]++
	return c.n[key], 30 * time.Second, c.n[key] > limit, nil
}

func (c *counts) Take(_ context.Context, key string, limit int, _ time.Time) (int, time.Duration, func(context.Context) error, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down {
		return 0, 0, nil, errDown
	}
	if c.n[key] >= limit {
		return c.n[key], 30 * time.Second, nil, nil
	}
	c.n[key]++
	return c.n[key], 0, func(context.Context) error { c.mu.Lock(); c.n[key]--; c.mu.Unlock(); return nil }, nil
}

func (c *counts) Blocked(_ context.Context, key string, limit int, _ time.Time) (time.Duration, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down {
		return 0, false, errDown
	}
	return 30 * time.Second, c.n[key] >= limit, nil
}

// TestBothAcrossReplicas: two throttles sharing a count refuse together what
// neither has counted to its limit alone, and a success gives back in both.
func TestBothAcrossReplicas(t *testing.T) {
	shared := &counts{n: map[string]int{}}
	clk := &clock{now: t0}
	cfg := Config{MaxFailures: 2, SlowAfter: 1, Window: time.Minute, Shared: shared, Now: clk.Now}
	a, _ := New(cfg)
	b, _ := New(cfg)
	alice := dirgate.SignInName{User: "alice", Domain: "corp.example.com"}
	refused := dirgate.Errorf(dirgate.EFORBIDDEN, "wrong password")
	for i, th := range []*Throttle{a, b} {
		finish, v := th.StartSignIn(ctx, "192.0.2.1", alice)
		if finish == nil {
			t.Fatalf("check %d refused: %+v", i+1, v)
		}
		// The hold follows the larger count: the shared one on the second replica.
		if hold, want := finish(ctx, refused), []time.Duration{DefaultDelay, 2 * DefaultDelay}[i]; hold != want {
			t.Errorf("check %d hold %v, want %v", i+1, hold, want)
		}
	}
	for i, th := range []*Throttle{a, b} {
		if _, v := th.StartSignIn(ctx, "192.0.2.1", alice); v.Refused != dirgate.ThrottledAccount || v.RetryAfter != 30*time.Second {
			t.Errorf("replica %d after 1+1 failures: %+v", i, v)
		}
	}
	// A success gives back its place in both counts.
	bob := dirgate.SignInName{User: "bob", Domain: "corp.example.com"}
	finish, _ := a.StartSignIn(ctx, "192.0.2.1", bob)
	finish(ctx, nil)
	if n := shared.n[signInKey("192.0.2.1", bob)]; n != 0 {
		t.Errorf("bob's shared count after a success: %d", n)
	}
	// Session ids: the third failure on either replica is refused.
	a.SessionIDFailed(ctx, "192.0.2.9")
	b.SessionIDFailed(ctx, "192.0.2.9")
	// Refused by the shared count; the wait is the longer of the two windows'.
	if v := a.SessionIDFailed(ctx, "192.0.2.9"); v.Refused != dirgate.ThrottledAddress || v.RetryAfter != time.Minute {
		t.Errorf("a third unknown session id over two replicas: %+v", v)
	}
	// Tokens are counted in process only.
	a.TokenFailed(ctx, "192.0.2.7")
	if _, ok := shared.n["192.0.2.7"]; ok {
		t.Errorf("a bad token reached the shared count")
	}
}

// TestBothSharedDown: a shared count that fails loses only itself: the process's
// count still bounds, and the failure is logged at debug level.
func TestBothSharedDown(t *testing.T) {
	var log bytes.Buffer
	shared := &counts{n: map[string]int{}, down: true}
	th, _ := New(Config{MaxFailures: 2, SlowAfter: 100, Window: time.Minute, Shared: shared,
		Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	alice := dirgate.SignInName{User: "alice", Domain: "corp.example.com"}
	for i := range 2 {
		finish, v := th.StartSignIn(ctx, "192.0.2.1", alice)
		if finish == nil {
			t.Fatalf("check %d refused: %+v", i+1, v)
		}
		finish(ctx, dirgate.Errorf(dirgate.EFORBIDDEN, "no"))
	}
	if _, v := th.StartSignIn(ctx, "192.0.2.1", alice); v.Refused != dirgate.ThrottledAccount {
		t.Errorf("after 2 failures with the shared count down: %+v", v)
	}
	if !strings.Contains(log.String(), "shared sign-in failure count unavailable") {
		t.Errorf("nothing logged: %s", log.String())
	}
}
