package session

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
)

// TestMemoryBoundPerAccount: one account cannot hold more than its bound of new
// sessions in process; other accounts are not affected; its sessions' exchanges
// still find room (at most twice the bound in all); ending, revoking and expiry
// give places back.
func TestMemoryBoundPerAccount(t *testing.T) {
	clk := &clock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	b := NewMemoryBackend(0)
	b.now = clk.Now
	b.SetMaxPerAccount(3)
	s := newStore(t, b, clk, nil)
	ctx := context.Background()
	var ids []string
	for i := range 3 {
		ses, err := s.CreateSession(ctx, "guid-a", 0)
		if err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
		ids = append(ids, ses.ID)
	}
	if _, err := s.CreateSession(ctx, "guid-a", 0); !errors.Is(err, ErrAccountFull) {
		t.Fatalf("a fourth session: %v, want ErrAccountFull", err)
	}
	if _, err := s.CreateSession(ctx, "guid-b", 0); err != nil {
		t.Fatalf("another account: %v", err)
	}
	var toks []string
	for _, id := range ids {
		_, tok, err := s.Exchange(ctx, id)
		if err != nil {
			t.Fatalf("exchange at the bound: %v", err)
		}
		toks = append(toks, tok.Token)
	}
	if n := len(b.owners["guid-a"]); n != 6 {
		t.Errorf("account a holds %d records, want 6 (3 used sessions, 3 tokens)", n)
	}
	// Ending a session frees it and its token; still 4 records, over the bound.
	if err := s.EndSession(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateSession(ctx, "guid-a", 0); !errors.Is(err, ErrAccountFull) {
		t.Errorf("with 4 records: %v, want ErrAccountFull", err)
	}
	for _, tok := range toks[1:] {
		s.RevokeToken(ctx, tok)
	}
	if _, err := s.CreateSession(ctx, "guid-a", 0); err != nil {
		t.Errorf("with 2 used sessions left: %v", err)
	}
	if _, err := s.CreateSession(ctx, "guid-a", 0); !errors.Is(err, ErrAccountFull) {
		t.Errorf("with 2 used sessions and a new one: %v, want ErrAccountFull", err)
	}
	// Once the sessions have expired, their places are free again.
	clk.Advance(time.Minute)
	if _, err := s.CreateSession(ctx, "guid-a", 0); err != nil {
		t.Errorf("after expiry: %v", err)
	}
	// Nothing is left behind for an account without records.
	for _, k := range []string{"guid-b"} {
		for key := range b.owners[k] {
			b.Del(ctx, key)
		}
		if _, ok := b.owners[k]; ok {
			t.Errorf("account %s still listed without records", k)
		}
	}
}

// TestMemoryBoundOverall: the global bound holds beside the per-account one.
func TestMemoryBoundOverall(t *testing.T) {
	b := NewMemoryBackend(4)
	s := newStore(t, b, nil, nil)
	ctx := context.Background()
	for i := range 4 {
		if _, err := s.CreateSession(ctx, "guid-"+string(rune('a'+i)), 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.CreateSession(ctx, "guid-z", 0); !errors.Is(err, ErrFull) {
		t.Errorf("beyond the global bound: %v, want ErrFull", err)
	}
}

// TestServiceAccountFull: a sign-in beyond the account's bound is 429, not a
// refusal of the password (and not 503: the store is up).
func TestServiceAccountFull(t *testing.T) {
	b := NewMemoryBackend(0)
	f := newFixture(t, b, nil)
	b.SetMaxPerAccount(2)
	ctx := context.Background()
	name, _ := dirgate.ParseSignInName("dana.admin@corp.example.com")
	for i := range 2 {
		if _, err := f.svc.CreateSession(ctx, name, "Right-1"); err != nil {
			t.Fatalf("sign-in %d: %v", i, err)
		}
	}
	_, err := f.svc.CreateSession(ctx, name, "Right-1")
	if dirgate.ErrorCode(err) != dirgate.ETOOMANY {
		t.Errorf("beyond the bound: %v (code %s), want tooManyRequests", err, dirgate.ErrorCode(err))
	}
	other, _ := dirgate.ParseSignInName("hugo.helpdesk@corp.example.com")
	if _, err := f.svc.CreateSession(ctx, other, "Right-2"); err != nil {
		t.Errorf("another account: %v", err)
	}
}
