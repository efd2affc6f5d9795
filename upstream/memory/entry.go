package memory

import (
	"strings"
	"unsafe"

	"github.com/dirgate/dirgate/internal/ldapentry"
)

// How a loaded entry is held. An ldapentry.Entry is a map of attribute names to value
// lists; built value by value, each name, value and list was an allocation of its
// own, and the directory kept 4.5 bytes of heap per byte of LDIF. The builder makes
// each entry from few allocations:
//   - attribute names are interned: one lower-case string per name in the directory;
//   - the DN and every value of the entry are one byte array, and the value lists one
//     array of slice headers, cut into the map's lists;
//   - a list of few short values that recurs (objectClass, userAccountControl,
//     primaryGroupID, a department's name) is shared by every entry that carries it;
//   - member values get an array of their own, which build drops once it has pointed
//     every value that names a loaded entry at that entry's DN (store DNs once);
//   - the file's memberOf values are not kept: build rewrites memberOf from member
//     values, with the groups' DNs.
// Nothing writes into these arrays after the load: member and memberOf lists are
// replaced, never changed in place, and a list is cut with its capacity at its
// length, so an append copies it.

// builder turns parsed records into records of the directory. One builder loads one
// file; its buffers are reused from record to record.
type builder struct {
	// parseContent's buffers.
	scratch []byte
	logical []span
	value   []byte

	// The entry being built: its DN, its values back to back and, in file order, which
	// attribute (an entry-local slot) each value belongs to.
	dn    []byte
	vals  []byte
	pairs []pair
	slots []int32 // slot -> name id
	entry int32   // entries begun, so that names' stamps tell this entry's from others'

	exact map[string]int32 // attribute name as spelt -> spelling id
	spelt []int32          // spelling id -> name id
	names []nameState      // by name id: one per lower-case name
	lower map[string]int32 // lower-case name -> name id

	counts, order []int
	key           []byte
}

type pair struct {
	slot int32
	v    span // in vals
}

type nameState struct {
	lower    string // interned
	stamp    int32  // the entry for which slot and spelling hold
	slot     int32
	spelling int32        // the spelling id seen first in the entry
	lists    *internTable // nil: never shared (member, memberOf)
}

// internTable shares recurring value lists of one attribute. An attribute whose lists
// rarely recur (names, GUIDs, descriptions) stops being looked up: once it has 32
// lists and they were used fewer than four times each, the table is dropped.
type internTable struct {
	lists map[string][][]byte
	seen  int
	off   bool
}

// Shared lists are short: a few values of a few bytes each.
const (
	maxInternValues = 8
	maxInternBytes  = 128
)

func newBuilder() *builder {
	return &builder{exact: map[string]int32{}, lower: map[string]int32{}}
}

// begin starts an entry, forgetting any half-built one.
func (b *builder) begin() {
	b.entry++
	b.dn, b.vals, b.pairs, b.slots = b.dn[:0], b.vals[:0], b.pairs[:0], b.slots[:0]
}

func (b *builder) setDN(dn []byte) { b.dn = append(b.dn[:0], dn...) }

// addExact adds a value, refusing a name spelt otherwise earlier in the entry:
// go-ldap/ldif orders such values by spelling, which only it does.
func (b *builder) addExact(name, val []byte) bool {
	sp := b.spellingID(name)
	if n := &b.names[b.spelt[sp]]; n.stamp == b.entry && n.spelling != sp {
		return false
	}
	b.add(sp, val)
	return true
}

// addValue adds a value whatever the name's spelling (go-ldap/ldif's entries).
func (b *builder) addValue(name string, val []byte) { b.add(b.spellingID([]byte(name)), val) }

// add appends a value of the attribute spelt sp to the entry being built.
func (b *builder) add(sp int32, val []byte) {
	id := b.spelt[sp]
	n := &b.names[id]
	if n.stamp != b.entry {
		n.stamp, n.slot, n.spelling = b.entry, int32(len(b.slots)), sp
		b.slots = append(b.slots, id)
	}
	start := len(b.vals)
	b.vals = append(b.vals, val...)
	b.pairs = append(b.pairs, pair{n.slot, span{start, len(b.vals)}})
}

// spellingID returns the id of an attribute name as spelt, adding the spelling and,
// the first time, its lower-case name.
func (b *builder) spellingID(name []byte) int32 {
	if sp, ok := b.exact[string(name)]; ok {
		return sp
	}
	spelt := string(name)
	lower := strings.ToLower(spelt)
	id, ok := b.lower[lower]
	if !ok {
		id = int32(len(b.names))
		ns := nameState{lower: lower, stamp: -1}
		if lower != "member" && lower != "memberof" {
			ns.lists = &internTable{lists: map[string][][]byte{}}
		}
		b.names = append(b.names, ns)
		b.lower[lower] = id
	}
	sp := int32(len(b.spelt))
	b.spelt = append(b.spelt, id)
	b.exact[spelt] = sp
	return sp
}

