package cache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/dirgate/dirgate"
)

// An entry is stored as one binary value, decoded without reflection:
//
//	magic "dgc1", flags byte (2: objects have JSON encodings, joined),
//	filled and fresh-until as varint Unix nanoseconds, the check string,
//	deps: count, then (GUID, version token) pairs,
//	objects: count, then each object's fields (and the length of its encoding),
//	with encodings: the whole listing's JSON array, "[" e0 "," e1 ... "]".
//
// The encodings are laid out as the listing's JSON, so that when the decoded entry's
// encodings slice the value, so does a response of every object: it is sent from
// the value itself, not from a copy (EncodedListing.JSON; issue 26: the copy was
// 42 MiB for 100,000 members). Flag 1 is the earlier layout, each encoding beside
// its object as a string, still decoded (a value written before the upgrade). A
// release that knows only flag 1 refuses flag 2 as corrupt, which the cache treats
// as a miss (logged, refilled from the directory and overwritten): replicas of both
// during a rolling upgrade each serve exact answers, only missing more often.
//
// Strings are a uvarint length and bytes. Counts of maps and slices are stored plus
// one, so that nil and empty survive the round trip (0 means nil). Decoding works on
// a string and slices it, so a 1,000-object listing costs a few thousand small
// allocations rather than a JSON parse (docs/benchmarks.md, "Cost calibration": 9 ms).
const magic = "dgc1"

const (
	flagFragments = 1 // encodings beside their objects (decoded, no longer written)
	flagJoined    = 2 // encodings' lengths beside their objects, the encodings joined after them
)

// dep is a group whose member list an entry was computed from, with the version
// token the group had before it was read.
type dep struct {
	guid, token string
}

// entry is a cached value: a listing, the groups of an object, or one looked-up
// object (a listing of one).
type entry struct {
	check  string    // the inputs of the key, compared on decode
	filled time.Time // when the fill started: the entry reflects the directory at least as of then
	fresh  time.Time // served as a hit until then; as stale at most MaxStale after filled
	deps   []dep
	list   *dirgate.EncodedListing // objects, and their encodings when fragments are kept
	size   int                     // bytes held in memory, for the first level's bound
	// trust is the lease generation for which a token read found the entry current
	// (lease.go); the only field that changes after decoding.
	trust atomic.Uint64
}

// objectOverhead approximates the memory of a decoded object beyond its strings
// (which share the stored value): struct, property map, status structs.
const objectOverhead = 320

var errCorrupt = errors.New("cache: corrupt entry")

// encodeEntry encodes e's header and objs, with their JSON encodings when frags is
// non-nil.
func encodeEntry(e *entry, objs []dirgate.Object, frags []string) string {
	// Sized exactly, once: a listing of 100,000 objects is about 60 MB, and growing
	// it by doubling copied it over and over (a third of a fill's encoding, issue 26),
	// and the string below keeps the whole array.
	b := make([]byte, 0, entrySize(e, objs, frags))
	b = append(b, magic...)
	var flags byte
	if frags != nil {
		flags |= flagJoined
	}
	b = append(b, flags)
	b = binary.AppendVarint(b, e.filled.UnixNano())
	b = binary.AppendVarint(b, e.fresh.UnixNano())
	b = appendString(b, e.check)
	b = binary.AppendUvarint(b, uint64(len(e.deps)))
	for _, d := range e.deps {
		b = appendString(b, d.guid)
		b = appendString(b, d.token)
	}
	b = binary.AppendUvarint(b, uint64(len(objs)))
	for i := range objs {
		b = appendObject(b, &objs[i])
		if frags != nil {
			b = binary.AppendUvarint(b, uint64(len(frags[i])))
		}
	}
	if frags != nil {
		b = binary.AppendUvarint(b, uint64(joinedSize(frags)))
		b = append(b, '[')
		for i, f := range frags {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, f...)
		}
		b = append(b, ']')
	}
	// b is not written again: the string shares its bytes rather than copying them.
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// entrySize is the length encodeEntry returns (TestEntrySize).
func entrySize(e *entry, objs []dirgate.Object, frags []string) int {
	size := len(magic) + 1 + varintSize(e.filled.UnixNano()) + varintSize(e.fresh.UnixNano()) + stringSize(e.check) + uvarintSize(uint64(len(e.deps)))
	for _, d := range e.deps {
		size += stringSize(d.guid) + stringSize(d.token)
	}
	size += uvarintSize(uint64(len(objs)))
	for i := range objs {
		size += objectSize(&objs[i])
		if frags != nil {
			size += uvarintSize(uint64(len(frags[i])))
		}
	}
	if frags != nil {
		n := joinedSize(frags)
		size += uvarintSize(uint64(n)) + n
	}
	return size
}

