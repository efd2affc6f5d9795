package cache

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/redisconn"
	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/test/harness/redistest"
	"github.com/dirgate/dirgate/test/suite/conformance"
)

// listedGroups covers nesting, cycles, every kind of member, account states and
// primary-group membership.
var listedGroups = append([]string{fixture.WorkstationAdminsDN, fixture.ProjectAlphaDN, fixture.SalesEastDN,
	fixture.MixedDN, fixture.AccountStatesDN, fixture.NewsletterDN, fixture.FinanceTeamDN, fixture.DomainUsersDN,
	fixture.EscapedGroupDN}, fixture.ChainDNs...)

// testTimeout bounds each Redis operation in tests of answers (sharedBackends).
const testTimeout = time.Second

// listOptions are the variants every group is listed with: direct and nested, without
// properties and with properties of every syntax.
var listOptions = []dirgate.ListOptions{
	{},
	{IncludeIndirect: true},
	{Properties: []string{"mail", "memberof", "objectsid", "pwdlastset", "whenchanged"}},
	{IncludeIndirect: true, Properties: []string{"description", "objectguid"}},
}

// sharedBackends are the stores two instances can share, each started for the test.
// Their tests are about answers, not timeouts: each Redis operation gets a second
// (testTimeout) rather than the default 100 ms, which a loaded 2-core machine running
// the whole suite sometimes exceeds, and a bypass would then fail a test of answers.
func sharedBackends() []struct {
	name string
	cfg  func(t *testing.T) Config
} {
	return []struct {
		name string
		cfg  func(t *testing.T) Config
	}{
		{"redis", func(t *testing.T) Config {
			return Config{Secret: sealSecret, Timeout: testTimeout, Redis: redisClient(t, redisconn.Config{Addrs: []string{redistest.Start(t).Addr()}})}
		}},
		{"redis-no-lease", func(t *testing.T) Config {
			return Config{Secret: sealSecret, Timeout: testTimeout, Redis: redisClient(t, redisconn.Config{Addrs: []string{redistest.Start(t).Addr()}}), Lease: new(time.Duration(0))}
		}},
		{"cluster", func(t *testing.T) Config {
			return Config{Secret: sealSecret, Timeout: testTimeout, Redis: redisClient(t, redisconn.Config{Addrs: redistest.StartCluster(t).Addrs(), Mode: redisconn.ModeCluster})}
		}},
	}
}

// TestListingEqualsDirectory: whatever level serves it (a miss filled from the
// directory, the first level, or the shared store decoded by another instance), a
// listing is exactly what the directory gives, and so is its JSON.
func TestListingEqualsDirectory(t *testing.T) {
	type backend struct {
		name   string
		cfg    func(t *testing.T) Config
		shared bool
	}
	bs := []backend{{name: "memory", cfg: func(*testing.T) Config { return Config{} }}}
	for _, b := range sharedBackends() {
		bs = append(bs, backend{b.name, b.cfg, true})
	}
	for _, b := range bs {
		t.Run(b.name, func(t *testing.T) {
			dir := demo(t)
			cfg := b.cfg(t)
			cfg.Timeout = time.Second // logic, not timeouts: 100 ms failed under heavy load
			a := newInstance(t, dir, cfg)
			var other instance
			if b.shared {
				other = newInstance(t, dir, cfg)
			}
			for _, g := range listedGroups {
				for _, opts := range listOptions {
					want := truth(t, dir, g, opts)
					steps := []struct {
						name   string
						in     instance
						status dirgate.CacheStatus
					}{
						{"fill", a, dirgate.CacheMiss},
						{"first level", a, dirgate.CacheHit},
						{"store, decoded by another instance", other, dirgate.CacheHit},
					}
					for _, s := range steps {
						if s.in.c == nil {
							continue
						}
						got, st := s.in.list(t, g, opts)
						if st != s.status {
							t.Errorf("%s %+v %s: status %q, want %q", g, opts, s.name, st, s.status)
						}
						if !sameListing(got, want) {
							t.Errorf("%s %+v %s: listing differs from the directory's\n got %d objects\nwant %d", g, opts, s.name, len(got), len(want))
						}
					}
				}
			}
		})
	}
}

