package cache

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/encodedlisting"
)

// The decoding of the values codec.go encodes.

// decodeEntry decodes a stored value. Values come from a store that other programs
// may write to, so every length is checked against what is left and a value that
// does not decode exactly is an error, never a panic.
func decodeEntry(s string) (*entry, error) { return decodeEntryInto(s, nil) }

// decodeEntryInto is decodeEntry that decodes the objects into dst's array when it
// is large enough: a fill decodes what it has just encoded into the objects it
// encoded, which nothing else holds, rather than into a second array (14 MB for
// 100,000 members). dst's objects are overwritten, even on error.
func decodeEntryInto(s string, dst []dirgate.Object) (*entry, error) {
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
	var objs []dirgate.Object
	if cap(dst) >= n {
		objs = dst[:n]
		clear(objs)
	} else {
		objs = make([]dirgate.Object, n)
	}
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
	e.objs = objs
	var err error
	if flags == flagJoined {
		e.list, err = encodedlisting.NewJoined(n, frags, joined, e)
	} else {
		e.list, err = encodedlisting.New(n, frags, e)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errCorrupt, err)
	}
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
// them is encodedlisting.NewJoined's check.
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
