package changefeed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/ldapentry"
	"github.com/dirgate/dirgate/internal/seal"
	"github.com/redis/go-redis/v9"
)

// The change feed's keys share one hash tag, so that the scripts below, which touch
// several of them, run on one Cluster slot:
//
//	<prefix>{changefeed}:leader   the reading instance's claim, with the lease as expiry
//	<prefix>{changefeed}:pos      the position (JSON), written only by the leader
//	<prefix>{changefeed}:seq      the number of the last event
//	<prefix>{changefeed}:events   a stream of events, trimmed to about maxEvents
//
// The claim, the position and every event carry an HMAC under the cache's secret
// (internal/seal), bound to their key, so that a Redis writer cannot suppress
// invalidations (docs/cache.md, "Entries in Redis are authenticated"): a position
// that does not verify is no position (the next leader resyncs, invalidating
// everything); a claim that does not verify, or whose sealed expiry has passed, is
// taken over; an event that does not verify, or is older than maxEventAge, drops
// everything on the follower.
type redisFeed struct {
	client                   redis.UniversalClient
	seal                     *seal.Sealer
	log                      *slog.Logger
	now                      func() time.Time
	leader, pos, seq, events string
}

// maxEvents bounds the stream. An instance that falls further behind sees a gap in
// the sequence numbers and drops everything it keeps locally.
const maxEvents = 1000

// maxEventGUIDs bounds what a follower accepts from one event.
const maxEventGUIDs = 2 * DefaultMaxBatch

// maxPositionBytes bounds a stored position (decodePosition), and its read: room
// for dirgate.MaxChangeMarks marks and as many follow marks besides the position (an AD source, an NTDS
// Settings DN and an invocationId, is about 150 to 200 bytes). maxSourceBytes bounds
// each source in it; encodePosition drops the oldest marks of a position that would
// not fit, so that what the leader stores is always read back.
const (
	maxPositionBytes = 16 << 10
	maxSourceBytes   = 1024
)

// clockSkew is how far instances' clocks may disagree: a claim is taken over once
// its sealed expiry is this far past. Events older than maxEventAge are refused:
// followers read them within an interval, and an older one may be a replay.
const (
	clockSkew   = 5 * time.Second
	maxEventAge = 30 * time.Second
)

func newRedisFeed(client redis.UniversalClient, prefix string, s *seal.Sealer, log *slog.Logger, now func() time.Time) *redisFeed {
	k := prefix + "{changefeed}:"
	return &redisFeed{client: client, seal: s, log: log, now: now,
		leader: k + "leader", pos: k + "pos", seq: k + "seq", events: k + "events"}
}

// A claim is "<id>|<expiry, Unix ms>|<HMAC, hex>"; the scripts recognise their own
// by the "<id>|" it starts with (ids are rand.Text(): no "|").

// leadScript sets the claim ARGV[2] for ARGV[3] ms when the key is free, holds a
// claim of ARGV[1] (the "<id>|" of the caller), or, with ARGV[4] "1", holds exactly
// ARGV[5] (a claim the caller found forged or expired); it returns 1, or {the claim
// it found}. A key of another type than a string is found as "" (not a claim).
var leadScript = redis.NewScript(`
local ty = redis.call('TYPE', KEYS[1]).ok
local v = false
if ty == 'string' then
  v = redis.call('GET', KEYS[1])
elseif ty ~= 'none' then
  v = ''
end
if not v or string.sub(v, 1, #ARGV[1]) == ARGV[1] or (ARGV[4] == '1' and v == ARGV[5]) then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return {v}`)

// releaseScript deletes the claim if ARGV[1] (an "<id>|") holds it.
var releaseScript = redis.NewScript(`
local v = redis.call('TYPE', KEYS[1]).ok == 'string' and redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`)

// storePosScript stores ARGV[2] as the position if ARGV[1] holds the lease: a leader
// that lost its lease (paused, partitioned) cannot move the position of its successor.
var storePosScript = redis.NewScript(`
local v = redis.call('TYPE', KEYS[1]).ok == 'string' and redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[1]) == ARGV[1] then
  redis.call('SET', KEYS[2], ARGV[2])
  return 1
end
return 0`)

func (f *redisFeed) claim(id string, exp time.Time) string {
	return f.seal.SealHex(f.leader, id+"|"+strconv.FormatInt(exp.UnixMilli(), 10))
}

