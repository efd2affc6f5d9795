package cache

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/redisconn"
	"github.com/dirgate/dirgate/test/harness/redistest"
	"github.com/redis/go-redis/v9"
)

const sealGroup = "CN=Help Desk,OU=Groups,DC=corp,DC=example,DC=com"

var sealSecret = []byte("a cache secret of at least 32 bytes..")

// TestSealedEntries: with a secret, what is in Redis is authenticated. Another
// replica with the secret reads it; an entry changed in Redis, one moved under
// another key, one written unsealed and one sealed under another secret are each
// refused (a miss that refills), never served.
func TestSealedEntries(t *testing.T) {
	srv := redistest.Start(t)
	dir := demo(t)
	cfg := func(secret []byte, log *bytes.Buffer) Config {
		c := Config{Redis: redisClient(t, redisconn.Config{Addrs: []string{srv.Addr()}}), Secret: secret, Timeout: testTimeout}
		if log != nil {
			c.Logger = slog.New(slog.NewTextHandler(log, nil))
		}
		return c
	}
	want, st := newInstance(t, dir, cfg(sealSecret, nil)).list(t, sealGroup, dirgate.ListOptions{})
	if st != dirgate.CacheMiss || len(want) == 0 {
		t.Fatalf("first listing: %s, %d objects", st, len(want))
	}
	if got, st := newInstance(t, dir, cfg(sealSecret, nil)).list(t, sealGroup, dirgate.ListOptions{}); st != dirgate.CacheHit || !sameListing(got, want) {
		t.Fatalf("another replica with the secret: %s", st)
	}

	rc := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rc.Close()
	ctx := t.Context()
	// The listing's entry is the largest value in Redis.
	keys, _ := rc.Keys(ctx, "dirgate:*").Result()
	var key, val string
	for _, k := range keys {
		if v, _ := rc.Get(ctx, k).Result(); len(v) > len(val) {
			key, val = k, v
		}
	}
	if !strings.HasPrefix(val, sealTag) {
		t.Fatalf("largest value %s is not sealed", key)
	}
	victim := want[0].DisplayName
	for _, c := range []struct {
		name, value string
		secret      []byte
	}{
		{"a changed listing", strings.Replace(val, victim, strings.ToUpper(victim), 1), sealSecret},
		{"the value unsealed", val[len(sealTag)+32:], sealSecret},
		{"read under another secret", val, []byte("another secret of at least 32 bytes!!")},
	} {
		if err := rc.Set(ctx, key, c.value, 0).Err(); err != nil {
			t.Fatal(err)
		}
		var log bytes.Buffer
		got, st := newInstance(t, dir, cfg(c.secret, &log)).list(t, sealGroup, dirgate.ListOptions{})
		if st == dirgate.CacheHit || !sameListing(got, want) {
			t.Errorf("%s: served %s", c.name, st)
		}
		if !strings.Contains(log.String(), "does not decode") {
			t.Errorf("%s: not logged:\n%s", c.name, log.String())
		}
		rc.Set(ctx, key, val, 0) // back to the authentic value for the next case
	}
	// Moved under another key: the HMAC covers the key.
	other := key + "x"
	s := newSealer(sealSecret)
	if _, err := s.open(other, val); err == nil {
		t.Error("a value moved to another key opened")
	}
}

// BenchmarkSealedRead measures what authenticating entries costs where it is paid:
// a listing of 1,000 objects read from Redis and decoded on every request (dropped
// from the first level before each), unsealed and sealed, in one run. Hits from the
// first level verify nothing. Redis always seals (Validate requires the secret):
// the unsealed run drops the sealer after opening, for the comparison only.
func BenchmarkSealedRead(b *testing.B) {
	for _, sealed := range []bool{false, true} {
		name := map[bool]string{false: "Unsealed", true: "Sealed"}[sealed]
		b.Run(name, func(b *testing.B) {
			d := newBenchDir(1000)
			in := newInstance(b, d, Config{Secret: sealSecret, Redis: redisClient(b, redisconn.Config{Addrs: []string{redistest.Start(b).Addr()}})})
			if !sealed {
				in.c.sealer = nil
			}
			in.svc.Authz = ouFilter{}
			id := dirgate.MustParseIdentifier(d.group.GUID)
			if _, _, err := in.tryList(b.Context(), d.group.GUID, dirgate.ListOptions{Properties: benchProps}); err != nil {
				b.Fatal(err)
			}
			benchListFromStore(b, in, id)
		})
	}
	b.Run("OpenOnly", func(b *testing.B) {
		blob := strings.Repeat("x", 1300<<10) // the listing's size in Redis
		s := newSealer(sealSecret)
		v := s.seal("k", blob)
		b.SetBytes(int64(len(v)))
		for b.Loop() {
			if _, err := s.open("k", v); err != nil {
				b.Fatal(err)
			}
		}
	})
}
