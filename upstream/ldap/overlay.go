package ldap

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/dirgate/dirgate"
	goldap "github.com/go-ldap/ldap/v3"
)

// Writes laid over listings (docs/directory.md, "Several domain controllers").
//
// A membership change made through dirgate is written to one DC, and the others
// receive it by replication, seconds later, or only once that DC is back if it died
// first. A listing read from another DC meanwhile would contradict the change, and
// docs/cache.md promises that a listing never contradicts a change made through
// dirgate. So every write is remembered for WriteOverlay, here and (through
// Config.Journal: Redis) for every replica, and a listing read from a DC that does
// not hold the write yet is corrected: a removed member is left out, an added one
// put in. Whether a DC holds a write is read from the DC itself:
// each write is stamped with its DC's invocation ID and USN, and the answering DC's
// up-to-dateness vector says whether it holds that USN (replstate.go). A DC that
// holds a write is left alone, so a change made directly on any DC after the write
// shows as soon as the DC answering has it. Only when a DC's state cannot be read
// (an unstamped write, a vector the account cannot read) is a DC taken to hold a write
// once its own answer agrees with it. With one DC there is nothing to correct and
// nothing is remembered.

// WriteJournal remembers membership writes for every replica (Config.Journal;
// cmd/dirgate passes writejournal's, in Redis).
type WriteJournal interface {
	// Record remembers w until w.At plus window.
	Record(ctx context.Context, w dirgate.MembershipWrite, window time.Duration) error
	// Recent returns the writes remembered for group (a GUID), at most
	// dirgate.MaxMembershipWrites.
	Recent(ctx context.Context, group string) ([]dirgate.MembershipWrite, error)
}

// DefaultWriteOverlay is how long a write is laid over listings from other DCs.
const DefaultWriteOverlay = 10 * time.Minute

// writes is the in-process memory of recent writes, and which DCs were seen to hold
// them. It is bounded per group and in groups.
type writes struct {
	mu     sync.Mutex
	groups map[string]map[string]*rememberedWrite // group GUID -> member GUID -> write
}

type rememberedWrite struct {
	w    dirgate.MembershipWrite
	held map[string]bool // servers whose answer agreed with it
}

// maxRememberedGroups bounds the groups remembered in process.
const maxRememberedGroups = 10000

// multiDC reports whether there is more than one DC to disagree.
func (d *Directory) multiDC() bool { return len(d.servers()) > 1 || d.cfg.Domain != "" }

// remember records a write that server took, with its stamp.
//
// The write is answered only once the other replicas can lay it over their listings:
// Redis is retried for up to shareWait within the request. A write Redis did not take
// by then answers 503 (errWriteUnshared): it was applied, but a listing another replica
// reads from a DC that lacks it would contradict it, so the caller is told the outcome
// is unknown (a retry answers noChanges) rather than that it is done. It is shared in
// the background once Redis takes it.
func (d *Directory) remember(ctx context.Context, group, member dirgate.Object, added bool, server string, st writeStamp) error {
	if !d.multiDC() || group.GUID == "" || member.GUID == "" {
		return nil
	}
	w := dirgate.MembershipWrite{Group: group.GUID, Member: member.GUID, Added: added, Server: server, At: d.now(),
		Origin: st.origin, USN: st.usn}
	d.local.add(w, d.cfg.WriteOverlay, d.now())
	j := d.cfg.Journal
	if j == nil {
		return nil
	}
	err := j.Record(ctx, w, d.cfg.WriteOverlay)
	if err == nil {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, shareWait)
	defer cancel()
	tick := time.NewTicker(shareRetry)
	defer tick.Stop()
	for err != nil {
		select {
		case <-wctx.Done():
			d.log().Warn("ldap: could not share a membership write with the other replicas; answered as unavailable, retrying in the background",
				"group", group.GUID, "error", err)
			go d.recordLater(j, w)
			return fmt.Errorf("%w: %w", errWriteUnshared, err)
		case <-tick.C:
			err = j.Record(wctx, w, d.cfg.WriteOverlay)
		}
	}
	return nil
}

// shareWait bounds how long a write waits for Redis to take it (a Sentinel failover
// with fast timings takes a second or two); shareRetry is how often it asks. Variables
// for the tests.
var (
	shareWait  = 5 * time.Second
	shareRetry = 200 * time.Millisecond
)

// errWriteUnshared answers a write that was applied but that Redis did not take in
// time (remember).
var errWriteUnshared = dirgate.WrapError(dirgate.EUNAVAILABLE, "",
	errors.New("ldap: the membership write was applied but could not be shared with the other replicas"))

