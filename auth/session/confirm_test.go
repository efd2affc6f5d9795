package session

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dirgate/dirgate/test/harness/redistest"
	"github.com/redis/go-redis/v9"
)

// TestUnconfirmedRevocationStaysRevoked runs a real primary and replica. A
// revocation the replica confirms is simply done. One it does not confirm in time
// (the replica is busy: DEBUG SLEEP) is kept: when Redis then holds the token's
// record again (as a promoted replica that missed the deletion would), the revoking
// store and, through its announcement, another store refuse the token all the same,
// and the revoking store deletes the record again once told Redis's history changed.
// Without confirmation the restored record makes the token work again: the test can
// fail.
func TestUnconfirmedRevocationStaysRevoked(t *testing.T) {
	ctx := t.Context()
	primary := redistest.Start(t)
	replica := redistest.StartReplica(t, primary, "--enable-debug-command", "yes")
	raw := redis.NewClient(&redis.Options{Addr: primary.Addr()})
	t.Cleanup(func() { raw.Close() })
	store := func(replicas int) (*Store, chan struct{}) {
		c := redis.NewClient(&redis.Options{Addr: primary.Addr()})
		t.Cleanup(func() { c.Close() })
		b := NewRedisBackend(c, "test:auth:", time.Second)
		b.SetConfirmation(Confirmation{Replicas: replicas, Timeout: 200 * time.Millisecond})
		s := newStore(t, b, nil, nil)
		changed := make(chan struct{}, 1)
		runCtx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		go s.Run(runCtx, time.Hour, changed) // retried only when told, below
		return s, changed
	}
	a, aChanged := store(1)
	b, _ := store(1)
	unconfirming, _ := store(0)
	signIn := func(s *Store) (string, string) {
		t.Helper()
		ses, err := s.CreateSession(ctx, "11111111-2222-3333-4444-555555555555", 0)
		if err != nil {
			t.Fatal(err)
		}
		_, tok, err := s.Exchange(ctx, ses.ID)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := raw.Get(ctx, "test:auth:"+s.name(kindToken, tok.Token)).Result()
		if err != nil {
			t.Fatal(err)
		}
		return tok.Token, rec
	}
	refused := func(s *Store, tok string) bool {
		_, err := s.Lookup(ctx, tok)
		return err == ErrUnknown
	}

	// Confirmed: nothing is kept.
	tok, _ := signIn(a)
	if err := a.RevokeToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	if n := a.own.len(); n != 0 {
		t.Fatalf("a confirmed revocation is kept (%d)", n)
	}

	// Unconfirmed: the replica sleeps through the WAIT.
	for _, s := range []*Store{a, unconfirming} {
		tok, rec := signIn(s)
		slept := make(chan error, 1)
		go func() { _, err := replica.Do("DEBUG", "SLEEP", "0.6"); slept <- err }()
		time.Sleep(100 * time.Millisecond) // the replica is asleep
		if err := s.RevokeToken(ctx, tok); err != nil {
			t.Fatal(err)
		}
		if err := <-slept; err != nil {
			t.Fatal(err)
		}
		// Redis goes back in time: the record is there again.
		key := "test:auth:" + s.name(kindToken, tok)
		if err := raw.Set(ctx, key, rec, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		if s == unconfirming {
			if refused(s, tok) || refused(b, tok) {
				t.Fatal("without confirmation the restored record was refused: the test proves nothing")
			}
			continue
		}
		if n := a.own.len(); n != 1 {
			t.Fatalf("unconfirmed revocations kept: %d, want 1", n)
		}
		if !refused(a, tok) {
			t.Fatal("the revoking store accepted its unconfirmed revoked token")
		}
		waitUntil(t, "the other store to refuse the token", func() bool { return refused(b, tok) })
		// Told that Redis's history changed, the store deletes again. One retry may
		// itself go unconfirmed on a loaded machine (the WAIT's 200 ms), so the news is
		// repeated while waiting, as each further change would.
		waitUntil(t, "the deletion to be confirmed", func() bool {
			select {
			case aChanged <- struct{}{}:
			default:
			}
			return a.own.len() == 0
		})
		if n, _ := raw.Exists(ctx, key).Result(); n != 0 {
			t.Fatal("the record is still in Redis after the confirmed deletion")
		}
		if !refused(a, tok) || !refused(b, tok) {
			t.Fatal("the token works again after its deletion was confirmed")
		}
	}
}

// FuzzParseAnnouncement: announcements come from a Redis channel anyone with
// Redis access can publish on; only well-formed record names are kept.
func FuzzParseAnnouncement(f *testing.F) {
	f.Add("1700000000000000000 t:" + strings.Repeat("ab", 32))
	f.Add("x t:00")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		a, ok := parseAnnouncement(s)
		if !ok {
			return
		}
		if len(a.Key) != 66 || (a.Key[:2] != "t:" && a.Key[:2] != "s:") || a.Expires.UnixNano() <= 0 {
			t.Fatalf("accepted %q as %+v", s, a)
		}
	})
}

