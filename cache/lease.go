package cache

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Leases let an instance serve its first level without reading version tokens on
// every request, with the invalidation guarantee of docs/cache.md unchanged.
//
// Every token write (a removal or addition through dirgate, the change feed's bumps)
// is followed by an announcement: the store's invalidation sequence number is
// incremented and a nudge published. Each instance holds a lease in the store: a
// field naming the last sequence number it has applied and an expiry in the store's
// clock. Applying a number means dropping the trust of every first-level entry
// (gen is incremented) before reporting it. The renewal script extends the lease only
// when the instance reports the current number, so a lease that outlives an
// announcement belongs to an instance that applied it. A removal is answered only
// once every live lease has applied its announcement, or has expired.
//
// An instance trusts a first-level entry, and serves it without a read, while its own
// lease is valid (counted from before the renewal was sent, less a margin, on its
// monotonic clock) and the entry was found current by a token read sent after the
// last drop. Anything else (no lease, an entry verified before a drop, Redis
// unreachable) falls back to the per-request token read.
//
// Redis keeps everything in one hash, <prefix>{lease}, so that each script touches one
// Cluster slot and a loss (restart, eviction, flush) loses the sequence number with
// the leases: the hash's incarnation ("inc") then changes, and a writer that cannot
// see its own incarnation waits out a whole lease instead of trusting what it reads.
type lease struct {
	client  redis.UniversalClient
	key     string
	channel string
	dur     time.Duration
	margin  time.Duration
	timeout time.Duration
	id      string
	log     *slog.Logger

	base  time.Time    // monotonic origin of until
	until atomic.Int64 // nanoseconds since base before which the lease is held; 0 none
	gen   atomic.Uint64

	// Owned by the renewal loop.
	appliedInc string
	appliedSeq int64
	failing    bool // the last renewal failed; logged once until one succeeds

	nudge chan struct{}
	stop  chan struct{}
	done  chan struct{}

	// testHookRenew, when set by a test, is asked before each renewal; false skips it
	// (an instance that stopped answering).
	testHookRenew atomic.Pointer[func() bool]
}

// The hash: "inc" its incarnation, "born" when it was created (the store's clock, in
// ms), "seq" the sequence number, and "h:<id>" each lease as
// "<applied seq>:<expiry ms>:<duration ms>".
// A script that finds no hash creates one; one created less than a lease ago may have
// replaced a hash whose leases are still held, which writers must wait out.

// luaPrelude starts every script: now is the store's clock in ms, and hash creates
// the hash when it is missing (with the incarnation and starting seq given) and
// returns its incarnation.
const luaPrelude = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function hash(newInc, newSeq)
  local inc = redis.call('HGET', KEYS[1], 'inc')
  if not inc then
    redis.call('HSET', KEYS[1], 'inc', newInc, 'seq', newSeq, 'born', string.format('%d', now))
    inc = newInc
  end
  return inc
end
`

// renewScript: KEYS[1] the hash; ARGV id, applied incarnation, applied seq, lease ms,
// a new incarnation and starting seq (used if the hash holds none). Returns
// {inc, seq, 1 if the lease was extended}.
var renewScript = redis.NewScript(luaPrelude + `
local inc = hash(ARGV[5], ARGV[6])
local seq = redis.call('HGET', KEYS[1], 'seq')
local f = 'h:' .. ARGV[1]
if ARGV[2] == inc and ARGV[3] == seq then
  redis.call('HSET', KEYS[1], f, seq .. ':' .. string.format('%d', now + tonumber(ARGV[4])) .. ':' .. ARGV[4])
  return {inc, seq, 1}
end
return {inc, seq, 0}`)

// announceScript: KEYS[1] the hash; ARGV a new incarnation and starting seq, lease ms.
// Returns {inc, seq, ms for which leases of a hash this one replaced may still be held}.
var announceScript = redis.NewScript(luaPrelude + `
local inc = hash(ARGV[1], ARGV[2])
local seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
local born = tonumber(redis.call('HGET', KEYS[1], 'born') or '0') or 0
local young = born + tonumber(ARGV[3]) - now
if young < 0 then young = 0 end
if young > tonumber(ARGV[3]) then young = tonumber(ARGV[3]) end
return {inc, seq, young}`)

// awaitScript: KEYS[1] the hash; ARGV inc, seq, grace ms. Returns {how many leases
// have not applied seq, the longest duration among them in ms}; {-1, 0} if the hash is
// not the incarnation given. A lease that has not applied it counts until its expiry is
// grace ms past, however expired it looks: the store's wall clock may jump, and the
// writer's own deadline bounds the wait anyway.
var awaitScript = redis.NewScript(luaPrelude + `
if redis.call('HGET', KEYS[1], 'inc') ~= ARGV[1] then
  return {-1, 0}