// recordLater shares a write that Redis did not take, every second until it does,
// the window ends or the adapter closes: until then, listings other replicas read from
// a DC that lacks the write may contradict it.
func (d *Directory) recordLater(j WriteJournal, w dirgate.MembershipWrite) {
	ctx := d.bgOr(context.Background())
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if d.now().Sub(w.At) > d.cfg.WriteOverlay {
			return
		}
		if err := j.Record(ctx, w, d.cfg.WriteOverlay); err == nil {
			d.log().Info("ldap: a membership write is shared with the other replicas", "group", w.Group, "late_by", d.now().Sub(w.At).Round(time.Millisecond).String())
			return
		}
	}
}

func (m *writes) add(w dirgate.MembershipWrite, window time.Duration, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.groups) >= maxRememberedGroups && m.groups[w.Group] == nil {
		m.expire(window, now)
	}
	g := m.group(w.Group)
	if g == nil {
		return // the shared journal still has it
	}
	if len(g) >= dirgate.MaxMembershipWrites && g[w.Member] == nil {
		return
	}
	g[w.Member] = &rememberedWrite{w: w}
}

// group returns the writes remembered for a group, made if there is room for
// another group (nil if not); the caller holds m.mu.
func (m *writes) group(guid string) map[string]*rememberedWrite {
	if m.groups == nil {
		m.groups = map[string]map[string]*rememberedWrite{}
	}
	g := m.groups[guid]
	if g == nil && len(m.groups) < maxRememberedGroups {
		g = map[string]*rememberedWrite{}
		m.groups[guid] = g
	}
	return g
}

// expire forgets writes older than window; the caller holds m.mu.
func (m *writes) expire(window time.Duration, now time.Time) {
	for gk, g := range m.groups {
		for mk, r := range g {
			if now.Sub(r.w.At) > window {
				delete(g, mk)
			}
		}
		if len(g) == 0 {
			delete(m.groups, gk)
		}
	}
}

// pendingWrites returns the newest write of each member of group remembered here or
// by the other replicas, within the window; nil with one DC. complete is false when
// the other replicas' writes could not be read.
func (d *Directory) pendingWrites(ctx context.Context, group dirgate.Object) (pending map[string]dirgate.MembershipWrite, complete bool) {
	if !d.multiDC() || group.GUID == "" {
		return nil, true
	}
	now := d.now()
	pending = d.local.pending(group.GUID, d.cfg.WriteOverlay, now)
	complete = true
	if j := d.cfg.Journal; j != nil {
		shared, err := j.Recent(ctx, group.GUID)
		if err != nil {
			complete = false
			d.log().Warn("ldap: could not read the membership writes of other replicas", "group", group.GUID, "error", err)
		}
		for _, w := range shared {
			if w.Group != group.GUID || now.Sub(w.At) > d.cfg.WriteOverlay {
				continue
			}
			if p, ok := pending[w.Member]; !ok || w.At.After(p.At) {
				pending[w.Member] = w
			}
		}
	}
	return pending, complete
}

// holdsOthers reports whether the DC at served, whose replication state is st, holds
// every change the other DCs made to group: for each other DC, its copy of the group
// was last changed at a USN that served's up-to-dateness vector has reached (a
// membership change raises the group's uSNChanged: docs/directory.md, "Changes and
// uSNChanged"). A DC that cannot be asked (down, cut off) might hold a write served
// lacks: false. Only asked while the other replicas' writes cannot be read.
func (d *Directory) holdsOthers(ctx context.Context, group dirgate.Object, served string, st *replState) bool {
	if st == nil {
		// No vector to compare with: the first DC, where writes go while it is up,
		// is served; any other may lack a write.
		return d.firstServer(served)
	}
	ctx, cancel := context.WithTimeout(ctx, d.cfg.DialTimeout+d.cfg.AttemptTimeout)
	defer cancel()
	for _, s := range d.servers() {
		if s.t.url == served {
			continue
		}
		if s.brk != nil && s.brk.Open() {
			return false
		}
		pc, err := s.pool.get(ctx, false)
		if err != nil {
			return false
		}
		id, usn, err := d.groupUSN(ctx, pc, s.t.url, group.DN)
		if err != nil {
			s.pool.discard(pc)
			return false
		}
		s.pool.put(pc)
		if id != st.self && usn > st.cursors[id] {
			return false
		}
	}
	return true
}