// joinedSize is the length of the JSON array of frags.
func joinedSize(frags []string) int {
	n := 2 + max(len(frags)-1, 0)
	for _, f := range frags {
		n += len(f)
	}
	return n
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendObject(b []byte, o *dirgate.Object) []byte {
	for _, s := range []string{o.GUID, o.DN, o.DisplayName, o.ObjectType} {
		b = appendString(b, s)
	}
	b = binary.AppendVarint(b, int64(o.ObjectTypeCode))
	b = appendString(b, o.DomainName)
	b = binary.AppendVarint(b, int64(o.DirectoryType))
	if o.Properties == nil {
		b = append(b, 0)
	} else {
		b = binary.AppendUvarint(b, uint64(len(o.Properties))+1)
		for k, vs := range o.Properties {
			b = appendString(b, k)
			if vs == nil {
				b = append(b, 0)
				continue
			}
			b = binary.AppendUvarint(b, uint64(len(vs))+1)
			for _, v := range vs {
				b = appendString(b, v)
			}
		}
	}
	if a := o.AccountStatus; a == nil {
		b = append(b, 0)
	} else {
		var f byte = 1
		if a.IsDisabled {
			f |= 2
		}
		if a.IsLocked {
			f |= 4
		}
		b = append(b, f)
		b = appendTime(b, a.ExpirationDate)
	}
	if p := o.PasswordStatus; p == nil {
		b = append(b, 0)
	} else {
		b = append(b, 1)
		b = appendTime(b, p.WhenChanged)
		b = binary.AppendVarint(b, int64(p.ExpirationStatus))
		b = appendTime(b, p.ExpirationDate)
	}
	b = appendString(b, o.SID)
	return binary.AppendVarint(b, int64(o.PrimaryGroupID))
}

// objectSize is the length appendObject appends for o (TestObjectSize).
func objectSize(o *dirgate.Object) int {
	n := stringSize(o.GUID) + stringSize(o.DN) + stringSize(o.DisplayName) + stringSize(o.ObjectType) +
		varintSize(int64(o.ObjectTypeCode)) + stringSize(o.DomainName) + varintSize(int64(o.DirectoryType))
	n++ // the properties' count, or 0 for nil
	if o.Properties != nil {
		n += uvarintSize(uint64(len(o.Properties))+1) - 1
		for k, vs := range o.Properties {
			n += stringSize(k) + 1
			if vs != nil {
				n += uvarintSize(uint64(len(vs))+1) - 1
				for _, v := range vs {
					n += stringSize(v)
				}
			}
		}
	}
	n++ // the account's flags
	if a := o.AccountStatus; a != nil {
		n += timeSize(a.ExpirationDate)
	}
	n++ // the password's flag
	if p := o.PasswordStatus; p != nil {
		n += timeSize(p.WhenChanged) + varintSize(int64(p.ExpirationStatus)) + timeSize(p.ExpirationDate)
	}
	return n + stringSize(o.SID) + varintSize(int64(o.PrimaryGroupID))
}

func timeSize(t *dirgate.Timestamp) int {
	if t == nil {
		return 1
	}
	return 1 + varintSize(t.Unix()) + uvarintSize(uint64(t.Nanosecond()))
}

func stringSize(s string) int { return uvarintSize(uint64(len(s))) + len(s) }

func uvarintSize(x uint64) int {
	n := 1
	for ; x >= 0x80; x >>= 7 {
		n++
	}
	return n
}

func varintSize(x int64) int {
	ux := uint64(x) << 1
	if x < 0 {
		ux = ^ux
	}
	return uvarintSize(ux)
}

func appendTime(b []byte, t *dirgate.Timestamp) []byte {
	if t == nil {
		return append(b, 0)
	}
	b = append(b, 1)
	b = binary.AppendVarint(b, t.Unix())
	return binary.AppendUvarint(b, uint64(t.Nanosecond()))
}

// decodeEntry decodes a stored value. Values come from a store that other programs
// may write to, so every length is checked against what is left and a value that
// does not decode exactly is an error, never a panic.
func decodeEntry(s string) (*entry, error) {
	d := &decoder{s: s}
	if len(s) < len(magic)+1 || s[:len(magic)] != magic {
		return nil, errCorrupt
	}
	d.off = len(magic)
	flags := d.byte()
	if flags != 0 && flags != flagFragments && flags != flagJoined {
		return nil, errCorrupt
	}
	e := &entry{}
	e.filled = time.Unix(0, d.varint())
	e.fresh = time.Unix(0, d.varint())
	e.check = d.string()
	nd := d.count(2)
	if nd > 0 {
		e.deps = make([]dep, nd)
		for i := range e.deps {
			e.deps[i] = dep{guid: d.string(), token: d.string()}
		}
	}
	n := d.count(12)
	objs := make([]dirgate.Object, n)
	var frags []string
	var lens []int
	switch flags {
	case flagFragments:
		frags = make([]string, n)
	case flagJoined:
		frags = make([]string, n)
		lens = make([]int, n)
	}
	for i := range objs {
		d.object(&objs[i])
		switch flags {
		case flagFragments:
			frags[i] = d.string()
		case flagJoined:
			lens[i] = d.length()
		}
	}
	var joined string
	if flags == flagJoined {
		joined = d.string()
		d.split(joined, lens, frags)
	}
	if d.err != nil {
		return nil, d.err
	}
	if d.off != len(s) {
		return nil, fmt.Errorf("%w: %d trailing bytes", errCorrupt, len(s)-d.off)
	}
	var list *dirgate.EncodedListing
	var err error
	if flags == flagJoined {
		list, err = dirgate.NewJoinedListing(objs, frags, joined)
	} else {
		list, err = dirgate.NewEncodedListing(objs, frags)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errCorrupt, err)
	}
	e.list = list
	e.size = len(s) + n*objectOverhead
	return e, nil
}

