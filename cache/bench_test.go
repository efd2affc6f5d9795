package cache

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/ldapentry"
	"github.com/dirgate/dirgate/redisconn"
	"github.com/dirgate/dirgate/render"
	"github.com/dirgate/dirgate/test/harness/encodedtest"
	"github.com/dirgate/dirgate/test/harness/redistest"
)

// benchDir is a directory with one group of n users rendered as the upstreams render
// them (ldapentry.Entry.ToObject), about 640 bytes of JSON each with benchProps.
type benchDir struct {
	group   dirgate.Object
	members []*ldapentry.Entry
}

var benchProps = []string{"department", "mail", "telephonenumber", "title"}

func newBenchDir(n int) *benchDir {
	guid := func(i int) []byte {
		b := make([]byte, 16)
		copy(b, fmt.Sprintf("%016d", i))
		return b
	}
	g := ldapentry.NewEntry("CN=Bench,OU=Groups,DC=corp,DC=example,DC=com")
	g.Add("objectGUID", guid(0))
	g.Add("objectClass", []byte("top"), []byte("group"))
	d := &benchDir{}
	d.group, _ = g.ToObject(nil, benchNow)
	ous := []string{"IT", "Sales", "Finance", "HR"}
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("User Number%04d", i)
		e := ldapentry.NewEntry("CN=" + name + ",OU=" + ous[i%4] + ",OU=Staff,DC=corp,DC=example,DC=com")
		e.Add("objectGUID", guid(i))
		e.Add("objectSid", []byte("\x01\x05\x00\x00\x00\x00\x00\x05\x15\x00\x00\x00\x8e\x7e\xf8\x7d\x2b\xf2\xdf\xc3\xec\x25\x72\x6e"+string([]byte{byte(i), byte(i >> 8), 0, 0})))
		e.Add("objectClass", []byte("top"), []byte("person"), []byte("organizationalPerson"), []byte("user"))
		e.Add("userAccountControl", []byte("512"))
		e.Add("pwdLastSet", []byte("133540000000000000"))
		e.Add("accountExpires", []byte("9223372036854775807"))
		e.Add("msDS-UserPasswordExpiryTimeComputed", []byte("133903000000000000"))
		e.Add("mail", []byte(strings.ReplaceAll(strings.ToLower(name), " ", ".")+"@corp.example.com"))
		e.Add("department", []byte(ous[i%4]))
		e.Add("title", []byte("Senior Specialist for Things"))
		e.Add("telephoneNumber", []byte("+1 555 01"+strconv.Itoa(1000+i)))
		d.members = append(d.members, e)
	}
	return d
}

var benchNow = time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)

func (d *benchDir) Lookup(_ context.Context, id dirgate.Identifier, _ []string) (dirgate.Object, error) {
	if id.Canonical() == d.group.GUID {
		return d.group, nil
	}
	return dirgate.Object{}, dirgate.Errorf(dirgate.ENOTFOUND, "not found")
}

func (d *benchDir) Members(_ context.Context, _ dirgate.Object, props []string) ([]dirgate.Object, error) {
	out := make([]dirgate.Object, len(d.members))
	for i, e := range d.members {
		o, err := e.ToObject(props, benchNow)
		if err != nil {
			return nil, err
		}
		out[i] = o
	}
	return out, nil
}

func (d *benchDir) MemberOf(context.Context, dirgate.Object) ([]dirgate.Object, error) {
	return nil, nil
}
func (d *benchDir) RemoveMember(context.Context, dirgate.Object, dirgate.Object) error { return nil }
func (d *benchDir) AddMember(context.Context, dirgate.Object, dirgate.Object) error    { return nil }

// ouFilter is a permission filter as a policy compiles to: the caller may see users
// of two of the four OUs, so half of the listing is written.
type ouFilter struct{}

func (ouFilter) FilterView(_ context.Context, _ dirgate.Principal, _ dirgate.Object, _ dirgate.ListOptions, objs []dirgate.Object) ([]dirgate.Object, error) {
	out := make([]dirgate.Object, 0, len(objs))
	for _, o := range objs {
		if strings.HasSuffix(o.DN, ",OU=IT,OU=Staff,DC=corp,DC=example,DC=com") || strings.HasSuffix(o.DN, ",OU=HR,OU=Staff,DC=corp,DC=example,DC=com") {
			out = append(out, o)
		}
	}
	return out, nil
}

func (ouFilter) AllowRemove(context.Context, dirgate.Principal, dirgate.Object, dirgate.Object) error {
	return nil
}

func (ouFilter) AllowAdd(context.Context, dirgate.Principal, dirgate.Object, dirgate.Object) error {
	return nil
}

func (ouFilter) AllowView(context.Context, dirgate.Principal, dirgate.Object, dirgate.Object) error {
	return nil
}

// benchList serves the 1,000-member listing as the proxy does: list, filter, join the
// response body.
func benchList(b *testing.B, in instance, id dirgate.Identifier, want dirgate.CacheStatus) {
	b.Helper()
	benchListing(b, in, id, want, false)
}

