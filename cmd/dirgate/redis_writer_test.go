package main

import (
	"encoding/binary"
	"encoding/json"
	"io"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/test/harness/redistest"
	"github.com/redis/go-redis/v9"
)

// TestRedisWriterCannotChangeWhoATokenIs reproduces an impersonation a security review found: two
// instances share a real Redis, each demo account's resolution is cached, then
// someone able to write to Redis (a plain client, no secret) puts the administrator's
// cached resolution under the help desk's key, as it is and with its inputs rewritten
// to the help desk's. A fresh instance must then treat the help desk's token as the
// help desk (its smaller view, no right to explain), never as the administrator.
//
// A token's subject is read from the directory, never from a cached resolution
// (docs/auth.md), so the accounts' resolutions are cached here by look-ups that do
// use the cache (a listing naming the account as its group); and a group's
// resolution, which listings do read from Redis, is forged alike (another group's
// under Mixed Members' key): the fresh instance must refuse it (the seal, docs/cache.md)
// and list Mixed Members itself. Without a secret file dirgate must refuse to start
// with Redis at all.
func TestRedisWriterCannotChangeWhoATokenIs(t *testing.T) {
	srv := redistest.Start(t)
	const mixed = "CN=Mixed Members,OU=Groups,DC=corp,DC=example,DC=com"
	const newsletter = "CN=Newsletter,OU=Groups,DC=corp,DC=example,DC=com"
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
			args := append([]string{"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--log-level", "error"}, tc.args...)
			_, err := LoadConfig(args, func(string) string { return "" }, io.Discard)
			if tc.refuse {
				if err == nil || !strings.Contains(err.Error(), "secret-file") {
					// Before the secret was required this started; carry on to show what a writer could do.
					t.Errorf("Redis without a secret file: LoadConfig = %v, want an error naming secret-file", err)
				} else {
					return
				}
			} else if err != nil {
				t.Fatal(err)
			}
			prefix := tc.args[len(tc.args)-1]
			root := "http://" + startMain(t, nil, tc.args...).Addr() + "/restApi"
			base := root + "/api/directoryObjects/groupMembers"
			want := dns(listAs(t, base, "demo-helpdesk", mixed, ""))
			all := len(listAs(t, base, adminTok, mixed, ""))
			if len(want) == 0 || len(want) >= all {
				t.Fatalf("help desk sees %d of %d: the demo policy should give it a smaller view", len(want), all)
			}
			if other := dns(listAs(t, base, "demo-helpdesk", newsletter, "")); slices.Equal(other, want) {
				t.Fatalf("the help desk sees the same members in %s and %s: a forged group would not show", newsletter, mixed)
			}
			// The accounts' resolutions, cached by listings naming them (not groups).
			for _, dn := range []string{hugo, admin} {
				if r := call(t, "GET", base+"?group="+url.QueryEscape(dn), adminTok); r.status != 400 {
					t.Fatalf("listing the account %s: %d %s, want 400 (not a group)", dn, r.status, r.body)
				}
			}
			// Only the administrator may explain another principal's decisions.
			explain := func(root, token string) response {
				q := url.Values{"subject": {admin}, "group": {mixed}}
				return call(t, "GET", root+"/api/policy/decisions?"+q.Encode(), token)
			}
			if a, h := explain(root, adminTok), explain(root, "demo-helpdesk"); a.status != 200 || h.status != 403 {
				t.Fatalf("decisions: the administrator gets %d, the help desk %d; want 200 and 403", a.status, h.status)
			}

			rc := redis.NewClient(&redis.Options{Addr: srv.Addr()})
			defer rc.Close()
			_, adminVal := resolutionOf(t, rc, prefix, admin)
			hugoKey, hugoVal := resolutionOf(t, rc, prefix, hugo)
			_, newsVal := resolutionOf(t, rc, prefix, newsletter)
			mixedKey, mixedVal := resolutionOf(t, rc, prefix, mixed)
			for _, forged := range []struct{ name, account, group string }{
				{"copied", adminVal, newsVal},
				{"copied with the inputs of the key it is put under", withInputsOf(t, adminVal, hugoVal), withInputsOf(t, newsVal, mixedVal)},
			} {
				if err := rc.MSet(t.Context(), hugoKey, forged.account, mixedKey, forged.group).Err(); err != nil {
					t.Fatal(err)
				}
				// A fresh instance: nothing of the help desk's in process yet.
				froot := "http://" + startMain(t, nil, tc.args...).Addr() + "/restApi"
				r := call(t, "GET", froot+"/api/directoryObjects/groupMembers?group="+url.QueryEscape(mixed), "demo-helpdesk")
				var got []dirgate.Object
				if r.status != 200 {
					t.Errorf("%s: %d %s", forged.name, r.status, r.body)
				} else if err := json.Unmarshal(r.body, &got); err != nil {
					t.Fatal(err)
				} else if !slices.Equal(dns(got), want) {
					t.Errorf("%s: the help desk's token sees %q in %s (its own view is %q, the administrator's has %d members)", forged.name, dns(got), mixed, want, all)
				}
				if h := explain(froot, "demo-helpdesk"); h.status != 403 {
					t.Errorf("%s: the help desk's token explains the administrator's decisions: %d %s", forged.name, h.status, h.body)
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