// decoder reads a value; after the first error every read returns zero values and
// the error stays.
type decoder struct {
	s   string
	off int
	err error

	// Small values are carved out of shared chunks, so that a listing costs a few
	// allocations per hundred objects rather than several per object.
	accounts  []dirgate.AccountStatus
	passwords []dirgate.PasswordStatus
	times     []dirgate.Timestamp
	strs      []string
}

const chunk = 256

// take returns a pointer to a fresh element of *pool, growing it by a chunk.
func take[T any](pool *[]T) *T {
	if len(*pool) == cap(*pool) {
		*pool = make([]T, 0, chunk)
	}
	*pool = (*pool)[:len(*pool)+1]
	return &(*pool)[len(*pool)-1]
}

// strings returns a slice of n strings whose capacity ends at n, so that appending
// to it never writes over its neighbour.
func (d *decoder) strings(n int) []string {
	if n == 0 {
		return []string{} // empty, not nil: it renders as [], not null (no allocation)
	}
	if n > chunk/4 {
		return make([]string, n)
	}
	if cap(d.strs)-len(d.strs) < n {
		d.strs = make([]string, 0, chunk)
	}
	l := len(d.strs)
	d.strs = d.strs[:l+n]
	return d.strs[l : l+n : l+n]
}

func (d *decoder) fail() {
	if d.err == nil {
		d.err = errCorrupt
	}
	d.off = len(d.s)
}

func (d *decoder) byte() byte {
	if d.off >= len(d.s) {
		d.fail()
		return 0
	}
	c := d.s[d.off]
	d.off++
	return c
}

func (d *decoder) uvarint() uint64 {
	if d.off < len(d.s) && d.s[d.off] < 0x80 { // one byte: most lengths and counts
		d.off++
		return uint64(d.s[d.off-1])
	}
	var x uint64
	var shift uint
	for i := 0; i < binary.MaxVarintLen64; i++ {
		c := d.byte()
		if d.err != nil {
			return 0
		}
		if c < 0x80 {
			if i == binary.MaxVarintLen64-1 && c > 1 {
				d.fail()
				return 0
			}
			return x | uint64(c)<<shift
		}
		x |= uint64(c&0x7f) << shift
		shift += 7
	}
	d.fail()
	return 0
}

