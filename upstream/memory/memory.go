// Package memory is a dirgate.Directory held in memory, loaded from an Active
// Directory export in LDIF (what `ldapsearch -L` prints for objects with binary
// objectGUID and objectSid). It serves the embedded demo organisation when no file is
// given, and is the reference implementation the conformance suite checks first.
//
// Entries keep every attribute of the export and render through ldapentry.Entry, as
// the LDAP upstream's do, so any attribute in the file can be requested as a property
// and formats the same way. Membership follows AD: a group's members are its member
// values that name loaded entries plus the objects whose primaryGroupID is the
// group's RID; memberOf is rebuilt from member values at load and kept in step with
// removals and additions.
package memory

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/ldapentry"
)

//go:generate go run ../../test/harness/fixture/cmd/genfixture -root ../..

// demoLDIF is the demo organisation, generated from test/harness/fixture by the line above.
//
//go:embed demo.ldif
var demoLDIF []byte

// Directory is an in-memory directory. It is safe for concurrent use: reads share a
// lock, removals and additions take it alone.
type Directory struct {
	mu        sync.RWMutex
	records   []*record
	byKey     map[string]*record   // DN key
	byGUID    map[string]*record   // canonical GUID
	bySID     map[string][]*record // several objects may carry one SID (well-known SIDs)
	byPrimary map[string][]*record // SID of the primary group -> its primary members
	now       func() time.Time
	passwords map[string][sha256.Size]byte // by lower-case sAMAccountName (signin.go)

	watch watchState // the file and what was loaded from it (watch.go)
	// dnAttrs are the attributes found naming loaded entries (dnvalued.go).
	dnAttrs atomic.Pointer[map[string]bool]
}

var _ dirgate.Directory = (*Directory)(nil)

// record is one entry with its resolved links. entry's member and memberOf values are
// replaced, never changed in place, so a rendering under the read lock sees whole
// slices. The builder makes entry (entry.go); the values that name an entry share its
// DN's bytes.
type record struct {
	entry      ldapentry.Entry
	line       int
	key        string
	guid       string
	sid        string
	primarySID string // SID of the primary group, from primaryGroupID and the object's domain
	group      bool
	members    []*record // member values that name loaded entries, each once
	memberOf   []*record // groups whose members include this record
}

// Config configures the memory upstream.
type Config struct {
	// LDIF is the path of an AD export; empty serves the embedded demo organisation.
	LDIF string `json:"ldif" yaml:"ldif"`
}

// Validate reports a configured file that cannot be read.
func (c Config) Validate() error {
	if c.LDIF == "" {
		return nil
	}
	fi, err := os.Stat(c.LDIF)
	if err != nil {
		return fmt.Errorf("memory: ldif: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("memory: ldif: %s is not a regular file", c.LDIF)
	}
	return nil
}

// Open loads the configured file, or the demo when none is configured.
func (c Config) Open() (*Directory, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.LDIF == "" {
		return Demo()
	}
	return Open(c.LDIF)
}

// Option changes how a directory is loaded.
type Option func(*options)

type options struct{ now func() time.Time }

// WithClock sets the clock that decides whether passwords have expired; the default
// is time.Now.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// Open loads the AD export at path.
func Open(path string, opts ...Option) (*Directory, error) {
	st, err := stat(path)
	if err != nil {
		return nil, fmt.Errorf("memory: %w", err)
	}
	d, err := loadFile(path, opts...)
	if err != nil {
		return nil, err
	}
	releaseLoadGarbage()
	d.watch = watchState{path: path, loaded: st}
	return d, nil
}

// Demo loads the embedded demo organisation (test/harness/fixture at demo scale).
func Demo(opts ...Option) (*Directory, error) { return Load("embedded demo.ldif", demoLDIF, opts...) }

// Load builds a directory from the AD export data; name identifies it in errors,
// which give the line and DN of the entry at fault. Entries need a DN that parses and
// one 16-byte objectGUID, unique across the file; DNs must be unique too.
func Load(name string, data []byte, opts ...Option) (*Directory, error) {
	return loadFrom(name, bytes.NewReader(data), opts...)
}

// loadFile loads the export at path, reading it as it parses.
func loadFile(path string, opts ...Option) (*Directory, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("memory: %w", err)
	}
	defer f.Close()
	return loadFrom(path, f, opts...)
}