// TestAnyIdentifierSharesTheEntry: a group named by DN (in any letter case), GUID
// (with braces, upper case) or SID is one cache entry; sizeLimit is applied per
// request, after the cache.
func TestAnyIdentifierSharesTheEntry(t *testing.T) {
	dir := demo(t)
	in := newInstance(t, dir, Config{})
	g, err := dir.Lookup(t.Context(), dirgate.MustParseIdentifier(fixture.HelpDeskDN), nil)
	if err != nil {
		t.Fatal(err)
	}
	full := truth(t, dir, fixture.HelpDeskDN, dirgate.ListOptions{IncludeIndirect: true})
	tests := []struct {
		name, id  string
		sizeLimit int
		want      dirgate.CacheStatus
	}{
		// The first request fills the entry.
		{"DN", fixture.HelpDeskDN, 0, dirgate.CacheMiss},
		// DNs compare case-insensitively in the directory: same group, same entry.
		{"DN in other case", "cn=help desk,ou=groups,dc=corp,dc=example,dc=com", 0, dirgate.CacheHit},
		{"GUID in braces", "{" + upper(g.GUID) + "}", 0, dirgate.CacheHit},
		{"SID", g.SID, 0, dirgate.CacheHit},
		// The limit is not part of the key.
		{"size limit", g.GUID, 2, dirgate.CacheHit},
	}
	for _, tc := range tests {
		got, st := in.list(t, tc.id, dirgate.ListOptions{IncludeIndirect: true, SizeLimit: tc.sizeLimit})
		want := full
		if tc.sizeLimit > 0 {
			want = full[:tc.sizeLimit]
		}
		if st != tc.want || !sameListing(got, want) {
			t.Errorf("%s: status %q (want %q), %d objects (want %d)", tc.name, st, tc.want, len(got), len(want))
		}
	}
}

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// TestLookupCached: identifier resolution is cached (one directory read per
// identifier, whatever its spelling), failures are not.
func TestLookupCached(t *testing.T) {
	dir := &countingDir{Directory: demo(t)}
	in := newInstance(t, dir, Config{})
	ctx := t.Context()
	for _, id := range []string{fixture.HelpDeskDN, "CN=HELP DESK,OU=Groups,DC=corp,DC=example,DC=com"} {
		if _, err := in.c.Lookup(ctx, dirgate.MustParseIdentifier(id), nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := dir.lookups.Load(); n != 1 {
		t.Errorf("two lookups of one DN reached the directory %d times, want 1", n)
	}
	unknown := dirgate.MustParseIdentifier("CN=Nobody,DC=corp,DC=example,DC=com")
	for range 2 {
		if _, err := in.c.Lookup(ctx, unknown, nil); dirgate.ErrorCode(err) != dirgate.ENOTFOUND {
			t.Fatalf("unknown object: %v, want notFound", err)
		}
	}
	if n := dir.lookups.Load(); n != 3 {
		t.Errorf("directory lookups = %d, want 3: a failed lookup must not be cached", n)
	}
}

// TestDirectoryConformance: the cache is a Directory, so the suite every upstream
// passes must pass through it (lookups served from the cache, removals invalidating).
func TestDirectoryConformance(t *testing.T) {
	conformance.Run(t, func(t *testing.T) dirgate.Directory {
		return newInstance(t, demo(t), Config{TTL: time.Hour}).c
	}, fixture.Demo())
}

// unresolvedDir lists, in each group, one member marked unresolved while unresolved
// is set: an object a router could not ask its own directory about.
type unresolvedDir struct {
	dirgate.Directory
	unresolved atomic.Bool
}

func (d *unresolvedDir) Members(ctx context.Context, group dirgate.Object, props []string) ([]dirgate.Object, error) {
	ms, err := d.Directory.Members(ctx, group, props)
	if err == nil && len(ms) > 0 && d.unresolved.Load() {
		ms = slices.Clone(ms)
		ms[0].Unresolved = true
	}
	return ms, err
}

// TestUnresolvedListingNotKept: a listing holding an object its directory could not
// resolve is answered but not kept, direct or nested, in process and in Redis; once
// resolved it is kept as any other.
func TestUnresolvedListingNotKept(t *testing.T) {
	for _, shared := range []bool{false, true} {
		dir := &unresolvedDir{Directory: demo(t)}
		dir.unresolved.Store(true)
		cfg := Config{}
		if shared {
			cfg.Secret, cfg.Redis = sealSecret, redisClient(t, redisconn.Config{Addrs: []string{redistest.Start(t).Addr()}})
		}
		in := newInstance(t, dir, cfg)
		for _, opts := range []dirgate.ListOptions{{}, {IncludeIndirect: true}} {
			want := truth(t, dir.Directory, fixture.HelpDeskDN, opts)
			for i := range 2 {
				got, st := in.list(t, fixture.HelpDeskDN, opts)
				if st == dirgate.CacheHit || st == dirgate.CacheStale || len(got) != len(want) {
					t.Errorf("redis %v, %+v, listing %d while unresolved: %s with %d objects, want one read from the directory with %d", shared, opts, i, st, len(got), len(want))
				}
			}
		}
		dir.unresolved.Store(false)
		in.list(t, fixture.HelpDeskDN, dirgate.ListOptions{})
		if _, st := in.list(t, fixture.HelpDeskDN, dirgate.ListOptions{}); st != dirgate.CacheHit {
			t.Errorf("redis %v: resolved listing served %s the second time, want a hit", shared, st)
		}
	}
}
