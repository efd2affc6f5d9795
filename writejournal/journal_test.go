package writejournal

import (
	"encoding/json"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/seal"
	"github.com/dirgate/dirgate/redisconn"
	"github.com/dirgate/dirgate/test/harness/redistest"
	"github.com/redis/go-redis/v9"
)

// TestJournalRoundTrip: writes recorded by one instance are returned, oldest first,
// by another sharing Redis, for their group only; invalid writes are refused.
func TestJournalRoundTrip(t *testing.T) {
	r := newRedis(t)
	a, b := r.journal(t, nil, nil), r.journal(t, nil, nil)
	now := time.Now()
	removed := write(testGUID(2, 1), false, now.Add(-time.Second))
	added := write(testGUID(2, 2), true, now)
	added.Server = "ldap://dc2.corp.example.com"
	added.Origin, added.USN = testGUID(9, 9), 4711 // the DC's stamp travels with the write
	record(t, a, added, time.Minute)
	record(t, a, removed, time.Minute)
	sameWrites(t, recent(t, b, jGroup), []dirgate.MembershipWrite{removed, added})
	sameWrites(t, recent(t, b, jGroup2), nil)

	bad := map[string]dirgate.MembershipWrite{
		"member not a GUID":   {Group: jGroup, Member: "CN=x", At: now},
		"member upper-case":   {Group: jGroup, Member: strings.ToUpper(testGUID(2, 3)), At: now},
		"group in braces":     {Group: "{" + jGroup + "}", Member: testGUID(2, 3), At: now},
		"server over 512":     {Group: jGroup, Member: testGUID(2, 3), Server: strings.Repeat("x", 513), At: now},
		"server not UTF-8":    {Group: jGroup, Member: testGUID(2, 3), Server: "\xff", At: now},
		"no time":             {Group: jGroup, Member: testGUID(2, 3)},
		"origin not a GUID":   {Group: jGroup, Member: testGUID(2, 3), At: now, Origin: "dc1", USN: 1},
		"negative USN":        {Group: jGroup, Member: testGUID(2, 3), At: now, Origin: testGUID(9, 9), USN: -1},
		"over the value size": {Group: jGroup, Member: testGUID(2, 3), Server: strings.Repeat("<", 512), At: now}, // JSON escapes each to 6 bytes
	}
	for name, w := range bad {
		if err := a.Record(t.Context(), w, time.Minute); err == nil {
			t.Errorf("%s: recorded", name)
		}
	}
	if err := a.Record(t.Context(), write(testGUID(2, 3), true, now), 0); err == nil {
		t.Error("a write with no window was recorded")
	}
	if _, err := a.Recent(t.Context(), strings.ToUpper(jGroup)); err == nil {
		t.Error("Recent accepted a group not in canonical form")
	}
	sameWrites(t, recent(t, b, jGroup), []dirgate.MembershipWrite{removed, added})

}

// TestJournalCluster: both of a group's keys carry its hash tag, so the scripts run
// in a Redis Cluster, for groups whose keys live on different nodes.
func TestJournalCluster(t *testing.T) {
	rcfg := redisconn.Config{Addrs: redistest.StartCluster(t).Addrs(), Mode: redisconn.ModeCluster}
	a, b := open(t, rcfg, Config{}), open(t, rcfg, Config{})
	now := time.Now()
	for i := range 8 { // their slots fall on all three nodes
		w := write(testGUID(2, i), i%2 == 0, now)
		w.Group = testGUID(1, 100+i)
		record(t, a, w, time.Minute)
		sameWrites(t, recent(t, b, w.Group), []dirgate.MembershipWrite{w})
	}
}

// TestJournalNewestWins: of two writes of one member, the later At stays, whichever
// instance records it last.
func TestJournalNewestWins(t *testing.T) {
	r := newRedis(t)
	a, b := r.journal(t, nil, nil), r.journal(t, nil, nil)
	m := testGUID(2, 1)
	now := time.Now()
	removal := write(m, false, now)
	record(t, a, removal, time.Minute)
	record(t, b, write(m, true, now.Add(-time.Millisecond)), time.Minute) // older, arrives later
	sameWrites(t, recent(t, a, jGroup), []dirgate.MembershipWrite{removal})
	addition := write(m, true, now.Add(time.Millisecond))
	record(t, b, addition, time.Minute)
	sameWrites(t, recent(t, a, jGroup), []dirgate.MembershipWrite{addition})
	if key, _ := a.keys(jGroup); r.rc.HLen(t.Context(), key).Val() != 1 {
		t.Error("more than one field for one member")
	}
}

