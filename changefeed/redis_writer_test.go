package changefeed

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/cache"
	"github.com/dirgate/dirgate/internal/seal"
	"github.com/dirgate/dirgate/redisconn"
	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/test/harness/redistest"
	"github.com/redis/go-redis/v9"
)

// What someone able to write to Redis, without the secret, can no longer do to the
// feed (docs/auth.md, "What Redis holds"). Each test writes with a plain client.

// TestRedisWriterCannotMoveTheFeedPosition: a position written without the secret
// (far ahead, so that the changes in between would be skipped), or moved from
// another deployment's key, is refused: the next leader resyncs, invalidating every
// listing, and the refusal is logged.
func TestRedisWriterCannotMoveTheFeedPosition(t *testing.T) {
	srv := redistest.Start(t)
	dir := demo(t)
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rc.Close()
	// Another deployment, same secret, whose source is far ahead.
	other := newInstance(t, dir, cache.Config{Secret: sealSecret, Redis: redisClient(t, redisconn.Config{Addrs: []string{srv.Addr()}}), KeyPrefix: "other:", Timeout: time.Second})
	ahead := &fakeSource{}
	for range 50 {
		ahead.change(dirgate.Change{Kind: dirgate.ChangeObject, GUID: "0a0a0a0a-0000-0000-0000-000000000000", GroupsKnown: true})
	}
	of := startFeed(t, other, ahead, Config{})
	waitFor(t, "the other deployment's position", func() bool { return of.Ready(t.Context()) == nil })
	moved, err := rc.Get(t.Context(), "other:{changefeed}:pos").Result()
	if err != nil {
		t.Fatal(err)
	}
	now, _ := json.Marshal(time.Now())
	for _, forged := range []struct{ name, value string }{
		{"forged", `{"source":"fake","usn":1000000,"time":` + string(now) + `}`},
		{"moved", moved},
		{"a list", ""}, // not a string at all
	} {
		t.Run(forged.name, func(t *testing.T) {
			prefix := strings.ReplaceAll(forged.name, " ", "-") + ":"
			log, logged := logTo()
			cfg := cache.Config{Secret: sealSecret, Redis: redisClient(t, redisconn.Config{Addrs: []string{srv.Addr()}}), KeyPrefix: prefix, Timeout: time.Second, Logger: log}
			src := &fakeSource{}
			a := newInstance(t, dir, cfg)
			fa := startFeed(t, a, src, Config{})
			waitFor(t, "a position", func() bool { return fa.Ready(t.Context()) == nil })
			for range 2 {
				served(t, a, fixture.ProjectAlphaDN, dirgate.ListOptions{})
			}
			if st := served(t, a, fixture.ProjectAlphaDN, dirgate.ListOptions{}); st != dirgate.CacheHit {
				t.Fatalf("listing before the change: %s", st)
			}
			fa.Close() // gives the lease up
			posKey := prefix + "{changefeed}:pos"
			if forged.value == "" {
				rc.Del(t.Context(), posKey)
				if err := rc.RPush(t.Context(), posKey, "x").Err(); err != nil {
					t.Fatal(err)
				}
			} else if err := rc.Set(t.Context(), posKey, forged.value, 0).Err(); err != nil {
				t.Fatal(err)
			}
			// A change nobody reads until the next leader starts from the stored position.
			src.change(dirgate.Change{Kind: dirgate.ChangeGroup, GUID: object(t, dir, fixture.ProjectAlphaDN).GUID, GroupsKnown: true})
			b := newInstance(t, dir, cfg)
			startFeed(t, b, src, Config{})
			waitFor(t, "the change made while nobody read", func() bool {
				return served(t, b, fixture.ProjectAlphaDN, dirgate.ListOptions{}) == dirgate.CacheMiss
			})
			if !strings.Contains(logged(), "refusing the stored position") {
				t.Errorf("the refusal is not logged:\n%s", logged())
			}
		})
	}
}

// TestRedisWriterCannotHoldTheFeedsLease: a leader claim written without the secret
// (no expiry), empty, or of another type, is taken over, so the feed keeps reading.
func TestRedisWriterCannotHoldTheFeedsLease(t *testing.T) {
	srv := redistest.Start(t)
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rc.Close()
	for _, forged := range []string{"an-instance-that-does-not-exist", "", "a hash"} {
		key := "dirgate:{changefeed}:leader"
		rc.Del(t.Context(), key)
		if forged == "a hash" {
			if err := rc.HSet(t.Context(), key, "f", "v").Err(); err != nil {
				t.Fatal(err)
			}
		} else if err := rc.Set(t.Context(), key, forged, 0).Err(); err != nil {
			t.Fatal(err)
		}
		log, logged := logTo()
		in := newInstance(t, demo(t), cache.Config{Secret: sealSecret, Redis: redisClient(t, redisconn.Config{Addrs: []string{srv.Addr()}}), Timeout: time.Second, Logger: log})
		f := startFeed(t, in, &fakeSource{}, Config{})
		waitFor(t, "the instance to lead", f.Leader)
		if !strings.Contains(logged(), "taking over a leader claim") {
			t.Errorf("the take-over is not logged:\n%s", logged())
		}
		f.Close()
	}
}

