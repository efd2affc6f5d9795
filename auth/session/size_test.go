package session

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dirgate/dirgate/test/harness/redistest"
	"github.com/redis/go-redis/v9"
)

// TestRedisRecordsAreCapped: a record grown past MaxRecordBytes by someone able to
// write to Redis is refused as unknown and logged, and Redis sends only the first
// MaxRecordBytes+1 bytes of it, for a token's read (GET) and a session's exchange
// (GETDEL) alike.
func TestRedisRecordsAreCapped(t *testing.T) {
	srv := redistest.Start(t)
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { raw.Close() })
	ctx := t.Context()
	var log bytes.Buffer
	s := newStore(t, NewRedisBackend(raw, "p:", time.Second), nil, &log)
	sent := func() int64 {
		info, err := raw.Info(ctx, "stats").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(l, "total_net_output_bytes:"); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
		}
		t.Fatal("no total_net_output_bytes in INFO")
		return 0
	}
	const huge = 8 << 20
	grow := func(key string) {
		t.Helper()
		if err := raw.SetRange(ctx, "p:"+key, huge, "x").Err(); err != nil {
			t.Fatal(err)
		}
	}

	ses, err := s.CreateSession(ctx, "guid-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	_, tok, err := s.Exchange(ctx, ses.ID)
	if err != nil {
		t.Fatal(err)
	}
	grow(s.name(kindToken, tok.Token))
	before := sent()
	if _, err := s.Lookup(ctx, tok.Token); !errors.Is(err, ErrUnknown) {
		t.Errorf("a grown token record: %v, want ErrUnknown", err)
	}
	if n := sent() - before; n > 64<<10 {
		t.Errorf("Redis sent %d bytes for a token record of %d", n, huge)
	}

	ses2, err := s.CreateSession(ctx, "guid-2", 0)
	if err != nil {
		t.Fatal(err)
	}
	grow(s.name(kindSession, ses2.ID))
	before = sent()
	if _, _, err := s.Exchange(ctx, ses2.ID); !errors.Is(err, ErrUnknown) {
		t.Errorf("a grown session record: %v, want ErrUnknown", err)
	}
	if n := sent() - before; n > 64<<10 {
		t.Errorf("Redis sent %d bytes for a session record of %d", n, huge)
	}
	if c := strings.Count(log.String(), "failed its HMAC check"); c != 2 {
		t.Errorf("%d refusals logged, want 2:\n%s", c, log.String())
	}
}
