package writejournal

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/redisconn"
	"github.com/dirgate/dirgate/test/harness/redistest"
	"github.com/redis/go-redis/v9"
)

var (
	quiet      = slog.New(slog.NewTextHandler(io.Discard, nil))
	testSecret = []byte("a write journal secret of at least 32 bytes")
)

// redisAt is a Redis for journal tests, with a plain client to look inside it.
type redisAt struct {
	srv *redistest.Server
	rc  *redis.Client
}

func newRedis(t testing.TB) redisAt {
	t.Helper()
	srv := redistest.Start(t)
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { rc.Close() })
	return redisAt{srv: srv, rc: rc}
}

// open opens a journal as cmd/dirgate does: on a client of its own, opened by
// redisconn with the journal's timeout as every timeout. Zero fields of cfg other
// than Redis take the test's defaults: the secret, a generous timeout, a quiet log.
func open(t testing.TB, rcfg redisconn.Config, cfg Config) *Journal {
	t.Helper()
	if cfg.Secret == nil {
		cfg.Secret = testSecret
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	rcfg.Logger = quiet
	client, err := rcfg.Open(cfg.Timeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	cfg.Redis = client
	j, err := cfg.Open()
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// journal opens an instance's journal on r. A nil clock is the real one; log nil
// is quiet.
func (r redisAt) journal(t testing.TB, clock *fakeClock, log *slog.Logger) *Journal {
	t.Helper()
	cfg := Config{Logger: log}
	if clock != nil {
		cfg.now = clock.Now
	}
	return open(t, redisconn.Config{Addrs: []string{r.srv.Addr()}}, cfg)
}

// testGUID is the i-th GUID of a family (groups and members differ by family).
func testGUID(family, i int) string {
	return fmt.Sprintf("%08x-0000-4000-a000-%012x", family, i)
}

var (
	jGroup  = testGUID(1, 1)
	jGroup2 = testGUID(1, 2)
)

func write(member string, added bool, at time.Time) dirgate.MembershipWrite {
	return dirgate.MembershipWrite{Group: jGroup, Member: member, Added: added, Server: "ldaps://dc1.corp.example.com:636", At: at}
}

func record(t testing.TB, j *Journal, w dirgate.MembershipWrite, window time.Duration) {
	t.Helper()
	if err := j.Record(t.Context(), w, window); err != nil {
		t.Fatalf("record %+v: %v", w, err)
	}
}

func recent(t testing.TB, j *Journal, group string) []dirgate.MembershipWrite {
	t.Helper()
	ws, err := j.Recent(t.Context(), group)
	if err != nil {
		t.Fatalf("recent %s: %v", group, err)
	}
	return ws
}

// sameWrites compares writes field by field (times with Equal).
func sameWrites(t testing.TB, got, want []dirgate.MembershipWrite) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d writes, want %d:\n got %+v\nwant %+v", len(got), len(want), got, want)
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Group != w.Group || g.Member != w.Member || g.Added != w.Added || g.Server != w.Server || !g.At.Equal(w.At) ||
			g.Origin != w.Origin || g.USN != w.USN {
			t.Errorf("write %d: got %+v, want %+v", i, g, w)
		}
	}
}

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// logTo returns a logger and what it has written so far.
func logTo() (*slog.Logger, func() string) {
	var mu sync.Mutex
	var buf bytes.Buffer
	w := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return buf.Write(p) })
	return slog.New(slog.NewTextHandler(w, nil)), func() string { mu.Lock(); defer mu.Unlock(); return buf.String() }
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// waitFor polls cond for up to 10 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