// releaseLoadGarbage collects what a load of a file left behind and returns the
// memory to the system. The collector lets the heap grow to twice what is live
// before it collects, and the runtime gives freed memory back only slowly: without
// this, a process that has just loaded a large export holds about twice the
// directory's size, its load's peak, long after. It is done once a load (at start
// and after a reload), and costs one collection.
func releaseLoadGarbage() { debug.FreeOSMemory() }

func loadFrom(name string, data io.Reader, opts ...Option) (*Directory, error) {
	records, err := parseLDIF(name, data)
	if err != nil {
		return nil, fmt.Errorf("memory: %w", err)
	}
	cfg := options{now: time.Now}
	for _, o := range opts {
		o(&cfg)
	}
	d, err := build(name, records, cfg.now())
	if err != nil {
		return nil, fmt.Errorf("memory: %w", err)
	}
	d.now = cfg.now
	return d, nil
}

// Len returns the number of entries.
func (d *Directory) Len() int {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return len(d.records)
}

// Lookup finds the object named by id. A SID that several objects carry (a well-known
// SID with a foreign security principal in more than one place) is ambiguous, as a
// DC reports it.
func (d *Directory) Lookup(ctx context.Context, id dirgate.Identifier, props []string) (dirgate.Object, error) {
	if err := ctx.Err(); err != nil {
		return dirgate.Object{}, err
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	var r *record
	switch id.Kind() {
	case dirgate.KindDN:
		r = d.byKey[id.DN().Key()]
	case dirgate.KindGUID:
		r = d.byGUID[id.Canonical()]
	case dirgate.KindSID:
		switch rs := d.bySID[id.Canonical()]; len(rs) {
		case 0:
		case 1:
			r = rs[0]
		default:
			return dirgate.Object{}, dirgate.Errorf(dirgate.EINVALID, "The SID is ambiguous: %d objects carry it.", len(rs))
		}
	default:
		return dirgate.Object{}, dirgate.Errorf(dirgate.EINVALID, "The identifier is empty.")
	}
	if r == nil {
		return dirgate.Object{}, dirgate.Errorf(dirgate.ENOTFOUND, "No object has this %s.", id.Kind())
	}
	return d.render(r, props)
}

// Members returns the group's member values that name loaded entries and the objects
// whose primary group it is, each once.
func (d *Directory) Members(ctx context.Context, group dirgate.Object, props []string) ([]dirgate.Object, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	g, err := d.record(group)
	if err != nil {
		return nil, err
	}
	primary := d.primaryMembers(g)
	out := make([]dirgate.Object, 0, len(g.members)+len(primary))
	for _, m := range g.members { // each once (build, addMember)
		o, err := d.render(m, props)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	for _, m := range primary {
		// A primary member that is also a direct one is listed already. memberOf is
		// kept in step with members and is short: no set of a large group's members
		// to build for each listing.
		if slices.Contains(m.memberOf, g) {
			continue
		}
		o, err := d.render(m, props)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

// MemberOf returns the groups whose member values name obj, and its primary group.
func (d *Directory) MemberOf(ctx context.Context, obj dirgate.Object) ([]dirgate.Object, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	r, err := d.record(obj)
	if err != nil {
		return nil, err
	}
	groups := slices.Clone(r.memberOf)
	for _, g := range d.bySID[r.primarySID] {
		if g.group && !slices.Contains(groups, g) {
			groups = append(groups, g)
		}
	}
	out := make([]dirgate.Object, 0, len(groups))
	for _, g := range groups {
		o, err := d.render(g, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

// RemoveMember deletes member from group's member values and group from member's
// memberOf. A member that belongs only through primaryGroupID gives ErrPrimaryGroup,
// one that does not belong at all ErrNotMember.
func (d *Directory) RemoveMember(ctx context.Context, group, member dirgate.Object) error {
	return d.change(ctx, group, member, d.removeMember)
}

func (d *Directory) removeMember(g, m *record) error {
	if !slices.Contains(g.members, m) {
		if g.isPrimaryOf(m) {
			return fmt.Errorf("remove member: %w", dirgate.ErrPrimaryGroup)
		}
		return fmt.Errorf("remove member: %w", dirgate.ErrNotMember)
	}
	g.members = slices.DeleteFunc(slices.Clone(g.members), func(r *record) bool { return r == m })
	m.memberOf = slices.DeleteFunc(slices.Clone(m.memberOf), func(r *record) bool { return r == g })
	var kept [][]byte
	for _, v := range g.entry.Values("member") {
		if dn, err := dirgate.ParseDN(string(v)); err != nil || dn.Key() != m.key {
			kept = append(kept, v)
		}
	}
	g.entry.Attrs["member"] = kept
	m.syncMemberOf()
	return nil
}

// AddMember appends member to group's member values and group to member's memberOf,
// as AD does. A direct member, or one whose primary group this is, gives
// ErrAlreadyMember (AD will not add a primary group's member either); a target that
// is not a group is refused as AD refuses it (objectClassViolation).
func (d *Directory) AddMember(ctx context.Context, group, member dirgate.Object) error {
	return d.change(ctx, group, member, d.addMember)
}

func (d *Directory) addMember(g, m *record) error {
	switch {
	case !g.group:
		return dirgate.Errorf(dirgate.EINVALID, "The directory rejected the request as invalid.")
	case slices.Contains(g.members, m):
		return fmt.Errorf("add member: %w", dirgate.ErrAlreadyMember)
	case g.isPrimaryOf(m):
		return fmt.Errorf("add member: %w (primary group)", dirgate.ErrAlreadyMember)
	}
	g.members = append(slices.Clip(g.members), m)
	m.memberOf = append(slices.Clip(m.memberOf), g)
	g.entry.Attrs["member"] = append(slices.Clip(g.entry.Values("member")), m.dnBytes())
	m.syncMemberOf()
	return nil
}

// change applies a membership change to the records of group and member, alone
// under the lock.
func (d *Directory) change(ctx context.Context, group, member dirgate.Object, apply func(g, m *record) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	g, err := d.record(group)
	if err != nil {
		return err
	}
	m, err := d.record(member)
	if err != nil {
		return err
	}
	return apply(g, m)
}

// isPrimaryOf reports whether g is m's primary group.
func (g *record) isPrimaryOf(m *record) bool { return g.sid != "" && m.primarySID == g.sid }

// record finds the record of an object an earlier Lookup returned.
func (d *Directory) record(o dirgate.Object) (*record, error) {
	if r := d.byGUID[o.GUID]; r != nil {
		return r, nil
	}
	return nil, dirgate.Errorf(dirgate.ENOTFOUND, "No object has this GUID.")
}

// primaryMembers returns the objects whose primary group is g. primaryGroupID is a RID
// in the member's own domain, so only members of g's domain can name it.
func (d *Directory) primaryMembers(g *record) []*record {
	if !g.group || g.sid == "" {
		return nil
	}
	return d.byPrimary[g.sid]
}

func (d *Directory) render(r *record, props []string) (dirgate.Object, error) {
	o, err := r.entry.ToObject(props, d.now())
	if err != nil {
		// Load rendered every entry once, so this is a bug, not bad data.
		return dirgate.Object{}, dirgate.WrapError(dirgate.EINTERNAL, "", fmt.Errorf("memory: render %q: %w", r.entry.DN, err))
	}
	return o, nil
}

// syncMemberOf rewrites the memberOf attribute from the resolved links, as AD
// maintains the back-link: the groups' DNs as the export spells them.
func (r *record) syncMemberOf() {
	if len(r.memberOf) == 0 {
		delete(r.entry.Attrs, "memberof")
		return
	}
	vals := make([][]byte, len(r.memberOf))
	for i, g := range r.memberOf {
		vals[i] = g.dnBytes()
	}
	r.entry.Attrs["memberof"] = vals
}
