// Package writejournal keeps the membership writes the LDAP adapter remembers
// (dirgate.MembershipWrite) in Redis, shared by every dirgate instance, so that a
// write made through any instance is laid over the listings that any instance reads
// from a domain controller that has not replicated it yet (docs/cache.md,
// "Remembered membership writes"; docs/directory.md, "Writes laid over listings").
// A *Journal is the adapter's ldap.WriteJournal (upstream/ldap/overlay.go), which
// cmd/dirgate passes in the adapter's Config.
//
// A group's writes are one hash, <prefix>{guid}:w, a field per member GUID holding
// the write as JSON with the end of its window, sealed (internal/seal) under the key
// and the field, so that a value changed, forged, or moved to another member or group
// is refused. A sorted set beside it, <prefix>{guid}:w:at, holds the same members
// scored by the time of their write: it decides which of two writes of one member
// is the newer, and which to forget first when the hash is full, without
// unsealing anything in Redis. Both carry the group's hash tag, so each script
// touches one Cluster slot. The keys, the sealed values and the scripts are shared
// by every instance of a deployment, whatever its version (TestStoredFormIsFixed).
package writejournal

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/seal"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Defaults for the zero values of Config: the cache's, since cmd/dirgate gives the
// journal the cache's key prefix, timeout and retry interval.
const (
	DefaultTimeout       = 100 * time.Millisecond
	DefaultRetryInterval = time.Second
	DefaultKeyPrefix     = "dirgate:"
)

// MinSecretLength is the least number of bytes of Config.Secret (the cache's and
// the session store's bound, for the same secret file).
const MinSecretLength = 32

// Config is the journal's factory: zero fields take the defaults above, Open
// validates it and returns the journal.
type Config struct {
	// Redis holds the journal (redisconn opens it; its opener closes it after the
	// journal's last use). Required.
	Redis redis.UniversalClient
	// KeyPrefix starts every key: letters, digits and ":_.-", at most 64 bytes, the
	// same on every instance.
	KeyPrefix string
	// Secret keys the HMAC of every value: every instance must have the same, at
	// least MinSecretLength bytes. Required.
	Secret []byte
	// Timeout bounds every call to Redis.
	Timeout time.Duration
	// RetryInterval is how long calls fail at once after Redis failed, before it is
	// tried again.
	RetryInterval time.Duration
	// Logger receives refused values and Redis's failures and recoveries. nil means
	// slog.Default().
	Logger *slog.Logger

	now func() time.Time // tests
}

func (c Config) withDefaults() Config {
	if c.KeyPrefix == "" {
		c.KeyPrefix = DefaultKeyPrefix
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.RetryInterval == 0 {
		c.RetryInterval = DefaultRetryInterval
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.now == nil {
		c.now = time.Now
	}
	return c
}

// Validate reports every problem of the configuration at once, after defaults.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("writejournal: "+format, args...)) }
	if c.Redis == nil {
		bad("a Redis client is required")
	}
	if len(c.Secret) < MinSecretLength {
		bad("a secret of at least %d bytes is required to authenticate its values", MinSecretLength)
	}
	if c.Timeout < 0 || c.RetryInterval < 0 {
		bad("Redis timeout and retry interval must be positive")
	}
	if !validPrefix(c.KeyPrefix) {
		// Braces would move the keys out of the group's Cluster slot.
		bad("key prefix %q must be 1 to 64 letters, digits or :_.-", c.KeyPrefix)
	}
	return errors.Join(errs...)
}

func validPrefix(p string) bool {
	if p == "" || len(p) > 64 {
		return false
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte(":_.-", c) >= 0) {
			return false
		}
	}
	return true
}

// Journal is the membership writes remembered in Redis. It is safe for concurrent
// use.
type Journal struct {
	redis  redis.UniversalClient
	prefix string
	sealer *seal.Sealer
	// timeout bounds each call; health makes calls fail at once for a while after
	// Redis failed (bypass.go).
	timeout time.Duration
	health  bypass
	log     *slog.Logger
	now     func() time.Time
}