// finish makes the entry built since begin into a record.
func (b *builder) finish(line int) *record {
	nslots := len(b.slots)
	b.counts = append(b.counts[:0], make([]int, nslots+1)...)
	for _, p := range b.pairs {
		b.counts[p.slot+1]++
	}
	for s := range nslots {
		b.counts[s+1] += b.counts[s]
	}
	// order lists the pairs slot by slot, each slot's in file order.
	b.order = append(b.order[:0], make([]int, len(b.pairs))...)
	next := append([]int(nil), b.counts[:nslots]...)
	for i, p := range b.pairs {
		b.order[next[p.slot]] = i
		next[p.slot]++
	}

	lists := make([][][]byte, nslots) // shared lists by slot
	size, hdrs, memberSize := len(b.dn), 0, 0
	for s := range nslots {
		n := &b.names[b.slots[s]]
		vals := b.order[b.counts[s]:b.counts[s+1]]
		if n.lower == "memberof" {
			continue // build rewrites memberOf from the member values
		}
		if l, ok := b.intern(n.lists, vals); ok {
			lists[s] = l
			continue
		}
		hdrs += len(vals)
		for _, i := range vals {
			if n.lower == "member" {
				memberSize += b.pairs[i].v.end - b.pairs[i].v.start
			} else {
				size += b.pairs[i].v.end - b.pairs[i].v.start
			}
		}
	}

	arena := make([]byte, 0, size)
	arena = append(arena, b.dn...)
	var members []byte
	if memberSize > 0 {
		members = make([]byte, 0, memberSize)
	}
	hdr := make([][]byte, 0, hdrs)
	attrs := make(map[string][][]byte, nslots)
	for s := range nslots {
		n := &b.names[b.slots[s]]
		if n.lower == "memberof" {
			continue
		}
		if lists[s] != nil {
			attrs[n.lower] = lists[s]
			continue
		}
		first := len(hdr)
		for _, i := range b.order[b.counts[s]:b.counts[s+1]] {
			v := b.vals[b.pairs[i].v.start:b.pairs[i].v.end]
			if n.lower == "member" {
				start := len(members)
				members = append(members, v...)
				hdr = append(hdr, members[start:len(members):len(members)])
			} else {
				start := len(arena)
				arena = append(arena, v...)
				hdr = append(hdr, arena[start:len(arena):len(arena)])
			}
		}
		attrs[n.lower] = hdr[first:len(hdr):len(hdr)]
	}
	r := &record{line: line}
	r.entry = ldapentry.Entry{DN: bytesString(arena[:len(b.dn)]), Attrs: attrs}
	return r
}

// intern returns the shared list equal to the values (indices of b.pairs), adding
// them if the table still shares; ok is false when the list is not shared.
func (b *builder) intern(t *internTable, vals []int) ([][]byte, bool) {
	if t == nil || t.off || len(vals) > maxInternValues {
		return nil, false
	}
	b.key = b.key[:0]
	for _, i := range vals {
		v := b.vals[b.pairs[i].v.start:b.pairs[i].v.end]
		if len(b.key)+len(v) > maxInternBytes {
			return nil, false
		}
		b.key = append(b.key, byte(len(v)))
		b.key = append(b.key, v...)
	}
	t.seen++
	if l, ok := t.lists[string(b.key)]; ok {
		return l, true
	}
	if len(t.lists) >= 32 && 4*len(t.lists) > t.seen {
		t.off, t.lists = true, nil
		return nil, false
	}
	data := make([]byte, 0, len(b.key)-len(vals))
	l := make([][]byte, len(vals))
	for j, i := range vals {
		start := len(data)
		data = append(data, b.vals[b.pairs[i].v.start:b.pairs[i].v.end]...)
		l[j] = data[start:len(data):len(data)]
	}
	t.lists[string(b.key)] = l
	return l, true
}

// bytesString views bytes that are never written again as a string, so that an
// entry's DN and the member and memberOf values that name it are the same memory.
func bytesString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// dnBytes returns the bytes of r's DN, the memory of entry.DN, for values that name r.
// Its capacity is its length, so that an append copies it.
func (r *record) dnBytes() []byte {
	return unsafe.Slice(unsafe.StringData(r.entry.DN), len(r.entry.DN))
}