// claimLive reports whether v is an authentic claim whose expiry has not passed.
func (f *redisFeed) claimLive(v string) bool {
	body, err := f.seal.OpenHex(f.leader, v)
	if err != nil {
		return false
	}
	_, ms, ok := strings.Cut(body, "|")
	exp, err := strconv.ParseInt(ms, 10, 64)
	return ok && err == nil && f.now().Before(time.UnixMilli(exp).Add(clockSkew))
}

func (f *redisFeed) lead(ctx context.Context, id string, lease time.Duration) (bool, error) {
	mine := f.claim(id, f.now().Add(lease))
	ok, found, err := f.runLead(ctx, id, mine, nil, lease)
	if err != nil || ok {
		return ok, err
	}
	if f.claimLive(found) {
		return false, nil // another instance leads
	}
	f.log.WarnContext(ctx, "cache: change feed: taking over a leader claim that is forged or long expired (a Redis writer?)")
	ok, _, err = f.runLead(ctx, id, mine, &found, lease)
	return ok, err
}

// runLead runs leadScript, taking over *takeOver if it is still the claim; ok
// reports whether the claim is now this instance's, found is the other one.
func (f *redisFeed) runLead(ctx context.Context, id, mine string, takeOver *string, lease time.Duration) (ok bool, found string, err error) {
	args := []any{id + "|", mine, lease.Milliseconds(), "0", ""}
	if takeOver != nil {
		args[3], args[4] = "1", *takeOver
	}
	res, err := leadScript.Run(ctx, f.client, []string{f.leader}, args...).Result()
	if err != nil {
		return false, "", fmt.Errorf("lease: %w", err)
	}
	switch v := res.(type) {
	case int64:
		return true, "", nil
	case []any:
		if len(v) == 1 {
			if s, isStr := v[0].(string); isStr {
				return false, s, nil
			}
		}
	}
	return false, "", fmt.Errorf("lease: unexpected reply %T", res)
}

func (f *redisFeed) release(ctx context.Context, id string) error {
	return releaseScript.Run(ctx, f.client, []string{f.leader}, id+"|").Err()
}

// position reads the stored position; one that does not verify is logged and read
// as none, so that the next leader resyncs.
func (f *redisFeed) position(ctx context.Context) (*dirgate.ChangePosition, error) {
	v, err := f.client.GetRange(ctx, f.pos, 0, int64(maxPositionBytes+seal.Overhead)).Result()
	if wrongType(err) {
		v, err = "?", nil // not a string: refused below
	}
	if err != nil {
		return nil, err
	}
	if v == "" {
		return nil, nil
	}
	var p *dirgate.ChangePosition
	if len(v) > maxPositionBytes+seal.Overhead {
		err = fmt.Errorf("over %d bytes", maxPositionBytes+seal.Overhead)
	} else if v, err = f.seal.Open(f.pos, v); err == nil {
		p, err = decodePosition(v)
	}
	if err != nil {
		f.log.WarnContext(ctx, "cache: change feed: refusing the stored position; the next read resyncs", "error", err)
		return nil, nil
	}
	return p, nil
}