// Open validates the configuration and returns the journal. It does not reach
// Redis: an unreachable Redis fails calls, not Open.
func (c Config) Open() (*Journal, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c = c.withDefaults()
	return &Journal{
		redis:   c.Redis,
		prefix:  c.KeyPrefix,
		sealer:  seal.New(c.Secret),
		timeout: c.Timeout,
		health:  bypass{interval: c.RetryInterval, log: c.Logger},
		log:     c.Logger,
		now:     c.now,
	}, nil
}

// keys returns the keys of a group's remembered writes: a hash of sealed writes by
// member GUID, and a sorted set of the same members by the time of their write, which
// orders them and bounds the hash. The group's GUID is its Cluster hash tag, as in
// every key of a group (docs/cache.md, "Keys").
func (j *Journal) keys(group string) (writes, order string) {
	writes = j.prefix + "{" + group + "}:w"
	return writes, writes + ":at"
}

// Bounds of what the journal writes and reads. A sealed value is at most
// maxValue bytes (a write with the longest Server is about 750); a larger
// one, or a field that is not a GUID's length, was not written by dirgate and is
// refused inside Redis, so that it never crosses the network.
const (
	maxValue       = 1 << 10
	maxServerBytes = 512
	guidLength     = 36
)

// value is what a field holds, before sealing: the write and the end of the window
// it is remembered for.
type value struct {
	dirgate.MembershipWrite
	Until time.Time `json:"until"`
}

// errNotAWrite marks a value that does not verify or is not a write dirgate would
// have recorded.
var errNotAWrite = errors.New("writejournal: not a write dirgate recorded")

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
// within the timeout, or bypassed after a recent failure) is for the caller to
// log: the write is then remembered in its own process only.
func (j *Journal) Record(ctx context.Context, w dirgate.MembershipWrite, window time.Duration) (err error) {
	if window <= 0 {
		return errors.New("writejournal: the window must be positive")
	}
	if err := checkWrite(w); err != nil {
		return fmt.Errorf("writejournal: %w", err)
	}
	w.At = w.At.UTC()
	until := w.At.Add(window)
	keep := until.Sub(j.now())
	if keep <= 0 {
		return nil // already past its window: nothing to remember
	}
	blob, err := json.Marshal(value{MembershipWrite: w, Until: until})
	if err != nil {
		return fmt.Errorf("writejournal: %w", err)
	}
	key, order := j.keys(w.Group)
	v := j.sealer.Seal(sealKey(key, w.Member), string(blob))
	if len(v) > maxValue {
		return fmt.Errorf("writejournal: a write of %d bytes is over the bound of %d", len(v), maxValue)
	}
	ctx, span := tracer().Start(ctx, "write journal record")
	if span.IsRecording() {
		span.SetAttributes(attribute.String("dirgate.group.guid", w.Group))
	}
	var stored bool
	defer func() { endSpan(span, err, attribute.Bool("dirgate.journal.stored", stored)) }()
	err = j.run(ctx, func(ctx context.Context) error {
		n, err := recordScript.Run(ctx, j.redis, []string{key, order},
			w.Member, v, w.At.UnixMicro(), ttlOf(keep).Milliseconds(), dirgate.MaxMembershipWrites).Int()
		stored = n == 1
		return err
	})
	if err != nil {
		return fmt.Errorf("writejournal: record: %w", err)
	}
	return nil
}

