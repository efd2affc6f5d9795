package session

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dirgate/dirgate/test/harness/redistest"
	"github.com/redis/go-redis/v9"
)

// TestRedisWriterCanReplay documents what the HMAC does not prevent (docs/auth.md,
// "What Redis holds"): someone who can read and write Redis can put back a record
// they copied earlier under the same key. A revoked token's record makes the token
// work again, and a session's record from before its exchange lets the session be
// exchanged again, each only until the expiry sealed in the record, and only for
// whoever holds the token or session id (Redis holds neither). Putting back the
// pre-exchange record also drops the link to the first token, so that ending the
// session no longer revokes it.
func TestRedisWriterCanReplay(t *testing.T) {
	srv := redistest.Start(t)
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { raw.Close() })
	ctx := context.Background()
	clk := &clock{now: time.Now()}
	s := newStore(t, NewRedisBackend(raw, "p:", time.Second), clk, nil) // sessions 1 min, tokens 2 min
	get := func(key string) string {
		t.Helper()
		v, err := raw.Get(ctx, "p:"+key).Result()
		if err != nil {
			t.Fatalf("copy %s: %v", key, err)
		}
		return v
	}
	put := func(key, v string) {
		t.Helper()
		// No TTL: the writer controls Redis's expiry, not the sealed one.
		if err := raw.Set(ctx, "p:"+key, v, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}

	ses, err := s.CreateSession(ctx, "guid-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	skey := s.name(kindSession, ses.ID)
	unused := get(skey)
	_, tok, err := s.Exchange(ctx, ses.ID)
	if err != nil {
		t.Fatal(err)
	}
	tkey := s.name(kindToken, tok.Token)
	tokenRecord := get(tkey)

	// A revocation undone.
	if err := s.RevokeToken(ctx, tok.Token); err != nil {
		t.Fatal(err)
	}
	put(tkey, tokenRecord)
	if got, err := s.Lookup(ctx, tok.Token); err != nil || got.Subject != "guid-1" {
		t.Errorf("a revoked token's record put back: %+v %v; the test expects it to verify again", got, err)
	}

	// A used session exchanged again, and the first token no longer linked.
	put(skey, unused)
	_, tok2, err := s.Exchange(ctx, ses.ID)
	if err != nil || tok2.Token == "" || tok2.Token == tok.Token {
		t.Errorf("a session's pre-exchange record put back: %+v %v; the test expects a second token", tok2, err)
	}
	if err := s.EndSession(ctx, ses.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Lookup(ctx, tok2.Token); !errors.Is(err, ErrUnknown) {
		t.Errorf("the second token after the session ended: %v", err)
	}
	if _, err := s.Lookup(ctx, tok.Token); err != nil {
		t.Errorf("the first token after the session ended: %v; the test expects it unlinked, still valid", err)
	}

	// Neither outlives the expiry sealed in its record, whatever Redis's TTL says.
	put(skey, unused)
	clk.Advance(time.Minute)
	if _, _, err := s.Exchange(ctx, ses.ID); !errors.Is(err, ErrUnknown) {
		t.Errorf("a session record put back after its sealed expiry: %v", err)
	}
	clk.Advance(time.Minute)
	put(tkey, tokenRecord)
	if _, err := s.Lookup(ctx, tok.Token); !errors.Is(err, ErrUnknown) {
		t.Errorf("a token record put back after its sealed expiry: %v", err)
	}
}
