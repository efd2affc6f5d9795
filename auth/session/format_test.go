package session

import (
	"context"
	"testing"
	"time"
)

// Records written by an earlier dirgate, byte for byte, under goldenSecret: a
// replica of this version must read them (and write the same), since they live
// in Redis across a rolling upgrade (internal/seal, TextSealer).
const (
	goldenSecret     = "golden secret of at least 32 bytes, for tests"
	goldenSessionKey = "s:768949fb0bab63a1cecf1c6fe28be5c74092cc9acf401decc23a49493579952d"
	goldenTokenKey   = "t:df23396751cd717c5bfb67165dbe71c198dedf9a88afc334bfcfe12184af488c"
	goldenSession    = `v1.JWKUVstnUZoADf9GGJtiHfR2xVHhW_KqNY6_FrQGNlo.{"k":"s","sub":"73e0a89b-84f0-4f42-8cbd-40e4e51f1673","exp":4102444800000000000,"cpr":1}`
	goldenToken      = `v1.KJ0VtE94IiXsJaQi5g8fW7rGKUyZzAy-ueNE1e9nFDA.{"k":"t","sub":"73e0a89b-84f0-4f42-8cbd-40e4e51f1673","exp":4102444800000000000,"link":"s:768949fb0bab63a1cecf1c6fe28be5c74092cc9acf401decc23a49493579952d"}`
	goldenSubject    = "73e0a89b-84f0-4f42-8cbd-40e4e51f1673"
)

// TestRecordFormatUnchanged: names and sealed records are the bytes an earlier
// dirgate wrote, and its records are read; moved or altered, they are refused.
func TestRecordFormatUnchanged(t *testing.T) {
	ctx := context.Background()
	b := NewMemoryBackend(0)
	s, err := New(Config{Backend: b, Secret: []byte(goldenSecret)})
	if err != nil {
		t.Fatal(err)
	}
	sk, tk := s.name(kindSession, "session-id-1"), s.name(kindToken, "dgt_token-1")
	if sk != goldenSessionKey || tk != goldenTokenKey {
		t.Fatalf("names %q %q, want %q %q", sk, tk, goldenSessionKey, goldenTokenKey)
	}
	sv, _ := s.seal(sk, record{Kind: kindSession, Subject: goldenSubject, Expires: 4102444800000000000, Reason: 1})
	tv, _ := s.seal(tk, record{Kind: kindToken, Subject: goldenSubject, Expires: 4102444800000000000, Link: sk})
	if sv != goldenSession || tv != goldenToken {
		t.Fatalf("sealed\n%s\n%s\nwant\n%s\n%s", sv, tv, goldenSession, goldenToken)
	}
	// An earlier replica's token record is honoured.
	if err := b.Set(ctx, tk, goldenToken, time.Hour); err != nil {
		t.Fatal(err)
	}
	if tok, err := s.Lookup(ctx, "dgt_token-1"); err != nil || tok.Subject != goldenSubject {
		t.Fatalf("an earlier record: %+v %v", tok, err)
	}
	// Moved under another name, or altered, it is refused.
	if _, ok := s.open(ctx, goldenSessionKey, kindToken, goldenToken); ok {
		t.Errorf("a token record moved under a session's name was accepted")
	}
	if _, ok := s.open(ctx, goldenTokenKey, kindToken, goldenToken[:len(goldenToken)-3]+`x"}`); ok {
		t.Errorf("an altered record was accepted")
	}
	if err := b.Set(ctx, sk, goldenSession, time.Hour); err != nil {
		t.Fatal(err)
	}
	if r, ok := s.open(ctx, sk, kindSession, goldenSession); !ok || r.Reason != 1 {
		t.Errorf("an earlier session record: %+v %v", r, ok)
	}
}
