package cache

import (
	"bytes"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/redisconn"
	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/test/harness/redistest"
	"github.com/redis/go-redis/v9"
)

// What someone able to write to Redis, without the secret, can no longer do
// (docs/auth.md, "What Redis holds"). Each test writes with a plain client.

const (
	writerAdmin    = "CN=Dana Admin,OU=IT,OU=Staff,DC=corp,DC=example,DC=com"
	writerHelpdesk = "CN=Hugo Helpdesk,OU=IT,OU=Staff,DC=corp,DC=example,DC=com"
)

// logTo returns a logger writing into a buffer safe to read while it is written.
func logTo() (*slog.Logger, func() string) {
	var mu sync.Mutex
	var buf bytes.Buffer
	w := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return buf.Write(p) })
	return slog.New(slog.NewTextHandler(w, nil)), func() string { mu.Lock(); defer mu.Unlock(); return buf.String() }
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestRedisWriterCannotChangeAPrincipal: the help desk's and the administrator's
// accounts are looked up through a cache in Redis (a look-up that uses the cache, as
// a listing's group is resolved; a principal's subject never is, docs/auth.md); the
// administrator's resolution is then put under the help desk's key, as it is and
// with its key inputs rewritten (what a writer who knows the codec can forge). A
// fresh instance must look the help desk up as itself, log the refusal, and resolve
// the help desk's principal to itself. Without a secret, the cache must not open.
func TestRedisWriterCannotChangeAPrincipal(t *testing.T) {
	srv := redistest.Start(t)
	dir := demo(t)
	for _, secret := range [][]byte{nil, sealSecret} {
		prefix := "s" + strconv.Itoa(len(secret)) + ":"
		t.Run("secret of "+strconv.Itoa(len(secret))+" bytes", func(t *testing.T) {
			// Timeout: the test reads Redis on a loaded machine; a slow answer
			// would bypass the cache and never reach the forged entry.
			cfg := Config{Secret: secret, Redis: redisClient(t, redisconn.Config{Addrs: []string{srv.Addr()}}), KeyPrefix: prefix, Logger: quiet, Timeout: testTimeout}
			c, err := cfg.Open(t.Context(), dir)
			if secret == nil {
				if err == nil {
					t.Error("a cache in Redis opened without a secret")
					c.Close()
				} else {
					return
				}
			} else if err != nil {
				t.Fatal(err)
			}
			in := newInstance(t, dir, cfg)
			lookup := func(in instance, dn string) dirgate.Object {
				o, err := in.c.Lookup(t.Context(), dirgate.MustParseIdentifier(dn), nil)
				if err != nil {
					t.Fatal(err)
				}
				return o
			}
			principal := func(in instance, dn string) dirgate.Principal {
				p, err := in.svc.Principal(t.Context(), dirgate.MustParseIdentifier(dn))
				if err != nil {
					t.Fatal(err)
				}
				return p
			}
			hugo, dana := lookup(in, writerHelpdesk), lookup(in, writerAdmin)
			hugoP := principal(in, writerHelpdesk)
			k := keys{prefix: prefix}
			hugoKey, _ := k.lookup(dirgate.MustParseIdentifier(writerHelpdesk))
			danaKey, _ := k.lookup(dirgate.MustParseIdentifier(writerAdmin))
			rc := redis.NewClient(&redis.Options{Addr: srv.Addr()})
			defer rc.Close()
			danaVal, err := rc.Get(t.Context(), danaKey).Result()
			if err != nil {
				t.Fatal(err)
			}
			hugoVal, err := rc.Get(t.Context(), hugoKey).Result()
			if err != nil {
				t.Fatal(err)
			}
			for _, forged := range []struct{ name, value string }{
				{"copied", danaVal},
				{"copied with the help desk's key inputs", withCheckOf(t, danaVal, hugoVal)},
			} {
				if err := rc.Set(t.Context(), hugoKey, forged.value, 0).Err(); err != nil {
					t.Fatal(err)
				}
				log, logged := logTo()
				fresh := cfg
				fresh.Logger = log
				fin := newInstance(t, dir, fresh)
				if got := lookup(fin, writerHelpdesk); got.GUID != hugo.GUID {
					t.Errorf("%s: the help desk was looked up as %s (the administrator is %s)", forged.name, got.DN, dana.DN)
				}
				if !strings.Contains(logged(), "does not decode") {
					t.Errorf("%s: the refusal is not logged:\n%s", forged.name, logged())
				}
				if got := principal(fin, writerHelpdesk); got.GUID != hugoP.GUID || len(got.Groups) != len(hugoP.Groups) {
					t.Errorf("%s: the help desk's principal resolved to %s with %d groups", forged.name, got.DN, len(got.Groups))
				}
			}
		})
	}
}

// withCheckOf returns the entry from with the check string (its key's inputs) of
// the entry to, keeping from's seal if it has one: the seal no longer verifies.
func withCheckOf(t *testing.T, from, to string) string {
	t.Helper()
	split := func(v string) (seal, blob string) {
		i := strings.Index(v, magic)
		if i < 0 {
			t.Fatal("not an entry")
		}
		return v[:i], v[i:]
	}
	seal, fb := split(from)
	_, tb := split(to)
	fe, err := decodeEntry(fb)
	if err != nil {
		t.Fatal(err)
	}
	te, err := decodeEntry(tb)
	if err != nil {
		t.Fatal(err)
	}
	fe.check = te.check
	return seal + encodeFrags(fe, fe.objs, fe.list.Fragments())
}

// TestRedisValuesAreCapped: a value above the largest the cache writes is refused
// (read as a miss, logged) without being transferred whole.
func TestRedisValuesAreCapped(t *testing.T) {
	srv := redistest.Start(t)
	dir := demo(t)
	log, logged := logTo()
	in := newInstance(t, dir, Config{Secret: sealSecret, Redis: redisClient(t, redisconn.Config{Addrs: []string{srv.Addr()}}), Timeout: 10 * time.Second, Logger: log})
	served(t, in, fixture.ProjectAlphaDN, dirgate.ListOptions{})
	key, _ := in.c.keys.listing(object(t, dir, fixture.ProjectAlphaDN).GUID, false, nil)
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rc.Close()
	huge := maxValueBytes + 16<<20
	if err := rc.SetRange(t.Context(), key, int64(huge-1), "x").Err(); err != nil {
		t.Fatal(err)
	}
	sent := func() int64 {
		info, err := rc.Info(t.Context(), "stats").Result()
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
	before := sent()
	fresh := newInstance(t, dir, Config{Secret: sealSecret, Redis: redisClient(t, redisconn.Config{Addrs: []string{srv.Addr()}}), Timeout: 10 * time.Second, Logger: log})
	if st := served(t, fresh, fixture.ProjectAlphaDN, dirgate.ListOptions{}); st != dirgate.CacheMiss {
		t.Errorf("an over-size value was served: %s", st)
	}
	if n := sent() - before; n > int64(maxValueBytes)+1<<20 {
		t.Errorf("Redis sent %d bytes for a value of %d: it was read whole", n, huge)
	}
	if !strings.Contains(logged(), "over the size bound") {
		t.Errorf("the refusal is not logged:\n%s", logged())
	}
}