// TestRedisWriterCannotForgeAEvent: an event appended to the stream without the
// secret, numbered as the next one (so that no gap shows), is refused: the follower
// drops everything instead of only what the event names.
func TestRedisWriterCannotForgeAEvent(t *testing.T) {
	srv := redistest.Start(t)
	dir := demo(t)
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rc.Close()
	cfg := cache.Config{Secret: sealSecret, Redis: redisClient(t, redisconn.Config{Addrs: []string{srv.Addr()}}), Timeout: time.Second}
	src := &fakeSource{}
	var mu sync.Mutex
	var got []Event
	onEvent := func(ev Event) { mu.Lock(); got = append(got, ev); mu.Unlock() }
	a, b := newInstance(t, dir, cfg), newInstance(t, dir, cfg)
	fa := startFeed(t, a, src, Config{OnEvent: onEvent})
	waitFor(t, "a leader", fa.Leader)
	startFeed(t, b, src, Config{OnEvent: onEvent})
	// One authentic event first, so that the follower has a sequence number to follow.
	guid := object(t, dir, fixture.ProjectAlphaDN).GUID
	waitFor(t, "an authentic event read by both", func() bool {
		src.change(dirgate.Change{Kind: dirgate.ChangeObject, GUID: guid, GroupsKnown: true})
		time.Sleep(50 * time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= 2
	})
	fa.Close() // no more authentic events
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	got = nil
	mu.Unlock()
	seq, err := rc.Incr(t.Context(), "dirgate:{changefeed}:seq").Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.XAdd(t.Context(), &redis.XAddArgs{Stream: "dirgate:{changefeed}:events",
		Values: []string{"seq", strconv.FormatInt(seq, 10), "all", "0", "groups", "0", "guids", guid}}).Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the forged event read", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) > 0
	})
	mu.Lock()
	defer mu.Unlock()
	for _, ev := range got {
		if !ev.All {
			t.Errorf("the follower believed a forged event: %+v", ev)
		}
	}
}

// TestRedisWriterCannotBreakTheFeedsCounter: an event counter overwritten with a
// non-number and an event stream overwritten with a string do not stop events: the
// reader starts both afresh (logged), and followers, seeing the numbers restart,
// drop everything.
func TestRedisWriterCannotBreakTheFeedsCounter(t *testing.T) {
	srv := redistest.Start(t)
	dir := demo(t)
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rc.Close()
	log, logged := logTo()
	cfg := cache.Config{Secret: sealSecret, Redis: redisClient(t, redisconn.Config{Addrs: []string{srv.Addr()}}), Timeout: time.Second,
		RetryInterval: 50 * time.Millisecond, Logger: log}
	src := &fakeSource{}
	var mu sync.Mutex
	var got []Event
	onEvent := func(ev Event) { mu.Lock(); got = append(got, ev); mu.Unlock() }
	a, b := newInstance(t, dir, cfg), newInstance(t, dir, cfg)
	fa := startFeed(t, a, src, Config{})
	waitFor(t, "a leader", fa.Leader)
	startFeed(t, b, src, Config{OnEvent: onEvent})
	guid := object(t, dir, fixture.ProjectAlphaDN).GUID
	waitFor(t, "an event read by the follower", func() bool {
		src.change(dirgate.Change{Kind: dirgate.ChangeObject, GUID: guid, GroupsKnown: true})
		time.Sleep(50 * time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		return len(got) > 0
	})
	ctx := t.Context()
	if err := rc.Set(ctx, "dirgate:{changefeed}:seq", "not a number", 0).Err(); err != nil {
		t.Fatal(err)
	}
	rc.Del(ctx, "dirgate:{changefeed}:events")
	if err := rc.Set(ctx, "dirgate:{changefeed}:events", "not a stream", 0).Err(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got = nil
	mu.Unlock()
	src.change(dirgate.Change{Kind: dirgate.ChangeObject, GUID: guid, GroupsKnown: true})
	waitFor(t, "the follower to drop everything", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.ContainsFunc(got, func(ev Event) bool { return ev.All })
	})
	for _, want := range []string{"the event counter is unusable", "the event stream is not a stream"} {
		if !strings.Contains(logged(), want) {
			t.Errorf("%q is not logged:\n%s", want, logged())
		}
	}
}

// FuzzClaimLive: a leader claim read from Redis is untrusted input. Only a claim
// sealed under the secret, for this key, with an expiry to come, is live.
func FuzzClaimLive(f *testing.F) {
	now := time.Now()
	rf := &redisFeed{seal: seal.New(sealSecret), leader: "p:{changefeed}:leader", now: func() time.Time { return now }}
	live := rf.claim("ABC", now.Add(time.Second))
	f.Add(live)
	f.Add(rf.claim("ABC", now.Add(-time.Minute)))
	f.Add("ABC|" + strconv.FormatInt(now.Add(time.Hour).UnixMilli(), 10) + "|00")
	f.Add("||")
	f.Add("")
	f.Fuzz(func(t *testing.T, v string) {
		if rf.claimLive(v) && v != live {
			// Another live claim needs the secret: it must be one the sealer makes
			// (the HMAC's hex in either case).
			id, exp, _ := strings.Cut(v[:strings.LastIndexByte(v, '|')], "|")
			if !strings.EqualFold(rf.claim(id, time.UnixMilli(mustInt(t, exp))), v) {
				t.Fatalf("a claim the secret did not seal is live: %q", v)
			}
		}
	})
	if !rf.claimLive(live) {
		f.Fatal("a fresh claim is not live")
	}
	if rf.claimLive(rf.claim("ABC", now.Add(-clockSkew-time.Second))) {
		f.Fatal("a claim past its expiry and the skew is live")
	}
	moved := &redisFeed{seal: rf.seal, leader: "q:{changefeed}:leader", now: rf.now}
	if moved.claimLive(live) {
		f.Fatal("a claim moved to another key is live")
	}
}

func mustInt(t *testing.T, s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("a live claim with expiry %q", s)
	}
	return n
}
