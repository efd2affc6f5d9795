package cache

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/redisconn"
	"github.com/dirgate/dirgate/render"
	"github.com/dirgate/dirgate/upstream/memory"
	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// instance is one dirgate instance: its cache and the member service clients reach.
type instance struct {
	c   *Cache
	svc *dirgate.MemberService
}

// redisClient opens a client as cmd/dirgate does (redisconn), closed after the
// test's caches. Its timeouts are generous: the cache bounds each of its operations
// by its own Timeout.
func redisClient(t testing.TB, cfg redisconn.Config) redis.UniversalClient {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	client, err := cfg.Open(2 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	openedWith.Store(client, cfg)
	t.Cleanup(func() { openedWith.Delete(client) })
	return client
}

// openedWith remembers the redisconn.Config each redisClient was opened with, so
// that ownClient opens another from it rather than copying the live client's
// options, which go-redis writes to while a connection of that client starts (a
// data race the race detector caught when a test used the first client itself).
var openedWith sync.Map // redis.UniversalClient -> redisconn.Config

// ownClient gives an instance a client of its own, as a process of its own has
// (instances of one test share a Config), opened as cmd/dirgate opens the cache's:
// the cache's timeout as every timeout, the pool's metrics reported.
func ownClient(t testing.TB, c redis.UniversalClient, timeout time.Duration) redis.UniversalClient {
	var own redis.UniversalClient
	if cfg, ok := openedWith.Load(c); ok {
		cfg := cfg.(redisconn.Config)
		cfg.Metrics = true
		var err error
		if own, err = cfg.Open(timeout); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { own.Close() })
		return own
	}
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

func newInstance(t testing.TB, dir dirgate.Directory, cfg Config) instance {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	if cfg.Redis != nil {
		timeout := cfg.Timeout
		if timeout == 0 {
			timeout = DefaultTimeout
		}
		cfg.Redis = ownClient(t, cfg.Redis, timeout)
	}
	c, err := cfg.Open(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return instance{c: c, svc: &dirgate.MemberService{Dir: c, Listings: c}}
}

// list lists a group as a client would, through the member service, and returns the
// listing with how it was served.
func (in instance) list(t testing.TB, group string, opts dirgate.ListOptions) ([]dirgate.Object, dirgate.CacheStatus) {
	t.Helper()
	objs, st, err := in.tryList(t.Context(), group, opts)
	if err != nil {
		t.Fatalf("list %s: %v", group, err)
	}
	return objs, st
}

func (in instance) tryList(ctx context.Context, group string, opts dirgate.ListOptions) ([]dirgate.Object, dirgate.CacheStatus, error) {
	g, l, err := in.svc.ListingFor(ctx, dirgate.Principal{}, dirgate.MustParseIdentifier(group), opts)
	if err != nil {
		return nil, l.Status, err
	}
	objs, err := in.svc.Filter(ctx, dirgate.Principal{}, g, opts, l.Objects)
	if err != nil {
		return nil, l.Status, err
	}
	// The body the proxy would write must be what encoding the listing gives.
	body, err := render.AppendJSON(nil, l, objs)
	if err != nil {
		return nil, "", err
	}
	want, _ := json.Marshal(objs)
	if len(objs) > 0 && string(body) != string(want) {
		return nil, "", errBodyDiffers
	}
	return objs, l.Status, nil
}

var errBodyDiffers = dirgate.Errorf(dirgate.EINTERNAL, "joined body differs from json.Marshal of the listing")

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

func demo(t testing.TB) *memory.Directory {
	t.Helper()
	d, err := memory.Demo()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func sameListing(a, b []dirgate.Object) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return reflect.DeepEqual(a, b)
}

func guids(objs []dirgate.Object) map[string]bool {
	m := make(map[string]bool, len(objs))
	for _, o := range objs {
		m[o.GUID] = true
	}
	return m
}

// countingDir counts the reads that reach the directory, and can fail them or hold
// them.
type countingDir struct {
	dirgate.Directory
	members, lookups atomic.Int64
	// failWith, when set, fails every Lookup and Members with that error.
	failWith atomic.Pointer[error]
	// beforeMembers, when set, runs before Members reads (after counting).
	beforeMembers func(group dirgate.Object)
	// afterMembers, when set, runs after Members has read, before it returns.
	afterMembers func(group dirgate.Object)
}

func (d *countingDir) fail(err error) {
	if err == nil {
		d.failWith.Store(nil)
		return
	}
	d.failWith.Store(&err)
}

func (d *countingDir) Lookup(ctx context.Context, id dirgate.Identifier, props []string) (dirgate.Object, error) {
	d.lookups.Add(1)
	if p := d.failWith.Load(); p != nil {
		return dirgate.Object{}, *p
	}
	return d.Directory.Lookup(ctx, id, props)
}

func (d *countingDir) Members(ctx context.Context, group dirgate.Object, props []string) ([]dirgate.Object, error) {
	d.members.Add(1)
	if p := d.failWith.Load(); p != nil {
		return nil, *p
	}
	if d.beforeMembers != nil {
		d.beforeMembers(group)
	}
	ms, err := d.Directory.Members(ctx, group, props)
	if d.afterMembers != nil {
		d.afterMembers(group)
	}
	return ms, err
}

// faultyStore fails every operation while fail is set.
type faultyStore struct {
	store
	failing atomic.Bool
}

var errStoreDown = dirgate.Errorf(dirgate.EINTERNAL, "store down (test)")

func (f *faultyStore) get(ctx context.Context, keys ...string) ([]string, error) {
	if f.failing.Load() {
		return nil, errStoreDown
	}
	return f.store.get(ctx, keys...)
}

func (f *faultyStore) set(ctx context.Context, key, value string, ttl time.Duration) error {
	if f.failing.Load() {
		return errStoreDown
	}
	return f.store.set(ctx, key, value, ttl)
}

func (f *faultyStore) setIf(ctx context.Context, key, value string, ttl time.Duration, gk, g string) (bool, error) {
	if f.failing.Load() {
		return false, errStoreDown
	}
	return f.store.setIf(ctx, key, value, ttl, gk, g)
}

func (f *faultyStore) setAll(ctx context.Context, keys, values []string, ttl time.Duration) error {
	if f.failing.Load() {
		return errStoreDown
	}
	return f.store.setAll(ctx, keys, values, ttl)
}

func (f *faultyStore) getOrSet(ctx context.Context, key, value string, ttl time.Duration) (string, error) {
	if f.failing.Load() {
		return "", errStoreDown
	}
	return f.store.getOrSet(ctx, key, value, ttl)
}

func (f *faultyStore) delIf(ctx context.Context, key, value string) error {
	if f.failing.Load() {
		return errStoreDown
	}
	return f.store.delIf(ctx, key, value)
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

// joinCounter counts requests that joined a flight, for tests that must hold the
// directory until every request is waiting on one read.
type joinCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (j *joinCounter) hook(key string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.n == nil {
		j.n = map[string]int{}
	}
	j.n[key]++
}

// count returns the joins of flights whose key contains part.
func (j *joinCounter) count(part string) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := 0
	for k, v := range j.n {
		if strings.Contains(k, part) {
			n += v
		}
	}
	return n
}

// served lists group and returns how it was served.
func served(t *testing.T, in instance, group string, opts dirgate.ListOptions) dirgate.CacheStatus {
	t.Helper()
	_, st := in.list(t, group, opts)
	return st
}

// encodeFrags is encodeEntry with the objects' encodings given as strings (nil:
// none), which may be anything: the decoder's tests store what no object encodes to.
func encodeFrags(e *entry, objs []dirgate.Object, frags []string) string {
	var f fragments
	if frags != nil {
		f = func(dst []byte, i int) []byte { return append(dst, frags[i]...) }
	}
	v, err := encodeEntry(e, objs, f)
	if err != nil {
		panic(err)
	}
	return v
}