// TestJournalWindow: a write is returned until its At plus its window, even while
// the key lives on for a longer window; a later shorter window never shortens the
// key's expiry; a write already past its window is not stored.
func TestJournalWindow(t *testing.T) {
	r := newRedis(t)
	clock := newFakeClock()
	j := r.journal(t, clock, nil)
	long := write(testGUID(2, 1), false, clock.Now())
	short := write(testGUID(2, 2), false, clock.Now())
	record(t, j, long, time.Hour)
	record(t, j, short, time.Minute)
	key, order := j.keys(jGroup)
	for _, k := range []string{key, order} {
		if ttl := r.rc.PTTL(t.Context(), k).Val(); ttl < 59*time.Minute {
			t.Errorf("%s expires in %s after a 1h write then a 1m one", k, ttl)
		}
	}
	sameWrites(t, recent(t, j, jGroup), []dirgate.MembershipWrite{long, short})
	clock.Advance(time.Minute - time.Millisecond)
	sameWrites(t, recent(t, j, jGroup), []dirgate.MembershipWrite{long, short})
	clock.Advance(time.Millisecond)
	sameWrites(t, recent(t, j, jGroup), []dirgate.MembershipWrite{long})
	if n := r.rc.HLen(t.Context(), key).Val(); n != 2 {
		t.Fatalf("the test needs the short write still in Redis: %d fields", n)
	}
	record(t, j, write(testGUID(2, 3), true, clock.Now().Add(-2*time.Minute)), time.Minute)
	if n := r.rc.HLen(t.Context(), key).Val(); n != 2 {
		t.Errorf("a write past its window was stored: %d fields", n)
	}
	clock.Advance(time.Hour)
	sameWrites(t, recent(t, j, jGroup), nil)
}

// TestJournalRefusesForgedValues: values changed, written without the secret, or
// moved to another member or group are left out, one log line per read; the
// authentic ones are still returned. A key of another type reads as empty and is
// replaced by the next write.
func TestJournalRefusesForgedValues(t *testing.T) {
	r := newRedis(t)
	log, logged := logTo()
	j := r.journal(t, nil, log)
	now := time.Now()
	w1, w2 := write(testGUID(2, 1), false, now), write(testGUID(2, 2), true, now.Add(time.Millisecond))
	other := write(testGUID(2, 3), false, now)
	other.Group = jGroup2
	record(t, j, w1, time.Minute)
	record(t, j, w2, time.Minute)
	record(t, j, other, time.Minute)
	key, _ := j.keys(jGroup)
	key2, _ := j.keys(jGroup2)
	ctx := t.Context()
	v1 := r.rc.HGet(ctx, key, w1.Member).Val()
	unsealed, _ := json.Marshal(value{MembershipWrite: write(testGUID(2, 5), false, now), Until: now.Add(time.Hour)})
	forged := map[string]string{
		testGUID(2, 4): v1,                                          // moved to another member
		testGUID(2, 3): r.rc.HGet(ctx, key2, other.Member).Val(),    // moved from another group
		testGUID(2, 5): string(unsealed),                            // written without the secret
		testGUID(2, 6): v1[:len(v1)-2] + "0}",                       // changed
		testGUID(2, 7): j.sealer.Seal(key+"|"+testGUID(2, 7), "{}"), // sealed but not a write
	}
	for f, v := range forged {
		if err := r.rc.HSet(ctx, key, f, v).Err(); err != nil {
			t.Fatal(err)
		}
	}
	sameWrites(t, recent(t, j, jGroup), []dirgate.MembershipWrite{w1, w2})
	if n := strings.Count(logged(), "do not verify"); n != 1 {
		t.Errorf("%d log lines for one read, want 1:\n%s", n, logged())
	}
	if !strings.Contains(logged(), "refused="+strconv.Itoa(len(forged))) {
		t.Errorf("the log line does not count %d refusals:\n%s", len(forged), logged())
	}

	if err := r.rc.Set(ctx, key, "not a hash", 0).Err(); err != nil {
		t.Fatal(err)
	}
	sameWrites(t, recent(t, j, jGroup), nil)
	if n := strings.Count(logged(), "do not verify"); n != 2 {
		t.Errorf("a key of another type was not logged:\n%s", logged())
	}
	w3 := write(testGUID(2, 8), true, now)
	record(t, j, w3, time.Minute)
	sameWrites(t, recent(t, j, jGroup), []dirgate.MembershipWrite{w3})
}

