package ldap

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/ldapentry"
	goldap "github.com/go-ldap/ldap/v3"
)

// What a DC holds of the changes made on the other DCs, so that the write overlay
// (overlay.go) corrects a listing exactly while the DC that answered it lacks a write,
// and never after (docs/directory.md, "Writes laid over listings").
//
// AD numbers every change on the DC that originates it: that DC's invocation ID and
// its update sequence number (USN). Each DC keeps, on the head of the naming context,
// an up-to-dateness vector (replUpToDateVector): per other DC's invocation ID, the
// USN up to which it holds every change that DC originated. Replication itself uses it
// to know what to send. So a DC holds a write made on another DC exactly when its
// cursor for that DC's invocation ID is at least the write's USN; an answer's mere
// agreement with a write proves nothing about the changes after it.

// replState is one DC's invocation ID and up-to-dateness vector.
type replState struct {
	self    string           // the DC's own invocation ID
	cursors map[string]int64 // another DC's invocation ID -> the USN up to which this DC holds its changes
}

// holds reports whether the DC holds the stamped write w.
func (s replState) holds(w dirgate.MembershipWrite) bool {
	return w.Origin == s.self || s.cursors[w.Origin] >= w.USN
}

// stamped reports whether w carries the DC's stamp (Origin and USN).
func stamped(w dirgate.MembershipWrite) bool { return w.Origin != "" && w.USN > 0 }

// invocations caches each server's invocation ID by URL: it changes only when the DC
// is restored from a backup.
type invocations struct {
	mu  sync.Mutex
	ids map[string]string
}

// invocationOf returns the invocation ID of the DC behind c (the attempt's server).
func (d *Directory) invocationOf(ctx context.Context, c conn) (string, error) {
	return d.invocationAt(ctx, c, servedBy(ctx))
}

// invocationAt returns the invocation ID of the DC at url, behind c.
func (d *Directory) invocationAt(ctx context.Context, c conn, url string) (string, error) {
	d.invocations.mu.Lock()
	id, ok := d.invocations.ids[url]
	d.invocations.mu.Unlock()
	if ok {
		return id, nil
	}
	id, err := readInvocation(ctx, c)
	if err != nil || id == "" {
		return "", err
	}
	d.invocations.mu.Lock()
	if d.invocations.ids == nil {
		d.invocations.ids = map[string]string{}
	}
	d.invocations.ids[url] = id
	d.invocations.mu.Unlock()
	return id, nil
}

// readInvocation reads the invocation ID of the NTDS Settings object the rootDSE's
// dsServiceName names; "" without an error when the server shows none (not an AD DC,
// or hidden from the service account).
func readInvocation(ctx context.Context, c conn) (string, error) {
	var server, id string
	err := search(ctx, c, query{base: "", scope: goldap.ScopeBaseObject, filter: "(objectClass=*)",
		attrs: []string{"dsServiceName"}}, func(e *goldap.Entry) error {
		server = e.GetAttributeValue("dsServiceName")
		return nil
	})
	if err != nil || server == "" {
		return "", err
	}
	err = search(ctx, c, query{base: server, scope: goldap.ScopeBaseObject, filter: "(objectClass=*)",
		attrs: []string{"invocationId"}}, func(e *goldap.Entry) error {
		if raw := e.GetRawAttributeValue("invocationId"); len(raw) == 16 {
			id = ldapentry.GUIDFromBytes(raw)
		}
		return nil
	})
	if rc, ok := resultCode(err); ok && rc == goldap.LDAPResultNoSuchObject {
		return "", nil
	}
	return id, err
}

// readReplState reads the replication state of the DC behind c. ok is false when the
// DC keeps no vector the service account can read (a DC without partners, or an
// access rule that hides it): the overlay then falls back on what answers showed.
func (d *Directory) readReplState(ctx context.Context, c conn) (st replState, ok bool, err error) {
	return d.readReplStateAt(ctx, c, servedBy(ctx))
}