// benchListFromStore is benchList with the listing read from the shared store on
// every request, as on an instance that has not served it yet: it is dropped from
// the first level (which keeps one listing however large) before each request, the
// group's lookup kept.
func benchListFromStore(b *testing.B, in instance, id dirgate.Identifier) {
	b.Helper()
	benchListing(b, in, id, dirgate.CacheHit, true)
}

func benchListing(b *testing.B, in instance, id dirgate.Identifier, want dirgate.CacheStatus, fromStore bool) {
	b.Helper()
	opts := dirgate.ListOptions{Properties: benchProps}
	var size int
	for b.Loop() {
		if fromStore {
			b.StopTimer()
			in.c.l1.drop(func(key string, _ *entry) bool { return !in.c.keys.isLookup(key) })
			b.StartTimer()
		}
		group, l, err := in.svc.ListingFor(b.Context(), dirgate.Principal{}, id, opts)
		if err != nil {
			b.Fatal(err)
		}
		objs, err := in.svc.Filter(b.Context(), dirgate.Principal{}, group, opts, l.Objects)
		if err != nil {
			b.Fatal(err)
		}
		body, err := render.AppendJSON(nil, l, objs)
		if err != nil {
			b.Fatal(err)
		}
		if st := l.Status; st != want {
			b.Fatalf("served as %q, want %q", st, want)
		}
		size = len(body)
	}
	b.ReportMetric(float64(size), "body-bytes")
}

func benchInstance(b *testing.B, cfg Config) (instance, dirgate.Identifier) {
	d := newBenchDir(1000)
	in := newInstance(b, d, cfg)
	in.svc.Authz = ouFilter{}
	id := dirgate.MustParseIdentifier(d.group.GUID)
	if _, _, err := in.tryList(b.Context(), d.group.GUID, dirgate.ListOptions{Properties: benchProps}); err != nil {
		b.Fatal(err)
	}
	return in, id
}

// BenchmarkListing1000 serves a cached 1,000-member listing filtered to half:
//   - FirstLevel: decoded in process, its group's version checked in Redis (one GET),
//     leases off;
//   - FirstLevelLease: decoded in process and trusted under the instance's lease (no
//     read), the default with Redis;
//   - FirstLevelInProcess: the same with the in-process backend (no Redis at all);
//   - Redis: read from Redis and decoded on every request (dropped from the first
//     level before each), as on an instance that has not served it yet;
//   - Uncached: what the same response costs when the objects are encoded afresh
//     (json.Marshal of the filtered listing), for comparison.
func BenchmarkListing1000(b *testing.B) {
	b.Run("FirstLevel", func(b *testing.B) {
		in, id := benchInstance(b, Config{Secret: sealSecret, Redis: redisClient(b, redisconn.Config{Addrs: []string{redistest.Start(b).Addr()}}), Lease: new(time.Duration(0))})
		benchList(b, in, id, dirgate.CacheHit)
	})
	b.Run("FirstLevelLease", func(b *testing.B) {
		in, id := benchInstance(b, Config{Secret: sealSecret, Redis: redisClient(b, redisconn.Config{Addrs: []string{redistest.Start(b).Addr()}})})
		waitFor(b, "a lease", in.c.lease.held)
		benchList(b, in, id, dirgate.CacheHit)
	})
	b.Run("FirstLevelInProcess", func(b *testing.B) {
		in, id := benchInstance(b, Config{})
		benchList(b, in, id, dirgate.CacheHit)
	})
	b.Run("Redis", func(b *testing.B) {
		in, id := benchInstance(b, Config{Secret: sealSecret, Redis: redisClient(b, redisconn.Config{Addrs: []string{redistest.Start(b).Addr()}})})
		benchListFromStore(b, in, id)
	})
	b.Run("Uncached", func(b *testing.B) {
		in, id := benchInstance(b, Config{})
		opts := dirgate.ListOptions{Properties: benchProps}
		objs, err := in.svc.List(b.Context(), dirgate.Principal{}, id, opts)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := render.AppendJSON(nil, dirgate.Listing{}, objs); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkDecode1000 decodes a stored 1,000-object listing, the cost a first-level
// miss adds to the Redis read.
func BenchmarkDecode1000(b *testing.B) {
	d := newBenchDir(1000)
	objs, _ := d.Members(b.Context(), d.group, benchProps)
	el, _ := encodedtest.EncodeListing(objs)
	v := encodeFrags(&entry{check: "x"}, objs, el.Encoded.Fragments())
	b.SetBytes(int64(len(v)))
	for b.Loop() {
		if _, err := decodeEntry(v); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncode1000 encodes a 1,000-object listing with its JSON encodings, what
// every fill pays before it stores (a first listing's cost per member).
func BenchmarkEncode1000(b *testing.B) {
	d := newBenchDir(1000)
	objs, _ := d.Members(b.Context(), d.group, benchProps)
	e := &entry{check: "x"}
	v, err := encodeEntry(e, objs, objectJSON(objs))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(v)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := encodeEntry(e, objs, objectJSON(objs)); err != nil {
			b.Fatal(err)
		}
	}
}
