package changefeed

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/cache"
	"github.com/dirgate/dirgate/redisconn"
	"github.com/dirgate/dirgate/test/harness/redistest"
	"github.com/dirgate/dirgate/upstream/memory"
	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
)

// The feed is tested driving the real cache (cache.Cache), as cmd/dirgate wires them.

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

var sealSecret = []byte("a cache secret of at least 32 bytes..")

// instance is one dirgate instance: its cache (and the configuration it was opened
// with, its own Redis client included) and the member service clients reach.
type instance struct {
	c   *cache.Cache
	cfg cache.Config
	svc *dirgate.MemberService
}

// redisClient opens a client as cmd/dirgate does (redisconn), closed after the
// test's caches and feeds.
func redisClient(t testing.TB, cfg redisconn.Config) redis.UniversalClient {
	t.Helper()
	cfg.Logger = quiet
	client, err := cfg.Open(2 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return client
}

// ownClient gives an instance a client of its own, as a process of its own has
// (instances of one test share a Config), opened as cmd/dirgate opens the cache's:
// the cache's timeout as every timeout, the pool's metrics reported.
func ownClient(t testing.TB, c redis.UniversalClient, timeout time.Duration) redis.UniversalClient {
	var own redis.UniversalClient
	switch c := c.(type) {
	case *redis.Client: // one server, or a Sentinel-managed primary (its dialer asks the Sentinels)
		o := *c.Options()
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.PoolTimeout = timeout, timeout, timeout, timeout
		own = redis.NewClient(&o)
	case *redis.ClusterClient:
		o := *c.Options()
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.PoolTimeout = timeout, timeout, timeout, timeout
		own = redis.NewClusterClient(&o)
	default:
		t.Fatalf("ownClient: a %T", c)
	}
	t.Cleanup(func() { own.Close() })
	if err := redisotel.InstrumentMetrics(own); err != nil {
		t.Fatal(err)
	}
	return own
}

func newInstance(t testing.TB, dir dirgate.Directory, cfg cache.Config) instance {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	if cfg.Redis != nil {
		timeout := cfg.Timeout
		if timeout == 0 {
			timeout = cache.DefaultTimeout
		}
		cfg.Redis = ownClient(t, cfg.Redis, timeout)
	}
	c, err := cfg.Open(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return instance{c: c, cfg: cfg, svc: &dirgate.MemberService{Dir: c, Listings: c}}
}

// list lists a group as a client would, through the member service, and returns the
// listing with how it was served.
func (in instance) list(t testing.TB, group string, opts dirgate.ListOptions) ([]dirgate.Object, dirgate.CacheStatus) {
	t.Helper()
	_, l, err := in.svc.ListingFor(t.Context(), dirgate.Principal{}, dirgate.MustParseIdentifier(group), opts)
	if err != nil {
		t.Fatalf("list %s: %v", group, err)
	}
	objs := l.Objects
	if opts.SizeLimit > 0 && len(objs) > opts.SizeLimit {
		objs = objs[:opts.SizeLimit]
	}
	return objs, l.Status
}

func demo(t testing.TB) *memory.Directory {
	t.Helper()
	d, err := memory.Demo()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// truth lists a group straight from the directory, without any cache.
func truth(t testing.TB, dir dirgate.Directory, group string, opts dirgate.ListOptions) []dirgate.Object {
	t.Helper()
	svc := &dirgate.MemberService{Dir: dir}
	objs, err := svc.List(t.Context(), dirgate.Principal{}, dirgate.MustParseIdentifier(group), opts)
	if err != nil {
		t.Fatalf("list %s from the directory: %v", group, err)
	}
	return objs
}

// memberOf returns a user member of group.
func memberOf(t *testing.T, dir dirgate.Directory, group string) dirgate.Object {
	t.Helper()
	for _, o := range truth(t, dir, group, dirgate.ListOptions{}) {
		if o.ObjectType == dirgate.TypeUser {
			return o
		}
	}
	t.Fatalf("%s has no user member", group)
	return dirgate.Object{}
}

func object(t *testing.T, dir dirgate.Directory, id string) dirgate.Object {
	t.Helper()
	o, err := dir.Lookup(t.Context(), dirgate.MustParseIdentifier(id), nil)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// countingDir counts the look-ups that reach the directory.
type countingDir struct {
	dirgate.Directory
	lookups atomic.Int64
}

func (d *countingDir) Lookup(ctx context.Context, id dirgate.Identifier, props []string) (dirgate.Object, error) {
	d.lookups.Add(1)
	return d.Directory.Lookup(ctx, id, props)
}

// waitFor polls cond until it holds; the bound only stops a broken test from hanging.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// logTo returns a logger writing into a buffer safe to read while it is written.
func logTo() (*slog.Logger, func() string) {
	var mu sync.Mutex
	var buf bytes.Buffer
	w := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return buf.Write(p) })
	return slog.New(slog.NewTextHandler(w, nil)), func() string { mu.Lock(); defer mu.Unlock(); return buf.String() }
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

const loadedTimeout = time.Second

// sharedBackends are the caches instances share (cache/listing_test.go's).
//
// Their Redis timeout is a second, not the default 100 ms: these tests check what
// the feed invalidates, and under the race detector on a loaded machine a Redis
// round trip outlasted 100 ms, so the cache bypassed Redis and a test saw "bypass"
// where it waited for "hit".
func sharedBackends() []struct {
	name string
	cfg  func(t *testing.T) cache.Config
} {
	return []struct {
		name string
		cfg  func(t *testing.T) cache.Config
	}{
		{"redis", func(t *testing.T) cache.Config {
			return cache.Config{Secret: sealSecret, Timeout: loadedTimeout, Redis: redisClient(t, redisconn.Config{Addrs: []string{redistest.Start(t).Addr()}})}
		}},
		{"redis-no-lease", func(t *testing.T) cache.Config {
			return cache.Config{Secret: sealSecret, Timeout: loadedTimeout, Redis: redisClient(t, redisconn.Config{Addrs: []string{redistest.Start(t).Addr()}}), Lease: new(time.Duration(0))}
		}},
		{"cluster", func(t *testing.T) cache.Config {
			return cache.Config{Secret: sealSecret, Timeout: loadedTimeout, Redis: redisClient(t, redisconn.Config{Addrs: redistest.StartCluster(t).Addrs(), Mode: redisconn.ModeCluster})}
		}},
	}
}
