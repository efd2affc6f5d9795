package writejournal

import (
	"encoding/hex"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/redisconn"
	"github.com/redis/go-redis/v9"
)

// The stored form of one write: what Redis holds once storedWrite is recorded for
// 10 minutes at the fake clock's time with testSecret, by this package or by an
// earlier dirgate (these bytes were read from Redis after an earlier version's
// Record, not computed here): the keys, the hash field's value (the seal's tag, the
// HMAC under internal/seal's derivation from the secret, the JSON) and its score in
// the sorted set, and the SHA-1 of the two scripts as Redis caches them.
const (
	storedKey   = "dirgate:{0a1b2c3d-0000-4000-a000-000000000001}:w"
	storedOrder = "dirgate:{0a1b2c3d-0000-4000-a000-000000000001}:w:at"
	storedMAC   = "f4dd29dbd7069225da219f12c5189c5d48dca234b361f44eb6193c124c03d76a"
	storedJSON  = `{"group":"0a1b2c3d-0000-4000-a000-000000000001","member":"0a1b2c3d-0000-4000-a000-0000000000aa","added":true,` +
		`"server":"ldaps://dc1.corp.example.com:636","at":"2025-01-02T03:04:05.123456789Z","origin":"0a1b2c3d-0000-4000-a000-0000000000dc",` +
		`"usn":4711,"until":"2025-01-02T03:14:05.123456789Z"}`
	storedScore      = 1735787045123456
	storedRecordSHA1 = "dc3ee4f1cd90872b9cfb8842bbdaf912b0de669d"
	storedReadSHA1   = "a6f302bbbf97068bc1036e9fce2c8a476b34817d"
)

func storedWrite(clock *fakeClock) dirgate.MembershipWrite {
	return dirgate.MembershipWrite{Group: "0a1b2c3d-0000-4000-a000-000000000001", Member: "0a1b2c3d-0000-4000-a000-0000000000aa",
		Added: true, Server: "ldaps://dc1.corp.example.com:636", At: clock.Now().Add(123456789 * time.Nanosecond),
		Origin: "0a1b2c3d-0000-4000-a000-0000000000dc", USN: 4711}
}

func storedValue(t *testing.T) string {
	t.Helper()
	mac, err := hex.DecodeString(storedMAC)
	if err != nil {
		t.Fatal(err)
	}
	return "h1" + string(mac) + storedJSON
}

// TestStoredFormIsFixed: instances of two dirgate versions share one Redis during a
// rolling upgrade, so the journal writes exactly the keys, values and scripts that
// earlier versions wrote, and reads what they wrote: a write recorded now is the
// stored form above byte for byte, and the stored form, put into Redis as it is,
// is read back as the write.
func TestStoredFormIsFixed(t *testing.T) {
	if got := recordScript.Hash(); got != storedRecordSHA1 {
		t.Errorf("the record script changed: SHA-1 %s, want %s", got, storedRecordSHA1)
	}
	if got := readScript.Hash(); got != storedReadSHA1 {
		t.Errorf("the read script changed: SHA-1 %s, want %s", got, storedReadSHA1)
	}
	clock := newFakeClock()
	w := storedWrite(clock)

	t.Run("written", func(t *testing.T) {
		r := newRedis(t)
		j := r.journal(t, clock, nil)
		if key, order := j.keys(w.Group); key != storedKey || order != storedOrder {
			t.Errorf("keys %q and %q, want %q and %q", key, order, storedKey, storedOrder)
		}
		record(t, j, w, 10*time.Minute)
		if got := r.rc.HGet(t.Context(), storedKey, w.Member).Val(); got != storedValue(t) {
			t.Errorf("stored value\n %q\nwant\n %q", got, storedValue(t))
		}
		if got := r.rc.ZScore(t.Context(), storedOrder, w.Member).Val(); got != storedScore {
			t.Errorf("stored score %f, want %d", got, int64(storedScore))
		}
	})

	t.Run("read", func(t *testing.T) {
		r := newRedis(t)
		log, logged := logTo()
		j := r.journal(t, clock, log)
		if err := r.rc.HSet(t.Context(), storedKey, w.Member, storedValue(t)).Err(); err != nil {
			t.Fatal(err)
		}
		if err := r.rc.ZAdd(t.Context(), storedOrder, redisZ(storedScore, w.Member)).Err(); err != nil {
			t.Fatal(err)
		}
		sameWrites(t, recent(t, j, w.Group), []dirgate.MembershipWrite{w})
		if l := logged(); l != "" {
			t.Errorf("the stored form was refused:\n%s", l)
		}
		// Under another secret it is refused: the HMAC is checked, not skipped.
		other := open(t, redisconn.Config{Addrs: []string{r.srv.Addr()}}, Config{Secret: []byte("another secret of at least 32 bytes......"), now: clock.Now})
		sameWrites(t, recent(t, other, w.Group), nil)
	})
}

func redisZ(score float64, member string) redis.Z { return redis.Z{Score: score, Member: member} }
