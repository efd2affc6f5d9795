package cache

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/dirgate/dirgate"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Journal keeps the membership writes the LDAP adapter remembers
// (dirgate.MembershipWrite) in Redis, so that a write made through any instance is
// laid over listings that any instance reads from a domain controller that has not
// replicated it yet (docs/cache.md, "Remembered membership writes"). It is the
// adapter's WriteJournal (upstream/ldap).
//
// A group's writes are one hash, <prefix>{guid}:w, a field per member GUID holding
// the write as JSON with the end of its window, sealed (seal.go) under the key and
// the field, so that a value changed, forged, or moved to another member or group
// is refused. A sorted set beside it, <prefix>{guid}:w:at, holds the same members
// scored by the time of their write: it decides which of two writes of one member
// is the newer, and which to forget first when the hash is full, without
// unsealing anything in Redis. Both carry the group's hash tag, so each script
// touches one Cluster slot.
type Journal struct{ c *Cache }

// Journal returns the cache's journal in Redis, or nil when the cache has no Redis
// (the adapter then remembers writes in its own process only). Check for nil
// before storing it in an interface.
func (c *Cache) Journal() *Journal {
	if c.cfg.Redis == nil {
		return nil
	}
	return &Journal{c: c}
}

// Bounds of what the journal writes and reads. A sealed value is at most
// maxJournalValue bytes (a write with the longest Server is about 750); a larger
// one, or a field that is not a GUID's length, was not written by dirgate and is
// refused inside Redis, so that it never crosses the network.
const (
	maxJournalValue = 1 << 10
	maxServerBytes  = 512
	guidLength      = 36
)

// journalValue is what a field holds, before sealing: the write and the end of the
// window it is remembered for.
type journalValue struct {
	dirgate.MembershipWrite
	Until time.Time `json:"until"`
}

// recordScript: KEYS[1] the hash, KEYS[2] the order; ARGV the member, its sealed
// value, the time of the write (µs since 1970), the ms to keep both keys for, the
// bound. Returns 1 if the write was stored, 0 if a newer write of the member is
// there. Keys of another type (written by someone else) are replaced. When the
// bound is passed, the oldest writes go; a hash holding fields the order does not
// know (the order was lost without it) is started afresh. Expiries are only ever
// extended, so that a short window never forgets a longer one's writes.
var recordScript = redis.NewScript(`
local t1, t2 = redis.call('TYPE', KEYS[1]).ok, redis.call('TYPE', KEYS[2]).ok
if t1 ~= 'none' and t1 ~= 'hash' then redis.call('DEL', KEYS[1]) end
if t2 ~= 'none' and t2 ~= 'zset' then redis.call('DEL', KEYS[2]) end
local at, bound = tonumber(ARGV[3]), tonumber(ARGV[5])
local old = redis.call('ZSCORE', KEYS[2], ARGV[1])
if old and tonumber(old) > at then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
local over = redis.call('ZCARD', KEYS[2]) - bound
if over > 0 then
  local gone = redis.call('ZPOPMIN', KEYS[2], over)
  for i = 1, #gone, 2 do redis.call('HDEL', KEYS[1], gone[i]) end
end
if redis.call('HLEN', KEYS[1]) > bound then
  redis.call('DEL', KEYS[1], KEYS[2])
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
  redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
end
local ms = tonumber(ARGV[4])
for _, k in ipairs(KEYS) do
  if redis.call('PTTL', k) < ms then redis.call('PEXPIRE', k, ms) end
end
return 1`)

// readScript: KEYS[1] the hash; ARGV the most fields to look at, the longest value.
// Returns {fields in the hash (-1: not a hash), fields refused for their size,
// field, value, ...}: at most ARGV[1] fields are looked at (HGETALL within the
// bound, HSCAN up to it beyond), and only those of a GUID's length with a value
// within ARGV[2] bytes are returned.
var readScript = redis.NewScript(`
local t = redis.call('TYPE', KEYS[1]).ok
if t ~= 'hash' then
  if t == 'none' then return {0, 0} end
  return {-1, 0}
end
local max, longest = tonumber(ARGV[1]), tonumber(ARGV[2])
local n = redis.call('HLEN', KEYS[1])
local out = {n, 0}
local seen = 0
local function take(kv)
  for i = 1, #kv, 2 do
    if seen >= max then return end
    seen = seen + 1
    if #kv[i] == ` + fmt.Sprint(guidLength) + ` and #kv[i+1] <= longest then
      out[#out+1] = kv[i]
      out[#out+1] = kv[i+1]
    else
      out[2] = out[2] + 1
    end
  end
end
if n <= max then
  take(redis.call('HGETALL', KEYS[1]))
else
  local cursor = '0'
  repeat
    local r = redis.call('HSCAN', KEYS[1], cursor, 'COUNT', 256)
    cursor = r[1]
    take(r[2])
  until cursor == '0' or seen >= max
end
return out`)