// Recent returns the writes remembered for group (a canonical GUID) whose window
// has not ended, at most dirgate.MaxMembershipWrites, one per member, oldest
// first. Values that do not verify (forged, moved from another member or group,
// over the size bound) are left out and logged, one line per call.
func (j *Journal) Recent(ctx context.Context, group string) (out []dirgate.MembershipWrite, err error) {
	if !canonicalGUID(group) {
		return nil, fmt.Errorf("writejournal: group %q is not a GUID in canonical form", group)
	}
	key, _ := j.keys(group)
	ctx, span := tracer().Start(ctx, "write journal read")
	if span.IsRecording() {
		span.SetAttributes(attribute.String("dirgate.group.guid", group))
	}
	defer func() { endSpan(span, err, attribute.Int("dirgate.objects", len(out))) }()
	var res []any
	err = j.run(ctx, func(ctx context.Context) (err error) {
		res, err = readScript.Run(ctx, j.redis, []string{key}, dirgate.MaxMembershipWrites, maxValue).Slice()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("writejournal: read: %w", err)
	}
	out, bad := j.decodeAll(key, group, res, j.now())
	if bad.refused > 0 || bad.fields > dirgate.MaxMembershipWrites || bad.fields < 0 {
		j.log.WarnContext(ctx, "writejournal: ignoring remembered membership writes that do not verify (not written by dirgate)",
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
		bad.add(fmt.Errorf("%w: a reply of %d elements", errNotAWrite, len(res)))
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
	if !canonicalGUID(field) {
		return dirgate.MembershipWrite{}, false, fmt.Errorf("%w: field %.40q is not a GUID", errNotAWrite, field)
	}
	blob, err := j.sealer.Open(sealKey(key, field), v)
	if err != nil {
		return dirgate.MembershipWrite{}, false, fmt.Errorf("%w: %w", errNotAWrite, err)
	}
	w, until, err := parseValue(blob, group, field)
	if err != nil {
		return dirgate.MembershipWrite{}, false, err
	}
	return w, now.Before(until), nil
}

// parseValue decodes an unsealed value stored for member of group and checks it as
// a write dirgate would have recorded. The seal makes a value someone else wrote
// fail before this; it is strict anyway, since it parses what Redis returned.
func parseValue(blob, group, member string) (dirgate.MembershipWrite, time.Time, error) {
	var v value
	if err := json.Unmarshal([]byte(blob), &v); err != nil {
		return dirgate.MembershipWrite{}, time.Time{}, fmt.Errorf("%w: %w", errNotAWrite, err)
	}
	if err := checkWrite(v.MembershipWrite); err != nil {
		return dirgate.MembershipWrite{}, time.Time{}, fmt.Errorf("%w: %w", errNotAWrite, err)
	}
	if v.Group != group || v.Member != member {
		return dirgate.MembershipWrite{}, time.Time{}, fmt.Errorf("%w: a write of another group or member", errNotAWrite)
	}
	if !v.Until.After(v.At) {
		return dirgate.MembershipWrite{}, time.Time{}, fmt.Errorf("%w: a window that ends before the write", errNotAWrite)
	}
	return v.MembershipWrite, v.Until, nil
}

// checkWrite checks what Record stores and Recent returns.
func checkWrite(w dirgate.MembershipWrite) error {
	switch {
	case !canonicalGUID(w.Group):
		return errors.New("the group is not a GUID in canonical form")
	case !canonicalGUID(w.Member):
		return errors.New("the member is not a GUID in canonical form")
	case len(w.Server) > maxServerBytes || !utf8.ValidString(w.Server):
		return fmt.Errorf("the server is not valid UTF-8 of at most %d bytes", maxServerBytes)
	case w.At.IsZero() || w.At.Year() < 1970 || w.At.Year() > 9999:
		return errors.New("the time of the write is missing or out of range")
	case w.Origin != "" && !canonicalGUID(w.Origin):
		return errors.New("the origin is not a GUID in canonical form")
	case w.USN < 0:
		return errors.New("the USN is negative")
	}
	return nil
}

// canonicalGUID reports whether s is a GUID in the canonical form keys use.
func canonicalGUID(s string) bool {
	if len(s) != guidLength {
		return false
	}
	id, err := dirgate.ParseIdentifier(s)
	return err == nil && id.Kind() == dirgate.KindGUID && id.Canonical() == s
}

// sealKey is what a value is sealed under: its key and its field (neither the
// prefix nor a GUID holds a "|").
func sealKey(key, field string) string { return key + "|" + field }

// ttlOf rounds up to Redis's millisecond resolution: a positive TTL never becomes
// "no expiry".
func ttlOf(d time.Duration) time.Duration {
	if d < time.Millisecond {
		return time.Millisecond
	}
	return d.Round(time.Millisecond)
}

func tracer() trace.Tracer { return otel.Tracer("github.com/dirgate/dirgate/writejournal") }

// endSpan records the outcome of a call on its span and ends it.
func endSpan(span trace.Span, err error, attr attribute.KeyValue) {
	if span.IsRecording() {
		span.SetAttributes(attr)
		if err != nil {
			span.SetStatus(codes.Error, "redis")
		}
	}
	span.End()
}
