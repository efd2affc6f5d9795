package cache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/redis/go-redis/v9"
)

// The change feed's keys share one hash tag, so that the scripts below, which touch
// several of them, run on one Cluster slot:
//
//	<prefix>{changefeed}:leader   the reading instance's id, with the lease as expiry
//	<prefix>{changefeed}:pos      the position (JSON), written only by the leader
//	<prefix>{changefeed}:seq      the number of the last event
//	<prefix>{changefeed}:events   a stream of events, trimmed to about maxEvents
type redisFeed struct {
	client                   redis.UniversalClient
	leader, pos, seq, events string
}

// maxEvents bounds the stream. An instance that falls further behind sees a gap in
// the sequence numbers and drops everything it keeps locally.
const maxEvents = 1000

// maxEventGUIDs bounds what a follower accepts from one event.
const maxEventGUIDs = 2 * DefaultFeedMaxBatch

func (r *redisStore) feed(prefix string) *redisFeed {
	k := prefix + "{changefeed}:"
	return &redisFeed{client: r.client, leader: k + "leader", pos: k + "pos", seq: k + "seq", events: k + "events"}
}

// leadScript renews the lease of ARGV[1] or claims a free one, for ARGV[2] ms.
var leadScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if not v then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0`)

// releaseScript deletes the lease if ARGV[1] holds it.
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`)

// storePosScript stores ARGV[2] as the position if ARGV[1] holds the lease: a leader
// that lost its lease (paused, partitioned) cannot move the position of its successor.
var storePosScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[2], ARGV[2])
  return 1
end
return 0`)

// publishScript numbers an event and appends it to the stream.
var publishScript = redis.NewScript(`
local seq = redis.call('INCR', KEYS[1])
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[1], '*', 'seq', seq, 'all', ARGV[2], 'groups', ARGV[3], 'guids', ARGV[4])
return seq`)

func (f *redisFeed) lead(ctx context.Context, id string, lease time.Duration) (bool, error) {
	n, err := leadScript.Run(ctx, f.client, []string{f.leader}, id, lease.Milliseconds()).Int()
	if err != nil {
		return false, fmt.Errorf("lease: %w", err)
	}
	return n == 1, nil
}

func (f *redisFeed) release(ctx context.Context, id string) error {
	return releaseScript.Run(ctx, f.client, []string{f.leader}, id).Err()
}

func (f *redisFeed) position(ctx context.Context) (*dirgate.ChangePosition, error) {
	v, err := f.client.Get(ctx, f.pos).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	p, err := decodePosition(v)
	if err != nil {
		return nil, nil // unreadable: as if none was stored (the reader resyncs)
	}
	return p, nil
}

func (f *redisFeed) storePosition(ctx context.Context, id string, p dirgate.ChangePosition) (bool, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return false, err
	}
	n, err := storePosScript.Run(ctx, f.client, []string{f.leader, f.pos}, id, string(b)).Int()
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

func (f *redisFeed) publish(ctx context.Context, ev FeedEvent) error {
	return publishScript.Run(ctx, f.client, []string{f.seq, f.events}, maxEvents, flag(ev.All), flag(ev.Groups),
		strings.Join(ev.GUIDs, ",")).Err()
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
			out = append(out, parseEvent(m.ID, m.Values))
		}
	}
	return out, nil
}

// parseEvent reads an event from the stream: untrusted input. Anything malformed
// becomes an event that drops everything.
func parseEvent(id string, vals map[string]any) streamEvent {
	str := func(k string) string { s, _ := vals[k].(string); return s }
	seq, err := strconv.ParseInt(str("seq"), 10, 64)
	e := streamEvent{pos: streamPos{id: id, seq: seq}, ev: FeedEvent{All: str("all") != "0", Groups: str("groups") != "0"}}
	if err != nil {
		e.ev.All = true
		return e
	}
	if g := str("guids"); g != "" && !e.ev.All {
		parts := strings.Split(g, ",")
		if len(parts) > maxEventGUIDs {
			e.ev.All = true
			return e
		}
		for _, p := range parts {
			if !canonicalGUID(p) {
				e.ev.All, e.ev.GUIDs = true, nil
				return e
			}
			e.ev.GUIDs = append(e.ev.GUIDs, p)
		}
	}
	return e
}

// setTokens gives each group a new token in one pipeline.
func (r *redisStore) setTokens(ctx context.Context, k keys, guids []string, ttl time.Duration) error {
	cmds, err := r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, g := range guids {
			p.Set(ctx, k.version(g), newToken(), ttlOf(ttl))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("redis set tokens: %w", err)
	}
	for _, c := range cmds {
		if c.Err() != nil {
			return fmt.Errorf("redis set tokens: %w", c.Err())
		}
	}
	return nil
}
