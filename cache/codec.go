package cache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/encodedlisting"
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
// the value itself, not from a copy (encodedlisting.Listing.JSON; the copy was
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
	objs   []dirgate.Object
	list   *encodedlisting.Listing // the encodings of objs, when fragments are kept: Fragments is nil otherwise
	size   int                     // bytes held in memory, for the first level's bound
	// trust is the lease generation for which a token read found the entry current
	// (lease.go); the only field that changes after decoding.
	trust atomic.Uint64
}

// GUID is the GUID of e's i-th object, which its encodings' index reads.
func (e *entry) GUID(i int) string { return e.objs[i].GUID }

// objectOverhead approximates the memory of a decoded object beyond its strings
// (which share the stored value): struct, property map, status structs.
const objectOverhead = 320

var errCorrupt = errors.New("cache: corrupt entry")

// fragments appends the JSON encoding of a listing's i-th object to dst; a fill's
// is objectJSON. It must append the same bytes each time it is asked.
type fragments func(dst []byte, i int) []byte

// objectJSON is the fragments of objs: each object's Object.AppendJSON.
func objectJSON(objs []dirgate.Object) fragments {
	return func(dst []byte, i int) []byte { return objs[i].AppendJSON(dst) }
}

// encodeEntry encodes e's header and objs, with their JSON encodings when frags is
// non-nil. The value is sized exactly and allocated once: a listing of 100,000
// objects is about 60 MB, which the string below keeps whole. The encodings are
// made twice, once to measure them and once into the value, rather than kept in
// buffers of their own: those were 44 MB of garbage per 100,000 members, a third of
// what a first fill allocated, and encoding costs less (about 0.4 µs an
// object, BenchmarkObjectJSON). An error means frags appended other bytes the
// second time.
func encodeEntry(e *entry, objs []dirgate.Object, frags fragments) (string, error) {
	var lens []int
	if frags != nil {
		lens = make([]int, len(objs))
		var scratch []byte
		for i := range objs {
			scratch = frags(scratch[:0], i)
			lens[i] = len(scratch)
		}
	}
	size := entrySize(e, objs, lens)
	b := make([]byte, 0, size)
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
			b = binary.AppendUvarint(b, uint64(lens[i]))
		}
	}
	if frags != nil {
		b = binary.AppendUvarint(b, uint64(joinedSize(lens)))
		b = append(b, '[')
		for i, n := range lens {
			if i > 0 {
				b = append(b, ',')
			}
			start := len(b)
			if b = frags(b, i); len(b)-start != n {
				return "", fmt.Errorf("cache: encoding %d was %d bytes, then %d", i, n, len(b)-start)
			}
		}
		b = append(b, ']')
	}
	if len(b) != size {
		return "", fmt.Errorf("cache: entry sized %d bytes, encoded %d", size, len(b))
	}
	// b is not written again: the string shares its bytes rather than copying them.
	return unsafe.String(unsafe.SliceData(b), len(b)), nil
}

// entrySize is the length encodeEntry returns for encodings of lens bytes (nil: none).
func entrySize(e *entry, objs []dirgate.Object, lens []int) int {
	size := len(magic) + 1 + varintSize(e.filled.UnixNano()) + varintSize(e.fresh.UnixNano()) + stringSize(e.check) + uvarintSize(uint64(len(e.deps)))
	for _, d := range e.deps {
		size += stringSize(d.guid) + stringSize(d.token)
	}
	size += uvarintSize(uint64(len(objs)))
	for i := range objs {
		size += objectSize(&objs[i])
		if lens != nil {
			size += uvarintSize(uint64(lens[i]))
		}
	}
	if lens != nil {
		n := joinedSize(lens)
		size += uvarintSize(uint64(n)) + n
	}
	return size
}

// joinedSize is the length of the JSON array of encodings of lens bytes.
func joinedSize(lens []int) int {
	n := 2 + max(len(lens)-1, 0)
	for _, l := range lens {
		n += l
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

// objectSize is the length appendObject appends for o (TestEntrySize checks it).
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