// readReplStateAt is readReplState for the DC at url.
func (d *Directory) readReplStateAt(ctx context.Context, c conn, url string) (st replState, ok bool, err error) {
	if d.domainNC == "" {
		return replState{}, false, nil
	}
	self, err := d.invocationAt(ctx, c, url)
	if err != nil || self == "" {
		return replState{}, false, err
	}
	var raw []byte
	err = search(ctx, c, query{base: d.domainNC, scope: goldap.ScopeBaseObject, filter: "(objectClass=*)",
		attrs: []string{"replUpToDateVector"}}, func(e *goldap.Entry) error {
		raw = e.GetRawAttributeValue("replUpToDateVector")
		return nil
	})
	if err != nil || len(raw) == 0 {
		return replState{}, false, err
	}
	cursors, err := parseUpToDateVector(raw)
	if err != nil {
		d.log().Warn("ldap: a DC's replUpToDateVector is not understood; writes are laid over its listings until its answers agree", "server", url, "error", err)
		return replState{}, false, nil
	}
	return replState{self: self, cursors: cursors}, true, nil
}

// stampOf reads, on the DC that just took a write to group, the stamp of that write:
// the DC's invocation ID and the group's uSNChanged, which the write raised (a
// membership change bumps the group's USN: docs/directory.md, "Changes and
// uSNChanged"). A later change raises it further, which only makes the stamp
// cautious. Zero values when it cannot be read: the write is then unstamped.
func (d *Directory) stampOf(ctx context.Context, c conn, group string) (origin string, usn int64) {
	id, err := d.invocationOf(ctx, c)
	if err != nil {
		return "", 0
	}
	var text string
	err = search(ctx, c, query{base: group, scope: goldap.ScopeBaseObject, filter: "(objectClass=*)",
		attrs: []string{"uSNChanged"}}, func(e *goldap.Entry) error {
		text = e.GetAttributeValue("uSNChanged")
		return nil
	})
	n, perr := strconv.ParseInt(text, 10, 64)
	if err != nil || perr != nil || n <= 0 {
		return "", 0
	}
	return id, n
}

// maxCursors bounds the cursors read from one vector: one per DC that ever
// originated a change in the domain, thousands at most.
const maxCursors = 1 << 16

// parseUpToDateVector decodes a replUpToDateVector value (MS-DRSR
// UPTODATE_VECTOR_V1_EXT and _V2_EXT, little-endian): a version (1 or 2), a reserved
// word, the number of cursors, a reserved word, then per cursor the invocation ID (16
// bytes, as objectGUID), the USN (8 bytes) and, in version 2, the time of the last
// successful sync (8 bytes). The value comes from the DC: every length is checked.
func parseUpToDateVector(b []byte) (map[string]int64, error) {
	if len(b) < 16 {
		return nil, fmt.Errorf("replUpToDateVector of %d bytes", len(b))
	}
	var size int
	switch v := binary.LittleEndian.Uint32(b); v {
	case 1:
		size = 24
	case 2:
		size = 32
	default:
		return nil, fmt.Errorf("replUpToDateVector version %d", v)
	}
	n := binary.LittleEndian.Uint32(b[8:])
	if n > maxCursors || uint64(len(b)-16) != uint64(n)*uint64(size) {
		return nil, fmt.Errorf("replUpToDateVector of %d bytes with %d cursors of %d", len(b), n, size)
	}
	out := make(map[string]int64, n)
	for i := range int(n) {
		c := b[16+i*size:]
		usn := int64(binary.LittleEndian.Uint64(c[16:]))
		if usn < 0 {
			return nil, errors.New("replUpToDateVector: a negative USN")
		}
		out[ldapentry.GUIDFromBytes(c[:16])] = usn
	}
	return out, nil
}