// TestJournalBounds: a group keeps its newest dirgate.MaxMembershipWrites writes;
// a hash grown past the bound by someone else is read only up to it, and is started
// afresh by the next write; a value or field over its size bound is refused inside
// Redis, without crossing the network.
func TestJournalBounds(t *testing.T) {
	r := newRedis(t)
	log, logged := logTo()
	j := r.journal(t, nil, log)
	ctx := t.Context()
	bound := dirgate.MaxMembershipWrites
	const extra = 10
	t0 := time.Now()
	for i := range bound + extra {
		record(t, j, write(testGUID(3, i), false, t0.Add(time.Duration(i)*time.Microsecond)), time.Hour)
	}
	key, order := j.keys(jGroup)
	if n, z := r.rc.HLen(ctx, key).Val(), r.rc.ZCard(ctx, order).Val(); n != int64(bound) || z != int64(bound) {
		t.Errorf("%d fields and %d ordered after %d writes, want %d", n, z, bound+extra, bound)
	}
	ws := recent(t, j, jGroup)
	if len(ws) != bound || ws[0].Member != testGUID(3, extra) || ws[len(ws)-1].Member != testGUID(3, bound+extra-1) {
		t.Fatalf("got %d writes from %s to %s, want the newest %d", len(ws), ws[0].Member, ws[len(ws)-1].Member, bound)
	}
	record(t, j, write(testGUID(3, bound+extra), false, t0.Add(-time.Second)), time.Hour) // older than all: forgotten at once
	if ws := recent(t, j, jGroup); len(ws) != bound || ws[0].Member != testGUID(3, extra) {
		t.Errorf("a write older than every remembered one displaced one (%d, first %s)", len(ws), ws[0].Member)
	}
	if strings.Contains(logged(), "do not verify") {
		t.Errorf("writes dirgate made were refused:\n%s", logged())
	}

	// Someone else's hash of 2×bound fields, without the order: read up to the bound.
	key2, _ := j.keys(jGroup2)
	if _, err := r.rc.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range 2 * bound {
			p.HSet(ctx, key2, testGUID(4, i), "forged")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if ws := recent(t, j, jGroup2); len(ws) != 0 {
		t.Errorf("%d forged writes returned", len(ws))
	}
	if l := logged(); !strings.Contains(l, "refused="+strconv.Itoa(bound)+" ") || !strings.Contains(l, "fields="+strconv.Itoa(2*bound)) {
		t.Errorf("the read did not stop at the bound, or did not say so:\n%s", l)
	}
	w := write(testGUID(2, 1), true, time.Now())
	w.Group = jGroup2
	record(t, j, w, time.Hour)
	if n := r.rc.HLen(ctx, key2).Val(); n != 1 {
		t.Errorf("a write to an over-full hash left %d fields", n)
	}
	sameWrites(t, recent(t, j, jGroup2), []dirgate.MembershipWrite{w})

	// A value of 16 MiB and a long field: refused in Redis, not transferred.
	if err := r.rc.HSet(ctx, key2, testGUID(4, 1), strings.Repeat("x", 16<<20), strings.Repeat("f", 1<<20), "x").Err(); err != nil {
		t.Fatal(err)
	}
	before := sentBytes(t, r.rc)
	sameWrites(t, recent(t, j, jGroup2), []dirgate.MembershipWrite{w})
	if n := sentBytes(t, r.rc) - before; n > 64<<10 {
		t.Errorf("Redis sent %d bytes for one read: the large value or field crossed the network", n)
	}
	if !strings.Contains(logged(), "over the size bound") {
		t.Errorf("the over-size values were not logged:\n%s", logged())
	}
}

// scriptMicros is the time Redis spent per EVALSHA since its statistics were last
// reset (INFO commandstats), in µs.
func scriptMicros(t testing.TB, rc *redis.Client) float64 {
	t.Helper()
	info, err := rc.Info(t.Context(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(l, "cmdstat_evalsha:"); ok {
			for _, f := range strings.Split(v, ",") {
				if us, ok := strings.CutPrefix(f, "usec_per_call="); ok {
					n, _ := strconv.ParseFloat(us, 64)
					return n
				}
			}
		}
	}
	t.Fatal("no cmdstat_evalsha in INFO commandstats")
	return 0
}

// sentBytes is what Redis has sent to all its clients.
func sentBytes(t testing.TB, rc *redis.Client) int64 {
	t.Helper()
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

// TestJournalRedisDown: a stopped Redis, or one that accepts and never answers,
// fails Record and Recent within the journal's timeout, then at once while the
// journal bypasses Redis; the next success after the retry interval brings it back.
func TestJournalRedisDown(t *testing.T) {
	const timeout = 100 * time.Millisecond
	openAt := func(t *testing.T, addr string) *Journal {
		return open(t, redisconn.Config{Addrs: []string{addr}}, Config{Timeout: timeout, RetryInterval: 300 * time.Millisecond})
	}
	check := func(t *testing.T, j *Journal, bound time.Duration) {
		t.Helper()
		start := time.Now()
		if err := j.Record(t.Context(), write(testGUID(2, 1), false, time.Now()), time.Minute); err == nil {
			t.Error("Record succeeded")
		}
		if d := time.Since(start); d > bound {
			t.Errorf("Record failed after %s, want within %s", d, bound)
		}
		start = time.Now()
		if _, err := j.Recent(t.Context(), jGroup); err == nil {
			t.Error("Recent succeeded")
		}
		if d := time.Since(start); d > 50*time.Millisecond {
			t.Errorf("Recent failed after %s while the journal bypasses Redis", d)
		}
	}
	t.Run("stopped", func(t *testing.T) {
		r := newRedis(t)
		j := openAt(t, r.srv.Addr())
		record(t, j, write(testGUID(2, 1), false, time.Now()), time.Minute)
		r.srv.Stop()
		check(t, j, timeout+200*time.Millisecond)
		r.srv.Restart()
		waitFor(t, "the journal to use Redis again", func() bool {
			return j.Record(t.Context(), write(testGUID(2, 2), false, time.Now()), time.Minute) == nil
		})
		if ws := recent(t, j, jGroup); len(ws) != 1 {
			t.Errorf("%d writes after a restart without persistence and one write, want 1", len(ws))
		}
	})
	t.Run("silent", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		var mu sync.Mutex
		var conns []net.Conn
		t.Cleanup(func() {
			mu.Lock()
			defer mu.Unlock()
			for _, c := range conns {
				c.Close()
			}
		})
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
		}()
		check(t, openAt(t, l.Addr().String()), timeout+200*time.Millisecond)
	})
}

// TestJournalErrorReply: a script Redis refuses (here: scripting renamed away) fails
// the call without making the journal bypass Redis.
func TestJournalErrorReply(t *testing.T) {
	srv := redistest.Start(t, "--rename-command", "EVALSHA", "", "--rename-command", "EVAL", "")
	j := open(t, redisconn.Config{Addrs: []string{srv.Addr()}}, Config{})
	if err := j.Record(t.Context(), write(testGUID(2, 1), false, time.Now()), time.Minute); err == nil {
		t.Fatal("Record succeeded without scripting")
	}
	if _, err := j.Recent(t.Context(), jGroup); err == nil {
		t.Fatal("Recent succeeded without scripting")
	}
	if !j.health.ok(time.Now()) {
		t.Error("an error reply made the journal bypass Redis")
	}
}

// TestJournalValueRoundTrip: what Record stores parses back to the write.
func TestJournalValueRoundTrip(t *testing.T) {
	w := write(testGUID(2, 1), true, time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC))
	blob, err := json.Marshal(value{MembershipWrite: w, Until: w.At.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	got, until, err := parseValue(string(blob), jGroup, w.Member)
	if err != nil || got != w || !until.Equal(w.At.Add(time.Minute)) {
		t.Fatalf("got %+v until %s, %v; want %+v", got, until, err, w)
	}
	if _, _, err := parseValue(string(blob), jGroup2, w.Member); err == nil {
		t.Error("a write parsed as another group's")
	}
	if _, _, err := parseValue(string(blob), jGroup, testGUID(2, 2)); err == nil {
		t.Error("a write parsed as another member's")
	}
}

// FuzzJournalValue: a value read from Redis never panics the decoder, and one it
// accepts is a valid write of the field's group and member, which Record would
// store and which decodes again to itself, sealed.
func FuzzJournalValue(f *testing.F) {
	w := write(testGUID(2, 1), true, time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC))
	blob, _ := json.Marshal(value{MembershipWrite: w, Until: w.At.Add(time.Minute)})
	f.Add(string(blob))
	f.Add(`{"group":"` + jGroup + `","member":"` + w.Member + `","at":"2026-01-02T03:04:05Z","until":"2026-01-02T03:04:04Z"}`)
	f.Add(`{"GROUP":"` + jGroup + `","member":"` + w.Member + `","server":"\ud800","at":"0001-01-01T00:00:00Z"}`)
	f.Add(`[]`)
	f.Add(``)
	j := &Journal{prefix: DefaultKeyPrefix, sealer: seal.New(testSecret)}
	key, _ := j.keys(jGroup)
	f.Fuzz(func(t *testing.T, blob string) {
		got, until, err := parseValue(blob, jGroup, w.Member)
		sealed := j.sealer.Seal(sealKey(key, w.Member), blob)
		again, live, err2 := j.decode(key, jGroup, w.Member, sealed, until.Add(-time.Nanosecond))
		if (err == nil) != (err2 == nil) {
			t.Fatalf("parse: %v; sealed decode: %v", err, err2)
		}
		if _, _, err := j.decode(key, jGroup, w.Member, blob, time.Now()); err == nil {
			t.Fatal("an unsealed value decoded")
		}
		if err != nil {
			return
		}
		if checkWrite(got) != nil || got.Group != jGroup || got.Member != w.Member || !until.After(got.At) {
			t.Fatalf("accepted %+v until %s", got, until)
		}
		if again != got || !live {
			t.Fatalf("sealed decode: %+v (live %v), want %+v", again, live, got)
		}
		re, err := json.Marshal(value{MembershipWrite: got, Until: until})
		if err != nil {
			t.Fatal(err)
		}
		if got2, until2, err := parseValue(string(re), jGroup, w.Member); err != nil || !got2.At.Equal(got.At) || !until2.Equal(until) || got2.Server != got.Server {
			t.Fatalf("re-encoded %s: %+v %s %v", re, got2, until2, err)
		}
	})
}

// BenchmarkJournal: a write recorded into a group's full journal (the script pops
// the oldest), a read of a full journal (4,096 writes unsealed and parsed), and a
// read of a journal of 10 writes.
func BenchmarkJournal(b *testing.B) {
	r := newRedis(b)
	j := r.journal(b, nil, nil)
	t0 := time.Now()
	for i := range dirgate.MaxMembershipWrites {
		if err := j.Record(b.Context(), write(testGUID(3, i), false, t0.Add(time.Duration(i)*time.Microsecond)), time.Hour); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 10 {
		w := write(testGUID(3, i), false, t0)
		w.Group = jGroup2
		if err := j.Record(b.Context(), w, time.Hour); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("record", func(b *testing.B) {
		i := dirgate.MaxMembershipWrites
		for b.Loop() {
			i++
			if err := j.Record(b.Context(), write(testGUID(3, i), false, t0.Add(time.Duration(i)*time.Microsecond)), time.Hour); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("recent", func(b *testing.B) {
		recent(b, j, jGroup) // the script loaded (EVAL) before the count starts
		if err := r.rc.ConfigResetStat(b.Context()).Err(); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			ws, err := j.Recent(b.Context(), jGroup)
			if err != nil || len(ws) != dirgate.MaxMembershipWrites {
				b.Fatalf("%d writes, %v", len(ws), err)
			}
		}
		b.ReportMetric(scriptMicros(b, r.rc), "redis-µs/op")
	})
	b.Run("recent-10", func(b *testing.B) {
		for b.Loop() {
			ws, err := j.Recent(b.Context(), jGroup2)
			if err != nil || len(ws) != 10 {
				b.Fatalf("%d writes, %v", len(ws), err)
			}
		}
	})
}