func (f *redisFeed) storePosition(ctx context.Context, id string, p dirgate.ChangePosition) (bool, error) {
	b, err := encodePosition(p)
	if err != nil {
		return false, err
	}
	n, err := storePosScript.Run(ctx, f.client, []string{f.leader, f.pos}, id+"|", f.seal.Seal(f.pos, string(b))).Int()
	if err != nil {
		return false, fmt.Errorf("store position: %w", err)
	}
	return n == 1, nil
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// eventBody is what an event's HMAC covers: its number, time and content.
func eventBody(seq, t, all, groups, guids string) string {
	return seq + "|" + t + "|" + all + "|" + groups + "|" + guids
}

// publish numbers an event, then appends it with its HMAC. A failure between the
// two leaves a gap in the numbers, which makes followers drop everything. A counter
// or stream that Redis refuses to use (overwritten with another type or a
// non-number) is deleted and started afresh, so that a writer cannot stop events
// that way; the restart shows to followers as a gap.
func (f *redisFeed) publish(ctx context.Context, ev Event) error {
	n, err := f.client.Incr(ctx, f.seq).Result()
	if redisRefused(err) {
		f.log.WarnContext(ctx, "cache: change feed: the event counter is unusable (a Redis writer?); starting it afresh", "error", err)
		if err = f.client.Del(ctx, f.seq).Err(); err == nil {
			n, err = f.client.Incr(ctx, f.seq).Result()
		}
	}
	if err != nil {
		return err
	}
	seq, t := strconv.FormatInt(n, 10), strconv.FormatInt(f.now().UnixMilli(), 10)
	all, groups, guids := flag(ev.All), flag(ev.Groups), strings.Join(ev.GUIDs, ",")
	mac := f.seal.HexMAC(f.events, eventBody(seq, t, all, groups, guids))
	add := func() error {
		return f.client.XAdd(ctx, &redis.XAddArgs{Stream: f.events, MaxLen: maxEvents, Approx: true,
			Values: []string{"seq", seq, "t", t, "all", all, "groups", groups, "guids", guids, "mac", mac}}).Err()
	}
	err = add()
	if wrongType(err) {
		f.log.WarnContext(ctx, "cache: change feed: the event stream is not a stream (a Redis writer?); starting it afresh")
		if err = f.client.Del(ctx, f.events).Err(); err == nil {
			err = add()
		}
	}
	return err
}

// wrongType reports Redis's refusal to use a key of another type.
func wrongType(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), "WRONGTYPE")
}

// redisRefused reports an INCR that Redis refused because of the key's content
// (another type, or not an integer), not because of the connection.
func redisRefused(err error) bool {
	var rerr redis.Error
	return wrongType(err) || errors.As(err, &rerr) && strings.Contains(rerr.Error(), "not an integer")
}

// streamEnd is where a follower starts: after the last event.
func (f *redisFeed) streamEnd(ctx context.Context) (streamPos, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	msgs, err := f.client.XRevRangeN(ctx, f.events, "+", "-", 1).Result()
	if err != nil {
		return streamPos{}, err
	}
	if len(msgs) == 0 {
		return streamPos{id: "0-0"}, nil
	}
	seq, _ := strconv.ParseInt(fmt.Sprint(msgs[0].Values["seq"]), 10, 64)
	return streamPos{id: msgs[0].ID, seq: seq}, nil
}