// Record remembers w for window: Recent returns it, on every instance sharing
// Redis, until w.At plus window. Of two writes of one member, the one with the
// later At stays (instances' clocks are assumed to agree to well within a window,
// as the change feed's claims assume to within 5 s). Beyond dirgate.MaxMembershipWrites members
// the oldest writes are forgotten. The error (invalid write, Redis unreachable
// within the cache's timeout, or bypassed after a recent failure) is for the
// caller to log: the write is then remembered in its own process only.
func (j *Journal) Record(ctx context.Context, w dirgate.MembershipWrite, window time.Duration) (err error) {
	if window <= 0 {
		return errors.New("cache: journal: the window must be positive")
	}
	if err := checkWrite(w); err != nil {
		return fmt.Errorf("cache: journal: %w", err)
	}
	w.At = w.At.UTC()
	until := w.At.Add(window)
	keep := until.Sub(j.c.now())
	if keep <= 0 {
		return nil // already past its window: nothing to remember
	}
	blob, err := json.Marshal(journalValue{MembershipWrite: w, Until: until})
	if err != nil {
		return fmt.Errorf("cache: journal: %w", err)
	}
	key, order := j.c.keys.journal(w.Group)
	v := j.c.sealer.seal(journalSealKey(key, w.Member), string(blob))
	if len(v) > maxJournalValue {
		return fmt.Errorf("cache: journal: a write of %d bytes is over the bound of %d", len(v), maxJournalValue)
	}
	ctx, span := tracer().Start(ctx, "cache journal record")
	if span.IsRecording() {
		span.SetAttributes(attribute.String("dirgate.group.guid", w.Group))
	}
	var stored bool
	defer func() { endJournalSpan(span, err, attribute.Bool("dirgate.cache.stored", stored)) }()
	err = j.run(ctx, func(ctx context.Context) error {
		n, err := recordScript.Run(ctx, j.c.cfg.Redis, []string{key, order},
			w.Member, v, w.At.UnixMicro(), ttlOf(keep).Milliseconds(), dirgate.MaxMembershipWrites).Int()
		stored = n == 1
		return err
	})
	if err != nil {
		return fmt.Errorf("cache: journal: record: %w", err)
	}
	return nil
}

// Recent returns the writes remembered for group (a canonical GUID) whose window
// has not ended, at most dirgate.MaxMembershipWrites, one per member, oldest
// first. Values that do not verify (forged, moved from another member or group,
// over the size bound) are left out and logged, one line per call.
func (j *Journal) Recent(ctx context.Context, group string) (out []dirgate.MembershipWrite, err error) {
	if !journalGUID(group) {
		return nil, fmt.Errorf("cache: journal: group %q is not a GUID in canonical form", group)
	}
	key, _ := j.c.keys.journal(group)
	ctx, span := tracer().Start(ctx, "cache journal read")
	if span.IsRecording() {
		span.SetAttributes(attribute.String("dirgate.group.guid", group))
	}
	defer func() { endJournalSpan(span, err, attribute.Int("dirgate.objects", len(out))) }()
	var res []any
	err = j.run(ctx, func(ctx context.Context) (err error) {
		res, err = readScript.Run(ctx, j.c.cfg.Redis, []string{key}, dirgate.MaxMembershipWrites, maxJournalValue).Slice()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cache: journal: read: %w", err)
	}
	out, bad := j.decodeAll(key, group, res, j.c.now())
	if bad.refused > 0 || bad.fields > dirgate.MaxMembershipWrites || bad.fields < 0 {
		j.c.cfg.Logger.WarnContext(ctx, "cache: ignoring remembered membership writes that do not verify (not written by dirgate)",
			"key", key, "refused", bad.refused, "fields", bad.fields, "bound", dirgate.MaxMembershipWrites, "first_error", bad.first)
	}
	return out, nil
}

// refusals describes what a read left out, for its one log line.
type refusals struct {
	fields  int64 // fields in the hash; -1 when the key is not a hash
	refused int
	first   error
}

func (r *refusals) add(err error) {
	r.refused++
	if r.first == nil {
		r.first = err
	}
}

// decodeAll turns the read script's reply into the live writes it holds, newest per
// member, oldest first.
func (j *Journal) decodeAll(key, group string, res []any, now time.Time) ([]dirgate.MembershipWrite, refusals) {
	var bad refusals
	if len(res) < 2 || len(res)%2 != 0 {
		bad.add(fmt.Errorf("%w: a reply of %d elements", errCorrupt, len(res)))
		return nil, bad
	}
	bad.fields, _ = res[0].(int64)
	if n, _ := res[1].(int64); n > 0 {
		bad.refused += int(n)
		bad.first = fmt.Errorf("%d fields or values over the size bound", n)
	}
	newest := make(map[string]dirgate.MembershipWrite, (len(res)-2)/2)
	for i := 2; i < len(res); i += 2 {
		field, _ := res[i].(string)
		v, _ := res[i+1].(string)
		w, live, err := j.decode(key, group, field, v, now)
		if err != nil {
			bad.add(err)
			continue
		}
		if old, ok := newest[w.Member]; live && (!ok || w.At.After(old.At)) {
			newest[w.Member] = w
		}
	}
	out := make([]dirgate.MembershipWrite, 0, len(newest))
	for _, w := range newest {
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b dirgate.MembershipWrite) int {
		return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.Member, b.Member))
	})
	return out, bad
}