func (d *decoder) varint() int64 {
	u := d.uvarint()
	x := int64(u >> 1)
	if u&1 != 0 {
		x = ^x
	}
	return x
}

func (d *decoder) int() int {
	v := d.varint()
	if int64(int(v)) != v {
		d.fail()
		return 0
	}
	return int(v)
}

// count reads a count of items that take at least min bytes each, refusing counts
// that could not fit in what is left (so a corrupt count cannot allocate much).
func (d *decoder) count(min int) int {
	n := d.uvarint()
	if n > uint64(len(d.s)-d.off)/uint64(min) {
		d.fail()
		return 0
	}
	return int(n)
}

// optCount reads a count stored plus one; ok is false for nil.
func (d *decoder) optCount(min int) (n int, ok bool) {
	c := d.uvarint()
	if c == 0 {
		return 0, false
	}
	if c-1 > uint64(len(d.s)-d.off)/uint64(min) {
		d.fail()
		return 0, false
	}
	return int(c - 1), true
}

// length reads the length of something later in the value, refusing one longer
// than what is left.
func (d *decoder) length() int {
	n := d.uvarint()
	if n > uint64(len(d.s)-d.off) {
		d.fail()
		return 0
	}
	return int(n)
}

// split slices joined, a JSON array of encodings of the given lengths, into frags:
// each encoding a substring of it. Whether the separators are where the lengths put
// them is NewJoinedListing's check.
func (d *decoder) split(joined string, lens []int, frags []string) {
	if d.err != nil {
		return
	}
	off := 1
	for i, n := range lens {
		if i > 0 {
			off++
		}
		if n > len(joined)-off {
			d.fail()
			return
		}
		frags[i] = joined[off : off+n]
		off += n
	}
}

func (d *decoder) string() string {
	n := d.uvarint()
	if n > uint64(len(d.s)-d.off) {
		d.fail()
		return ""
	}
	s := d.s[d.off : d.off+int(n)]
	d.off += int(n)
	return s
}

func (d *decoder) object(o *dirgate.Object) {
	o.GUID, o.DN, o.DisplayName, o.ObjectType = d.string(), d.string(), d.string(), d.string()
	o.ObjectTypeCode = d.int()
	o.DomainName = d.string()
	o.DirectoryType = d.int()
	if n, ok := d.optCount(2); ok {
		o.Properties = make(map[string][]string, n)
		for range n {
			k := d.string()
			var vs []string
			if m, ok := d.optCount(1); ok {
				vs = d.strings(m)
				for j := range vs {
					vs[j] = d.string()
				}
			}
			if _, dup := o.Properties[k]; dup {
				d.fail() // a map cannot hold it twice: not something encodeEntry wrote
			}
			o.Properties[k] = vs
		}
	}
	switch f := d.byte(); {
	case f == 0:
	case f&1 == 1 && f&^7 == 0:
		a := take(&d.accounts)
		*a = dirgate.AccountStatus{IsDisabled: f&2 != 0, IsLocked: f&4 != 0, ExpirationDate: d.time()}
		o.AccountStatus = a
	default:
		d.fail()
	}
	switch f := d.byte(); f {
	case 0:
	case 1:
		p := take(&d.passwords)
		p.WhenChanged = d.time()
		p.ExpirationStatus = d.int()
		p.ExpirationDate = d.time()
		o.PasswordStatus = p
	default:
		d.fail()
	}
	o.SID = d.string()
	o.PrimaryGroupID = d.int()
}

func (d *decoder) time() *dirgate.Timestamp {
	switch d.byte() {
	case 0:
		return nil
	case 1:
		sec := d.varint()
		ns := d.uvarint()
		if ns >= 1e9 {
			d.fail()
			return nil
		}
		t := take(&d.times)
		t.Time = time.Unix(sec, int64(ns)).UTC()
		return t
	}
	d.fail()
	return nil
}
