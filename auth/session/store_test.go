package session

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dirgate/dirgate/internal/seal"
	"github.com/dirgate/dirgate/test/harness/redistest"
	"github.com/redis/go-redis/v9"
)

var secret = []byte("0123456789abcdef0123456789abcdef")

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// backends runs f against the in-process backend and a real redis-server.
func backends(t *testing.T, f func(t *testing.T, b Backend, raw *redis.Client)) {
	t.Run("memory", func(t *testing.T) { f(t, NewMemoryBackend(0), nil) })
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t)
		c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
		t.Cleanup(func() { c.Close() })
		f(t, NewRedisBackend(c, "test:auth:", time.Second), c)
	})
}

func newStore(t *testing.T, b Backend, clk *clock, log *bytes.Buffer) *Store {
	t.Helper()
	cfg := Config{Backend: b, Secret: secret, SessionTTL: time.Minute, TokenTTL: 2 * time.Minute}
	if clk != nil {
		cfg.Now = clk.Now
	}
	if log != nil {
		cfg.Logger = slog.New(slog.NewTextHandler(log, nil))
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestLifecycle(t *testing.T) {
	backends(t, func(t *testing.T, b Backend, raw *redis.Client) {
		ctx := context.Background()
		s := newStore(t, b, nil, nil)
		ses, err := s.CreateSession(ctx, "guid-1", 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(ses.ID) != 43 {
			t.Errorf("session id %q: want 256 bits in 43 base64url characters", ses.ID)
		}
		_, tok, err := s.Exchange(ctx, ses.ID)
		if err != nil || !strings.HasPrefix(tok.Token, TokenPrefix) || len(tok.Token) != len(TokenPrefix)+43 {
			t.Fatalf("exchange: %+v %v", tok, err)
		}
		if _, _, err := s.Exchange(ctx, ses.ID); !errors.Is(err, ErrUnknown) {
			t.Errorf("second exchange: %v, want ErrUnknown (a session gives one token)", err)
		}
		got, err := s.Lookup(ctx, tok.Token)
		if err != nil || got.Subject != "guid-1" {
			t.Fatalf("lookup: %+v %v", got, err)
		}
		if raw != nil {
			// Redis holds hashes only: neither the id nor the token, in keys or values.
			keys, _ := raw.Keys(ctx, "*").Result()
			for _, k := range keys {
				v, _ := raw.Get(ctx, k).Result()
				for _, secret := range []string{ses.ID, tok.Token, strings.TrimPrefix(tok.Token, TokenPrefix)} {
					if strings.Contains(k+v, secret) {
						t.Errorf("redis key %s holds a secret value", k)
					}
				}
				if ttl, _ := raw.TTL(ctx, k).Result(); ttl <= 0 || ttl > 2*time.Minute {
					t.Errorf("redis key %s has TTL %v", k, ttl)
				}
			}
			if len(keys) != 2 {
				t.Errorf("redis keys %q, want the used session and the token", keys)
			}
		}
		// Ending the session revokes the token it gave.
		if err := s.EndSession(ctx, ses.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Lookup(ctx, tok.Token); !errors.Is(err, ErrUnknown) {
			t.Errorf("token after its session ended: %v", err)
		}
		// Revocation, and ending what is unknown, are no errors.
		ses2, _ := s.CreateSession(ctx, "guid-2", 0)
		_, tok2, _ := s.Exchange(ctx, ses2.ID)
		if err := s.RevokeToken(ctx, tok2.Token); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Lookup(ctx, tok2.Token); !errors.Is(err, ErrUnknown) {
			t.Errorf("revoked token: %v", err)
		}
		if err := s.RevokeToken(ctx, "dgt_nothing"); err != nil {
			t.Error(err)
		}
		if err := s.EndSession(ctx, "nothing"); err != nil {
			t.Error(err)
		}
	})
}

func TestMustChangeSessionGivesNoToken(t *testing.T) {
	backends(t, func(t *testing.T, b Backend, _ *redis.Client) {
		ctx := context.Background()
		s := newStore(t, b, nil, nil)
		ses, _ := s.CreateSession(ctx, "", 1)
		got, tok, err := s.Exchange(ctx, ses.ID)
		if err != nil || got.ChangePasswordReason != 1 || tok.Token != "" {
			t.Errorf("exchange: %+v %+v %v", got, tok, err)
		}
	})
}

func TestExpiry(t *testing.T) {
	clk := &clock{now: time.Now()}
	s := newStore(t, NewMemoryBackend(0), clk, nil)
	ctx := context.Background()
	ses, _ := s.CreateSession(ctx, "guid-1", 0)
	clk.Advance(time.Minute)
	if _, _, err := s.Exchange(ctx, ses.ID); !errors.Is(err, ErrUnknown) {
		t.Errorf("expired session: %v", err)
	}
	ses, _ = s.CreateSession(ctx, "guid-1", 0)
	_, tok, _ := s.Exchange(ctx, ses.ID)
	clk.Advance(2*time.Minute - time.Nanosecond)
	if _, err := s.Lookup(ctx, tok.Token); err != nil {
		t.Errorf("token just before expiry: %v", err)
	}
	clk.Advance(time.Nanosecond)
	if _, err := s.Lookup(ctx, tok.Token); !errors.Is(err, ErrUnknown) {
		t.Errorf("expired token: %v", err)
	}
}

// TestRedisWriterCannotMintOrAlter: with write access to Redis but not the secret,
// records can be forged, altered, moved or replayed under another secret; each is
// refused and logged.
func TestRedisWriterCannotMintOrAlter(t *testing.T) {
	srv := redistest.Start(t)
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { raw.Close() })
	ctx := context.Background()
	var log bytes.Buffer
	s := newStore(t, NewRedisBackend(raw, "p:", time.Second), nil, &log)
	ses, _ := s.CreateSession(ctx, "guid-victim", 0)
	_, tok, _ := s.Exchange(ctx, ses.ID)
	tkey := "p:" + s.name(kindToken, tok.Token)
	good, _ := raw.Get(ctx, tkey).Result()

	forged := TokenPrefix + "forged"
	fkey := "p:" + s.name(kindToken, forged) // an attacker cannot compute this; the test can
	exp := time.Now().Add(time.Hour).UnixNano()
	other := newStore(t, NewMemoryBackend(0), nil, nil)
	other.records = seal.NewText([]byte("another secret of 32 bytes at least!"), "dirgate session records v1")
	underOther, _ := other.seal(fkey[len("p:"):], record{Kind: kindToken, Subject: "guid-admin", Expires: exp})
	sessionUnderToken, _ := s.seal(s.name(kindSession, "x"), record{Kind: kindToken, Subject: "guid-admin", Expires: exp})

	for _, c := range []struct{ name, key, value string }{
		{"unsealed", fkey, `{"k":"t","sub":"guid-admin","exp":` + itoa(exp) + `}`},
		{"sealed under another secret", fkey, underOther},
		{"a valid record moved to another name", fkey, good},
		{"sealed for another name", fkey, sessionUnderToken},
		{"altered subject", tkey, strings.Replace(good, "guid-victim", "guid-admin0", 1)},
		{"altered expiry", tkey, alterExp(good)},
	} {
		if err := raw.Set(ctx, c.key, c.value, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
		token := forged
		if c.key == tkey {
			token = tok.Token
		}
		if p, err := s.Lookup(ctx, token); !errors.Is(err, ErrUnknown) {
			t.Errorf("%s: accepted as %+v (%v)", c.name, p, err)
		}
	}
	if n := strings.Count(log.String(), "failed its HMAC check"); n != 6 {
		t.Errorf("%d refusals logged, want 6:\n%s", n, log.String())
	}
	if strings.Contains(log.String(), tok.Token) || strings.Contains(log.String(), "guid-victim") {
		t.Errorf("the log holds a record's content:\n%s", log.String())
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// alterExp pushes the expiry in a sealed record's JSON one digit later.
func alterExp(v string) string {
	i := strings.Index(v, `"exp":`) + len(`"exp":`)
	return v[:i] + "9" + v[i:]
}

// TestOneExchangeWins: of concurrent exchanges of one session (two replicas), one
// gets a token.
func TestOneExchangeWins(t *testing.T) {
	backends(t, func(t *testing.T, b Backend, _ *redis.Client) {
		ctx := context.Background()
		s := newStore(t, b, nil, nil)
		for range 20 {
			ses, _ := s.CreateSession(ctx, "guid-1", 0)
			var wg sync.WaitGroup
			var mu sync.Mutex
			won := 0
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if _, tok, err := s.Exchange(ctx, ses.ID); err == nil && tok.Token != "" {
						mu.Lock()
						won++
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			if won != 1 {
				t.Fatalf("%d exchanges got a token", won)
			}
		}
	})
}

// TestRedisFailures: the shared failure counts of the throttle (throttle.Counter)
// in a real Redis, as two replicas see them.
func TestRedisFailures(t *testing.T) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	now := time.Now()
	a := NewRedisFailures(c, "p:", time.Second, time.Minute)
	b := NewRedisFailures(c, "p:", time.Second, time.Minute) // another replica
	// The key is the one every version of dirgate counts in, so that a rolling
	// upgrade keeps the counts.
	if k := a.key("192.0.2.1"); k != "p:fail:37fcff24bf62035b2b08020afc08b4fe" {
		t.Errorf("key %q", k)
	}
	if _, blocked, err := a.Blocked(ctx, "192.0.2.1", 1, now); blocked || err != nil {
		t.Fatalf("fresh: %v %v", blocked, err)
	}
	// Fail counts whatever the limit, and is blocked once the count passes it.
	for i, f := range []*RedisFailures{a, b, a} {
		n, wait, blocked, err := f.Fail(ctx, "192.0.2.1", 2, now)
		if n != i+1 || blocked != (i == 2) || err != nil {
			t.Fatalf("failure %d: %d %v %v", i+1, n, blocked, err)
		}
		if blocked && (wait <= 59*time.Second || wait > time.Minute) {
			t.Errorf("failure %d: wait %v", i+1, wait)
		}
	}
	wait, blocked, err := b.Blocked(ctx, "192.0.2.1", 3, now)
	if !blocked || wait <= 59*time.Second || wait > time.Minute || err != nil {
		t.Errorf("blocked %v window left %v %v", blocked, wait, err)
	}
	if _, blocked, _ := b.Blocked(ctx, "192.0.2.2", 1, now); blocked {
		t.Errorf("another address is blocked")
	}
	// The window does not slide with each failure: it starts at the first.
	if d, _ := c.PTTL(ctx, a.key("192.0.2.1")).Result(); d > time.Minute {
		t.Errorf("TTL %v", d)
	}
	// Take stops at the limit without counting; an attempt given back leaves the
	// window running; none is taken below 0, nor from a key without a window.
	const pair = "192.0.2.1 0123"
	var gives []func(context.Context) error
	for i, f := range []*RedisFailures{a, b} {
		n, _, give, err := f.Take(ctx, pair, 2, now)
		if n != i+1 || give == nil || err != nil {
			t.Fatalf("attempt %d: %d %v", i+1, n, err)
		}
		gives = append(gives, give)
	}
	if _, wait, give, err := a.Take(ctx, pair, 2, now); give != nil || wait <= 59*time.Second || err != nil {
		t.Fatalf("a third attempt: taken %v, wait %v, %v", give != nil, wait, err)
	}
	if n, _ := c.Get(ctx, a.key(pair)).Int(); n != 2 {
		t.Errorf("a refused attempt was counted: %d", n)
	}
	if err := gives[1](ctx); err != nil {
		t.Fatal(err)
	}
	if n, _, give, _ := a.Take(ctx, pair, 2, now); n != 2 || give == nil {
		t.Errorf("after an attempt given back: %d, taken %v", n, give != nil)
	}
	for range 3 {
		if err := gives[0](ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := c.Get(ctx, a.key(pair)).Int(); n != 0 {
		t.Errorf("after more given back than counted: %d", n)
	}
	if ttl, _ := c.PTTL(ctx, a.key(pair)).Result(); ttl <= 0 {
		t.Errorf("giving back stopped the window: %v", ttl)
	}
	c.Del(ctx, a.key(pair))
	if err := gives[0](ctx); err != nil {
		t.Fatal(err)
	}
	if ex, _ := c.Exists(ctx, a.key(pair)).Result(); ex != 0 {
		t.Errorf("giving back created a key without a window")
	}
}

// TestRedisFailuresTakeAtOnce: of attempts taken at once on two replicas, exactly
// the limit are taken, and the refused ones leave no count: the script judges and
// takes in one step.
func TestRedisFailuresTakeAtOnce(t *testing.T) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 40})
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	replicas := []*RedisFailures{NewRedisFailures(c, "p:", 5*time.Second, time.Minute), NewRedisFailures(c, "p:", 5*time.Second, time.Minute)}
	const limit, n = 6, 40
	var taken atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			if _, _, give, err := replicas[i%2].Take(ctx, "192.0.2.1 pair", limit, time.Now()); err != nil {
				t.Error(err)
			} else if give != nil {
				taken.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	if got, _ := c.Get(ctx, replicas[0].key("192.0.2.1 pair")).Int(); taken.Load() != limit || got != limit {
		t.Errorf("%d taken, count %d; want %d and %d", taken.Load(), got, limit, limit)
	}
}