// decode opens the value of one field and reports whether its window is still open
// at now.
func (j *Journal) decode(key, group, field, v string, now time.Time) (dirgate.MembershipWrite, bool, error) {
	if !journalGUID(field) {
		return dirgate.MembershipWrite{}, false, fmt.Errorf("%w: field %.40q is not a GUID", errCorrupt, field)
	}
	blob, err := j.c.sealer.open(journalSealKey(key, field), v)
	if err != nil {
		return dirgate.MembershipWrite{}, false, err
	}
	w, until, err := parseJournalValue(blob, group, field)
	if err != nil {
		return dirgate.MembershipWrite{}, false, err
	}
	return w, now.Before(until), nil
}

// parseJournalValue decodes an unsealed value stored for member of group and checks
// it as a write dirgate would have recorded. The seal makes a value someone else
// wrote fail before this; it is strict anyway, since it parses what Redis returned.
func parseJournalValue(blob, group, member string) (dirgate.MembershipWrite, time.Time, error) {
	var v journalValue
	if err := json.Unmarshal([]byte(blob), &v); err != nil {
		return dirgate.MembershipWrite{}, time.Time{}, fmt.Errorf("%w: %w", errCorrupt, err)
	}
	if err := checkWrite(v.MembershipWrite); err != nil {
		return dirgate.MembershipWrite{}, time.Time{}, fmt.Errorf("%w: %w", errCorrupt, err)
	}
	if v.Group != group || v.Member != member {
		return dirgate.MembershipWrite{}, time.Time{}, fmt.Errorf("%w: a write of another group or member", errCorrupt)
	}
	if !v.Until.After(v.At) {
		return dirgate.MembershipWrite{}, time.Time{}, fmt.Errorf("%w: a window that ends before the write", errCorrupt)
	}
	return v.MembershipWrite, v.Until, nil
}

// checkWrite checks what Record stores and Recent returns.
func checkWrite(w dirgate.MembershipWrite) error {
	switch {
	case !journalGUID(w.Group):
		return errors.New("the group is not a GUID in canonical form")
	case !journalGUID(w.Member):
		return errors.New("the member is not a GUID in canonical form")
	case len(w.Server) > maxServerBytes || !utf8.ValidString(w.Server):
		return fmt.Errorf("the server is not valid UTF-8 of at most %d bytes", maxServerBytes)
	case w.At.IsZero() || w.At.Year() < 1970 || w.At.Year() > 9999:
		return errors.New("the time of the write is missing or out of range")
	case w.Origin != "" && !journalGUID(w.Origin):
		return errors.New("the origin is not a GUID in canonical form")
	case w.USN < 0:
		return errors.New("the USN is negative")
	}
	return nil
}

// journalGUID reports whether s is a GUID in the canonical form keys use.
func journalGUID(s string) bool {
	if len(s) != guidLength {
		return false
	}
	id, err := dirgate.ParseIdentifier(s)
	return err == nil && id.Kind() == dirgate.KindGUID && id.Canonical() == s
}

// journalSealKey is what a value is sealed under: its key and its field (neither
// the prefix nor a GUID holds a "|").
func journalSealKey(key, field string) string { return key + "|" + field }

// run runs f under the cache's timeout and health (op): an unreachable or slow Redis
// fails it within the timeout, and after a failure it fails at once for the retry
// interval. An error reply (a script refused, a key of the wrong type) is returned
// without counting as Redis down, so that it does not make the cache bypass Redis.
func (j *Journal) run(ctx context.Context, f func(ctx context.Context) error) error {
	var reply error
	err := j.c.op(ctx, false, func(ctx context.Context) error {
		err := f(ctx)
		var rerr redis.Error
		if errors.As(err, &rerr) && !errors.Is(err, redis.Nil) {
			reply = err
			return nil
		}
		return err
	})
	return cmp.Or(err, reply)
}

// endJournalSpan records the outcome of a journal call on its span and ends it.
func endJournalSpan(span trace.Span, err error, attr attribute.KeyValue) {
	if span.IsRecording() {
		span.SetAttributes(attr)
		if err != nil {
			span.SetStatus(codes.Error, "redis")
		}
	}
	span.End()
}
