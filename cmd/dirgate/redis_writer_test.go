package main

import (
	"encoding/binary"
	"encoding/json"
	"io"
	"net/url"
	"strings"
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/test/redistest"
	"github.com/redis/go-redis/v9"
)

// TestRedisWriterCannotChangeWhoATokenIs reproduces issue 22's impersonation: two
// instances share a real Redis, each demo token's account is resolved and cached,
// then someone able to write to Redis (a plain client, no secret) puts the
// administrator's cached resolution under the help desk's key, as it is and with its
// inputs rewritten to the help desk's. A fresh instance must then resolve the help
// desk's token to the help desk (its smaller view), never to the administrator.
// Without a secret file dirgate must refuse to start with Redis at all.
func TestRedisWriterCannotChangeWhoATokenIs(t *testing.T) {
	srv := redistest.Start(t)
	const mixed = "CN=Mixed Members,OU=Groups,DC=corp,DC=example,DC=com"
	const admin = "CN=Dana Admin,OU=IT,OU=Staff,DC=corp,DC=example,DC=com"
	for _, tc := range []struct {
		name   string
		args   []string
		refuse bool // the configuration must be refused
	}{
		{"without a secret file", []string{"--redis-addr", srv.Addr(), "--redis-key-prefix", "nosecret:"}, true},
		{"with a secret file", append(withRedis(t, srv.Addr()), "--redis-key-prefix", "secret:"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--listen", "127.0.0.1:0", "--log-level", "error"}, tc.args...)
			_, err := LoadConfig(args, func(string) string { return "" }, io.Discard)
			if tc.refuse {
				if err == nil || !strings.Contains(err.Error(), "secret-file") {
					// Before issue 22 this started; carry on to show what a writer could do.
					t.Errorf("Redis without a secret file: LoadConfig = %v, want an error naming secret-file", err)
				} else {
					return
				}
			} else if err != nil {
				t.Fatal(err)
			}
			prefix := tc.args[len(tc.args)-1]
			base := "http://" + startMain(t, nil, tc.args...).Addr() + "/restApi/api/directoryObjects/groupMembers"
			want := len(listAs(t, base, "demo-helpdesk", mixed, ""))
			all := len(listAs(t, base, adminTok, mixed, ""))
			if want == 0 || want >= all {
				t.Fatalf("help desk sees %d of %d: the demo policy should give it a smaller view", want, all)
			}

			rc := redis.NewClient(&redis.Options{Addr: srv.Addr()})
			defer rc.Close()
			_, adminVal := resolutionOf(t, rc, prefix, admin)
			hugoKey, hugoVal := resolutionOf(t, rc, prefix, hugo)
			for _, forged := range []struct{ name, value string }{
				{"copied", adminVal},
				{"copied with the help desk's inputs", withInputsOf(t, adminVal, hugoVal)},
			} {
				if err := rc.Set(t.Context(), hugoKey, forged.value, 0).Err(); err != nil {
					t.Fatal(err)
				}
				// A fresh instance: nothing of the help desk's in process yet.
				fresh := "http://" + startMain(t, nil, tc.args...).Addr() + "/restApi/api/directoryObjects/groupMembers"
				r := call(t, "GET", fresh+"?group="+url.QueryEscape(mixed), "demo-helpdesk")
				var got []dirgate.Object
				if r.status == 200 {
					if err := json.Unmarshal(r.body, &got); err != nil {
						t.Fatal(err)
					}
					if len(got) != want {
						t.Errorf("%s: the help desk's token sees %d members (its own view is %d, the administrator's %d)", forged.name, len(got), want, all)
					}
				} else if r.status != 401 {
					t.Errorf("%s: %d %s", forged.name, r.status, r.body)
				}
			}
		})
	}
}

// resolutionOf finds the cached resolution of the account dn under prefix: the
// "o:" entry whose single object has that DN.
func resolutionOf(t *testing.T, rc *redis.Client, prefix, dn string) (key, value string) {
	t.Helper()
	keys, err := rc.Keys(t.Context(), prefix+"o:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		v, err := rc.Get(t.Context(), k).Result()
		if err == nil && strings.Contains(v, dn) {
			if key != "" {
				t.Fatalf("two resolutions mention %s", dn)
			}
			key, value = k, v
		}
	}
	if key == "" {
		t.Fatalf("no cached resolution of %s among %d keys", dn, len(keys))
	}
	return key, value
}

// withInputsOf returns from, its key inputs (the entry's check string, docs/cache.md)
// replaced by those of to: what a writer who knows the codec, but not the secret,
// can forge. A sealed value keeps its HMAC, which no longer matches.
func withInputsOf(t *testing.T, from, to string) string {
	t.Helper()
	// lengthAt returns where the check string's length starts in v, and where the
	// check string ends.
	lengthAt := func(v string) (start, end int) {
		i := strings.Index(v, "dgc1")
		if i < 0 {
			t.Fatal("not an entry")
		}
		off := i + len("dgc1") + 1 // magic and flags
		for range 2 {              // filled and fresh
			_, n := binary.Varint([]byte(v[off:]))
			off += n
		}
		l, n := binary.Uvarint([]byte(v[off:]))
		return off, off + n + int(l)
	}
	fs, fe := lengthAt(from)
	ts, te := lengthAt(to)
	return from[:fs] + to[ts:te] + from[fe:]
}