end
local want = tonumber(ARGV[2])
local grace = tonumber(ARGV[3])
local all = redis.call('HGETALL', KEYS[1])
local pending, longest = 0, 0
for i = 1, #all, 2 do
  local f, v = all[i], all[i + 1]
  if string.sub(f, 1, 2) == 'h:' then
    local a, exp, dur = string.match(v, '^(%d+):(%d+):(%d+)$')
    if not a or tonumber(exp) + grace <= now then
      redis.call('HDEL', KEYS[1], f)
    elseif tonumber(a) < want then
      pending = pending + 1
      if tonumber(dur) > longest then longest = tonumber(dur) end
    end
  end
end
return {pending, longest}`)

// leaseGrace is how many lease durations an expired lease is kept before it is
// dropped: until then a removal waits a whole lease for an instance that stopped
// without giving its lease up (killed), rather than trust the store's clock.
const leaseGrace = 10

func newLease(client redis.UniversalClient, prefix string, dur, timeout time.Duration, log *slog.Logger) *lease {
	l := &lease{
		client: client, key: prefix + "{lease}", channel: prefix + "{lease}:nudge",
		dur: dur, margin: dur/10 + 5*time.Millisecond, timeout: timeout, id: rand.Text(), log: log,
		base: time.Now(), nudge: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	l.gen.Store(1)
	return l
}

// newIncarnation returns a fresh incarnation and a random starting sequence number
// (below 2^40, far from the 2^53 where Lua's numbers lose precision).
func newIncarnation() (string, string) {
	return rand.Text(), strconv.FormatInt(mrand.Int64N(1<<40), 10)
}

// held reports whether the lease may be relied on now.
func (l *lease) held() bool {
	return l != nil && int64(time.Since(l.base)) < l.until.Load()
}

// current is the generation a token read sent after this call vouches for.
func (l *lease) current() uint64 {
	if l == nil {
		return 0
	}
	return l.gen.Load()
}

// trusts reports whether e may be served without reading its tokens.
func (l *lease) trusts(e *entry) bool {
	return l != nil && e.trust.Load() == l.gen.Load() && l.held()
}

// mark records that e was found current by a read sent when the generation was g.
func (l *lease) mark(e *entry, g uint64) {
	if l != nil && g != 0 {
		e.trust.Store(g)
	}
}

// drop withdraws the trust of every entry.
func (l *lease) drop() {
	if l != nil {
		l.gen.Add(1)
	}
}

// run renews the lease every quarter of its duration, and at once when nudged.
func (l *lease) run() {
	defer close(l.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sub := l.client.Subscribe(ctx, l.channel)
	defer sub.Close()
	// The confirmation tells whether nudges can arrive (an ACL user may lack the
	// channel); go-redis keeps retrying either way.
	sctx, scancel := context.WithTimeout(ctx, 10*l.timeout)
	if _, err := sub.Receive(sctx); err != nil {
		l.log.Warn("cache: lease nudges unavailable; removals wait for instances' regular renewals (a quarter of the lease)",
			"channel", l.channel, "error", err)
	}
	scancel()
	go func() {
		for range sub.Channel() {
			select {
			case l.nudge <- struct{}{}:
			default:
			}
		}
	}()
	t := time.NewTicker(l.dur / 4)
	defer t.Stop()
	for {
		l.renew(ctx)
		select {
		case <-l.stop:
			return
		case <-t.C:
		case <-l.nudge:
		}
	}
}

// renew reports what this instance has applied; when the store has moved on, it drops
// every entry's trust and reports again. A few rounds at most: under a flood of
// announcements the lease lapses, and writers wait for its expiry instead.
func (l *lease) renew(ctx context.Context) {
	if h := l.testHookRenew.Load(); h != nil && !(*h)() {
		return
	}
	for range 3 {
		sent := time.Since(l.base)
		inc, seq := newIncarnation()
		rctx, cancel := context.WithTimeout(ctx, l.timeout)
		res, err := renewScript.Run(rctx, l.client, []string{l.key}, l.id, l.appliedInc,
			strconv.FormatInt(l.appliedSeq, 10), l.dur.Milliseconds(), inc, seq).Slice()
		cancel()
		if err == nil && len(res) != 3 {
			err = errors.New("malformed reply")
		}
		if err != nil {
			// The lease runs out; requests read tokens again.
			if !l.failing {
				l.failing = true
				l.log.Warn("cache: lease renewal failed; cached listings read their version tokens until it is renewed", "error", err)
			}
			return
		}
		curInc, _ := res[0].(string)
		cur, err := strconv.ParseInt(fmt.Sprint(res[1]), 10, 64)
		if err != nil {
			return
		}
		if ok, _ := res[2].(int64); ok == 1 {
			l.until.Store(int64(sent + l.dur - l.margin))
			if l.failing {
				l.failing = false
				l.log.Info("cache: lease renewed")
			}
			return
		}
		l.drop()
		l.appliedInc, l.appliedSeq = curInc, cur
	}
}

// announcement identifies one increment of the sequence number.
type announcement struct {
	inc   string
	seq   int64
	young time.Duration // leases of a hash this one replaced may be held this long
	at    time.Time     // when the reply came: no lease renewed before it outlives at+dur
}

// announce increments the sequence number and nudges every instance. It must follow
// the token writes it announces.
func (l *lease) announce(ctx context.Context) (announcement, error) {
	var a announcement
	inc, seq := newIncarnation()
	res, err := announceScript.Run(ctx, l.client, []string{l.key}, inc, seq, l.dur.Milliseconds()).Slice()
	if err != nil {
		return a, fmt.Errorf("redis announce: %w", err)
	}
	a.at = time.Now()
	if len(res) != 3 {
		return a, errors.New("redis announce: malformed reply")
	}
	a.inc, _ = res[0].(string)
	n, ok1 := res[1].(int64)
	young, ok2 := res[2].(int64)
	if a.inc == "" || !ok1 || !ok2 {
		return a, errors.New("redis announce: malformed reply")
	}
	a.seq, a.young = n, time.Duration(young)*time.Millisecond
	// This instance renews at once, without the nudge's round trip. A lost nudge
	// delays the others' acknowledgements to their next renewal, nothing more.
	select {
	case l.nudge <- struct{}{}:
	default:
	}
	_ = l.client.Publish(ctx, l.channel, "1").Err()
	return a, nil
}

// await returns once every lease has applied a, or could have been held no longer: a
// lease's duration (and a margin) after the announcement's reply, which is also what
// it waits when the store cannot tell. Every lease confirmed before the announcement
// ran has run out by then on its holder's own clock, and any confirmed after it has
// applied a.
func (l *lease) await(ctx context.Context, a announcement) {
	deadline := a.at.Add(l.dur + l.margin)
	if a.young > 0 {
		// The hash is new, so leases in the one it replaced cannot be seen.
		time.Sleep(time.Until(a.at.Add(a.young + l.margin)))
	}
	grace := (leaseGrace * l.dur).Milliseconds()
	pause := time.Millisecond
	for {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.timeout)
		res, err := awaitScript.Run(actx, l.client, []string{l.key}, a.inc, a.seq, grace).Int64Slice()
		cancel()
		if err != nil || len(res) != 2 || res[0] < 0 {
			break
		}
		if res[0] == 0 {
			return
		}
		// An instance configured with a longer lease than this one's is waited for
		// as long as its own lease can last.
		if d := time.Duration(res[1]) * time.Millisecond; d > l.dur {
			deadline = later(deadline, a.at.Add(d+d/10+5*time.Millisecond))
		}
		if time.Now().Add(pause).After(deadline) {
			break
		}
		time.Sleep(pause)
		pause = min(2*pause, 20*time.Millisecond)
	}
	if time.Until(deadline) < 0 {
		return
	}
	time.Sleep(time.Until(deadline))
}

// close stops renewing and gives the lease up, so that writers do not wait for it;
// the cache trusts nothing from then on.
func (l *lease) close() {
	close(l.stop)
	<-l.done
	l.until.Store(0)
	l.drop()
	ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
	defer cancel()
	_ = l.client.HDel(ctx, l.key, "h:"+l.id).Err()
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