func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRevocationWithoutROLE: a Redis user whose ACL refuses ROLE still revokes (the
// record is deleted, no error reaches the client); the deletion counts as
// unconfirmed, so the store keeps refusing the token whatever Redis holds.
func TestRevocationWithoutROLE(t *testing.T) {
	ctx := t.Context()
	srv := redistest.Start(t)
	if _, err := srv.Do("ACL", "SETUSER", "norole", "on", ">pw", "~*", "&*", "+@all", "-role"); err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "norole", Password: "pw"})
	t.Cleanup(func() { c.Close() })
	b := NewRedisBackend(c, "test:auth:", time.Second)
	b.SetConfirmation(Confirmation{Replicas: 1, Timeout: 100 * time.Millisecond})
	s := newStore(t, b, nil, nil)
	ses, err := s.CreateSession(ctx, "11111111-2222-3333-4444-555555555555", 0)
	if err != nil {
		t.Fatal(err)
	}
	_, tok, err := s.Exchange(ctx, ses.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeToken(ctx, tok.Token); err != nil {
		t.Fatalf("revoke without ROLE: %v", err)
	}
	key := "test:auth:" + s.name(kindToken, tok.Token)
	if n, _ := c.Exists(ctx, key).Result(); n != 0 {
		t.Fatal("the record is still in Redis")
	}
	if !s.isRefused(s.name(kindToken, tok.Token)) {
		t.Fatal("the unconfirmed revocation is not kept")
	}
}

// TestExchangeUnknownWithReplicas: with deletions confirmed by a real replica
// (DIRGATE_REDIS_WAIT_REPLICAS=1, the default), exchanging a session id Redis does
// not hold, one never issued or one whose key expired, is ErrUnknown (401), not a
// store failure (503), and ending it is no error: the read-and-delete script's
// empty answer is no failure.
func TestExchangeUnknownWithReplicas(t *testing.T) {
	ctx := t.Context()
	primary := redistest.Start(t)
	replica := redistest.StartReplica(t, primary)
	replica.WaitLinkUp(t, 10*time.Second)
	c := redis.NewClient(&redis.Options{Addr: primary.Addr()})
	t.Cleanup(func() { c.Close() })
	b := NewRedisBackend(c, "test:auth:", time.Second)
	b.SetConfirmation(Confirmation{Replicas: 1, Timeout: time.Second})
	s, err := New(Config{Backend: b, Secret: secret, SessionTTL: 300 * time.Millisecond, TokenTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ses, err := s.CreateSession(ctx, "11111111-2222-3333-4444-555555555555", 0)
	if err != nil {
		t.Fatal(err)
	}
	// The session's key leaves Redis with its lifetime.
	waitUntil(t, "the session's key to expire", func() bool {
		n, err := c.Exists(ctx, "test:auth:"+s.name(kindSession, ses.ID)).Result()
		return err == nil && n == 0
	})
	unknown, err := newSecret()
	if err != nil {
		t.Fatal(err)
	}
	for name, id := range map[string]string{"unknown": unknown, "expired": ses.ID} {
		if _, _, err := s.Exchange(ctx, id); !errors.Is(err, ErrUnknown) {
			t.Errorf("%s session id: %v, want ErrUnknown", name, err)
		}
		// Ending it is no error either (the same read-and-delete).
		if err := s.EndSession(ctx, id); err != nil {
			t.Errorf("ending the %s session: %v", name, err)
		}
	}
	// A live session is still exchanged, its deletion confirmed.
	live, err := s.CreateSession(ctx, "11111111-2222-3333-4444-555555555555", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, tok, err := s.Exchange(ctx, live.ID); err != nil || tok.Token == "" {
		t.Fatalf("live session: %v", err)
	}
	if n := s.own.len(); n != 0 {
		t.Errorf("%d deletions kept as unconfirmed, want 0 (the replica confirms)", n)
	}
}