// read waits up to block for events after from.
func (f *redisFeed) read(ctx context.Context, from streamPos, block time.Duration) ([]streamEvent, error) {
	rctx, cancel := context.WithTimeout(ctx, block+time.Second)
	defer cancel()
	res, err := f.client.XRead(rctx, &redis.XReadArgs{Streams: []string{f.events, from.id}, Count: 100, Block: block}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []streamEvent
	for _, s := range res {
		for _, m := range s.Messages {
			e := f.parseEvent(m.ID, m.Values)
			if e.refused != "" {
				f.log.WarnContext(ctx, "cache: change feed: refusing an event; dropping local identifier resolutions and principals", "reason", e.refused)
			}
			out = append(out, e)
		}
	}
	return out, nil
}

// parseEvent reads an event from the stream: untrusted input. Anything malformed,
// unauthenticated or too old becomes an event that drops everything.
func (f *redisFeed) parseEvent(id string, vals map[string]any) streamEvent {
	str := func(k string) string { s, _ := vals[k].(string); return s }
	seq, err := strconv.ParseInt(str("seq"), 10, 64)
	e := streamEvent{pos: streamPos{id: id, seq: seq}, ev: Event{All: str("all") != "0", Groups: str("groups") != "0"}}
	refuse := func(why string) streamEvent {
		e.ev.All, e.ev.GUIDs, e.refused = true, nil, why
		return e
	}
	if err != nil {
		return refuse("no sequence number")
	}
	if f.seal.VerifyHex(f.events, eventBody(str("seq"), str("t"), str("all"), str("groups"), str("guids")), str("mac")) != nil {
		return refuse("HMAC mismatch (written without the secret?)")
	}
	t, err := strconv.ParseInt(str("t"), 10, 64)
	if err != nil || f.now().Sub(time.UnixMilli(t)) > maxEventAge {
		return refuse("older than " + maxEventAge.String())
	}
	if g := str("guids"); g != "" && !e.ev.All {
		parts := strings.Split(g, ",")
		if len(parts) > maxEventGUIDs {
			return refuse("too many objects")
		}
		for _, p := range parts {
			if !canonicalGUID(p) {
				return refuse("malformed object")
			}
			e.ev.GUIDs = append(e.ev.GUIDs, p)
		}
	}
	return e
}

// feedStore is the shared part of the feed (redisFeed).
type feedStore interface {
	// lead claims the lease or renews it; it reports whether id holds it.
	lead(ctx context.Context, id string, lease time.Duration) (bool, error)
	release(ctx context.Context, id string) error
	position(ctx context.Context) (*dirgate.ChangePosition, error)
	// storePosition stores p if id still holds the lease.
	storePosition(ctx context.Context, id string, p dirgate.ChangePosition) (bool, error)
	publish(ctx context.Context, ev Event) error
	streamEnd(ctx context.Context) (streamPos, error)
	read(ctx context.Context, from streamPos, block time.Duration) ([]streamEvent, error)
}

type streamPos struct {
	id  string
	seq int64
}

type streamEvent struct {
	pos streamPos
	ev  Event
	// refused says why the event was not believed (it drops everything).
	refused string
}

// decodePosition parses a stored position: untrusted input, checked.
func decodePosition(s string) (*dirgate.ChangePosition, error) {
	if s == "" {
		return nil, nil
	}
	if len(s) > maxPositionBytes {
		return nil, errors.New("change feed: stored position is too long")
	}
	var p dirgate.ChangePosition
	if err := json.Unmarshal([]byte(s), &p); err != nil {
		return nil, fmt.Errorf("change feed: stored position: %w", err)
	}
	if p.Source == "" || p.Time.IsZero() {
		return nil, errors.New("change feed: stored position is incomplete")
	}
	if len(p.Source) > maxSourceBytes {
		return nil, errors.New("change feed: stored position's source is too long")
	}
	for _, marks := range [][]dirgate.ChangeMark{p.Marks, p.Follow} {
		if len(marks) > dirgate.MaxChangeMarks {
			return nil, fmt.Errorf("change feed: stored position has %d marks, over %d", len(marks), dirgate.MaxChangeMarks)
		}
		for _, m := range marks {
			if badMark(m) {
				return nil, errors.New("change feed: stored position has an incomplete or overlong mark")
			}
		}
	}
	return &p, nil
}

func badMark(m dirgate.ChangeMark) bool {
	return m.Source == "" || m.Time.IsZero() || len(m.Source) > maxSourceBytes
}

// encodePosition renders p for storage. Marks and follow marks decodePosition
// would refuse, those beyond dirgate.MaxChangeMarks, and the oldest ones while the
// whole is over maxPositionBytes (follow marks first), are left out: a mark is only
// a shortcut (without it, returning to its source resyncs), a follow mark too
// (without it, its source is followed from where it stands), while a position
// decodePosition refused would make every new leader resync.
func encodePosition(p dirgate.ChangePosition) ([]byte, error) {
	keep := func(marks []dirgate.ChangeMark) []dirgate.ChangeMark {
		marks = slices.DeleteFunc(slices.Clone(marks), badMark)
		if n := len(marks) - dirgate.MaxChangeMarks; n > 0 {
			marks = marks[n:]
		}
		return marks
	}
	p.Marks, p.Follow = keep(p.Marks), keep(p.Follow)
	for {
		b, err := json.Marshal(p)
		switch {
		case err != nil || len(b) <= maxPositionBytes:
			return b, err
		case len(p.Follow) > 0:
			p.Follow = p.Follow[1:]
		case len(p.Marks) > 0:
			p.Marks = p.Marks[1:]
		default:
			return b, nil
		}
	}
}

// Defaults of the settings the feed shares with the cache (cache.Config).
const (
	defaultTimeout       = 100 * time.Millisecond
	defaultRetryInterval = time.Second
	defaultKeyPrefix     = "dirgate:"
	minSecretLength      = 32
)

// canonicalGUID reports whether g is a GUID in the form the upstreams render
// (ldapentry.GUIDFromBytes): an event naming anything else is refused.
func canonicalGUID(g string) bool {
	b, err := ldapentry.GUIDToBytes(g)
	return err == nil && len(g) == 36 && ldapentry.GUIDFromBytes(b) == g
}