// groupUSN reads, on the DC at url behind c, its invocation ID and the uSNChanged of
// its copy of group (0 when it has none yet).
func (d *Directory) groupUSN(ctx context.Context, c conn, url, group string) (string, int64, error) {
	id, err := d.invocationAt(ctx, c, url)
	if err != nil {
		return "", 0, err
	}
	var text string
	err = search(ctx, c, query{base: group, scope: goldap.ScopeBaseObject, filter: "(objectClass=*)",
		attrs: []string{"uSNChanged"}}, func(e *goldap.Entry) error {
		text = e.GetAttributeValue("uSNChanged")
		return nil
	})
	if rc, ok := resultCode(err); ok && rc == goldap.LDAPResultNoSuchObject {
		return id, 0, nil
	}
	if err != nil {
		return "", 0, err
	}
	usn, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("uSNChanged %q of %s: %w", text, group, err)
	}
	return id, usn, nil
}

// errWritesUnknown answers a listing while the other replicas' writes cannot be read
// (Redis unreachable), when the DC that answered it may lack a change another DC holds
// (holdsOthers): another replica may have made a write there, and nothing says which.
// dirgate answers 503 rather than a listing that may contradict an acknowledged write
// (docs/directory.md, "Writes laid over listings").
var errWritesUnknown = dirgate.WrapError(dirgate.EUNAVAILABLE, "",
	errors.New("ldap: the listing was read from a DC other than the first, and the other replicas' membership writes cannot be read to correct it"))

// anyStamped reports whether one of the writes carries a stamp, so that the
// answering DC's replication state is worth reading.
func anyStamped(pending map[string]dirgate.MembershipWrite) bool {
	for _, w := range pending {
		if stamped(w) {
			return true
		}
	}
	return false
}

// overlay corrects a listing of group that server answered with the pending writes
// it does not hold; st is server's replication state, read before its answer (nil
// when unknown).
func (d *Directory) overlay(ctx context.Context, group dirgate.Object, server string, st *replState, pending map[string]dirgate.MembershipWrite, objs []dirgate.Object, props []string) []dirgate.Object {
	if len(pending) == 0 || server == "" {
		return objs
	}
	// guessed are the writes whose holding is judged by the answer's agreement.
	guessed := map[string]bool{}
	for member, w := range pending {
		switch {
		case w.Server == server:
			delete(pending, member)
		case st != nil && stamped(w):
			if st.holds(w) {
				delete(pending, member)
			}
		case d.local.heldBy(w, server):
			delete(pending, member)
		default:
			guessed[member] = true
		}
	}
	if len(pending) == 0 {
		return objs
	}
	present := make(map[string]int, len(objs))
	for i, o := range objs {
		present[o.GUID] = i
	}
	drop := map[string]bool{}
	for member, w := range pending {
		_, in := present[member]
		switch {
		case w.Added == in:
			if guessed[member] {
				d.local.hold(w, server) // the DC agrees: taken to hold the write
			}
		case !w.Added:
			drop[member] = true
		default:
			id, err := dirgate.ParseIdentifier(member)
			var o dirgate.Object
			if err == nil {
				o, err = d.Lookup(ctx, id, props)
			}
			if err != nil {
				if dirgate.ErrorCode(err) != dirgate.ENOTFOUND {
					d.log().Warn("ldap: could not read a member added through dirgate, for a listing read from another DC", "group", group.GUID, "error", err)
				}
				continue
			}
			objs = append(objs, o)
			d.overlaid.Add(1)
		}
	}
	if len(drop) > 0 {
		out := objs[:0]
		for _, o := range objs {
			if !drop[o.GUID] {
				out = append(out, o)
			}
		}
		objs = out
		d.overlaid.Add(int64(len(drop)))
	}
	return objs
}

// pending returns the writes of group remembered here within window.
func (m *writes) pending(group string, window time.Duration, now time.Time) map[string]dirgate.MembershipWrite {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]dirgate.MembershipWrite{}
	for member, r := range m.groups[group] {
		if now.Sub(r.w.At) > window {
			delete(m.groups[group], member)
			continue
		}
		out[member] = r.w
	}
	return out
}

// hold notes that server's answer agreed with w.
func (m *writes) hold(w dirgate.MembershipWrite, server string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.group(w.Group)
	if g == nil {
		return
	}
	r := g[w.Member]
	if r == nil || !r.w.At.Equal(w.At) {
		if r != nil && r.w.At.After(w.At) {
			return
		}
		if len(g) >= dirgate.MaxMembershipWrites {
			return
		}
		r = &rememberedWrite{w: w}
		g[w.Member] = r
	}
	if r.held == nil {
		r.held = map[string]bool{}
	}
	r.held[server] = true
}

// heldBy reports whether server was seen to hold w.
func (m *writes) heldBy(w dirgate.MembershipWrite, server string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.groups[w.Group][w.Member]
	return r != nil && r.w.At.Equal(w.At) && r.held[server]
}