// A DC that comes back (after a crash, a restart, a cut link) lacks what the other
// DCs took meanwhile until replication brings it, seconds or more later. Calls sent to
// it at once would list members removed elsewhere, decide writes on an old state (an
// addition answered "already a member" that replication then undoes) and fill the
// cache with listings the change feed, which followed the other DC, has already
// invalidated. So a DC that passes its health check after being down stays out of
// rotation until its up-to-dateness vector reaches the USN that the DC calls went to
// had reached when it came back.

// maxCatchUp bounds the wait: a DC whose replication stays broken is taken back
// after it, with a warning, rather than never. A DC's cursor moves only when a
// replication cycle runs, and the DC in use counts non-replicated changes too
// (lastLogon on a bind): with nothing to notify, the next cycle may be the periodic
// one (Samba: 300 s by default; AD: its schedule), so the bound is not longer than a
// DC may reasonably be kept out of rotation for want of a cycle.
const maxCatchUp = 2 * time.Minute

// catchUp is what a returning DC must hold before it takes calls again.
type catchUp struct {
	from  string // the invocation ID of the DC calls went to when s came back
	url   string // its URL, for the log and /readyz
	usn   int64  // its highestCommittedUSN then
	since time.Time
}

// caughtUp reports whether s, which passed a health check on c while marked down, may
// take calls again, and if not, why (for /readyz). Whatever cannot be read (no other
// DC up, no vector) lets it back as before.
func (d *Directory) caughtUp(ctx context.Context, s *server, c conn) (bool, string) {
	if !d.multiDC() {
		return true, ""
	}
	now := d.now()
	s.mu.Lock()
	cu := s.catchUp
	s.mu.Unlock()
	if cu == nil {
		ref := d.inUse(s)
		if ref == nil {
			return true, ""
		}
		usn, id, err := referenceState(ctx, ref)
		if err != nil {
			return true, ""
		}
		cu = &catchUp{from: id, url: ref.t.url, usn: usn, since: now}
		s.mu.Lock()
		s.catchUp = cu
		s.mu.Unlock()
	}
	st, ok, err := d.readReplStateAt(ctx, c, s.t.url)
	switch {
	case err != nil || !ok:
		return true, ""
	case st.self == cu.from || st.cursors[cu.from] >= cu.usn:
		d.log().Info("ldap: domain controller caught up by replication; it takes calls again", "server", s.t.url,
			"with", cu.url, "usn", cu.usn, "took", now.Sub(cu.since).Round(time.Millisecond).String())
		return true, ""
	case now.Sub(cu.since) > maxCatchUp:
		d.log().Warn("ldap: domain controller has not caught up by replication; it takes calls again anyway", "server", s.t.url,
			"with", cu.url, "holds", st.cursors[cu.from], "usn", cu.usn, "waited", maxCatchUp.String())
		return true, ""
	}
	return false, fmt.Sprintf("catching up by replication: holds %s's changes to USN %d of %d", cu.url, st.cursors[cu.from], cu.usn)
}

// inUse returns the DC calls go to, other than s: the first up whose breaker is not
// open; nil when there is none.
func (d *Directory) inUse(s *server) *server {
	for _, o := range d.servers() {
		if o != s && !o.isDown() && (o.brk == nil || !o.brk.Open()) {
			return o
		}
	}
	return nil
}

// referenceState reads ref's highestCommittedUSN and invocation ID on one of its
// pooled connections.
func referenceState(ctx context.Context, ref *server) (int64, string, error) {
	pc, err := ref.pool.get(ctx, false)
	if err != nil {
		return 0, "", err
	}
	_, _, usn, id, err := readServer(ctx, pc)
	if err != nil {
		ref.pool.discard(pc)
		return 0, "", err
	}
	ref.pool.put(pc)
	if usn > math.MaxInt64 {
		return 0, "", errors.New("highestCommittedUSN out of range")
	}
	return int64(usn), id, nil
}
