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

// Following the other DCs (docs/cache.md, "Reading AD and Samba: uSNChanged",
// "Every other DC is followed too").
//
// The change feed reads the DC its calls go to (the primary) from the position it
// stores. A listing may be filled from another DC, though: by an instance that took
// the primary for down a moment before the others, or by a hedged read. If that DC
// had not yet received a change the feed already read on the primary, the fill
// keeps the old state, and nothing would invalidate it again: the primary reports
// the change once. So each read also follows every other DC that is up, from a mark
// of its own: when replication brings the change to that DC, the DC gives it a new
// local uSNChanged, the feed reads it there, and the listing is invalidated again.
//
// A follow mark only adds invalidations; it never becomes the primary's position,
// so follow marks are kept apart (dirgate.ChangePosition.Follow) from the marks that
// let the feed continue on a DC it fails over to (marks.go). A DC without a follow mark, or whose
// mark cannot be trusted (a restored database, a USN that went back, a mark older
// than followMaxAge), is followed from its current USN without reading what came
// before: changes that reached it earlier are in what it answers already. A DC that
// does not answer within the attempt timeout, or whose connection pool has no spare
// slot (a follow read never makes a call wait for a connection: pool.spare), is
// skipped for this read; a burst or an entry the feed cannot parse on it resyncs,
// as on the primary.

// followMaxAge is how old a follow mark may be and still be read from. An older one
// (the feed stopped for a while) is set afresh rather than read from: the DC may
// have changed more than a batch holds since, and the primary's position, not the
// follow mark, is what covers that time.
const followMaxAge = 10 * time.Minute

// errPoolBusy: the server's connections are (all but one) in use by calls, which a
// follow read never competes with; it is skipped this time.
var errPoolBusy = errors.New("ldap: the server's connections are in use; following it waits for the next read")

// followed is what reading one other DC gave.
type followed struct {
	mark    dirgate.ChangeMark
	changes []change
	resync  string
	detail  string
}

// followOthers reads the changes of every server but primary that is up and whose
// breaker lets calls through, each from its follow mark in pos, at most max
// changes in all. The servers are read concurrently, each within the attempt
// timeout; one that fails is skipped (its mark kept).
func (d *Directory) followOthers(ctx context.Context, primary string, pos dirgate.ChangePosition, max int) []followed {
	var (
		mu  sync.Mutex
		out []followed
		wg  sync.WaitGroup
	)
	for _, s := range d.servers() {
		if s.t.url == primary || s.isDown() || s.brk != nil && s.brk.Open() {
			continue
		}
		wg.Go(func() {
			f, err := d.followOn(ctx, s, pos, max)
			if err != nil {
				d.log().Debug("ldap: reading another DC's changes failed; skipped this time", "server", s.t.url, "err", err)
				return
			}
			mu.Lock()
			out = append(out, f)
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// followOn reads the changes of server s since its follow mark in pos.
func (d *Directory) followOn(ctx context.Context, s *server, pos dirgate.ChangePosition, max int) (f followed, err error) {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.AttemptTimeout)
	defer cancel()
	pc, ok, err := s.pool.spare(ctx)
	if err != nil {
		return f, err
	}
	if !ok {
		return f, errPoolBusy
	}
	defer func() {
		if err != nil {
			s.pool.discard(pc)
		} else {
			s.pool.put(pc)
		}
	}()
	server, nc, usn, invocation, err := readServer(ctx, pc)
	if err != nil {
		return f, fmt.Errorf("rootDSE: %w", err)
	}
	now := d.now()
	f.mark = dirgate.ChangeMark{Source: server + "|" + invocation, USN: usn, Time: now}
	m, ok := followMarkOf(pos, f.mark.Source)
	if !ok || usn <= m.USN || now.Sub(m.Time) > followMaxAge {
		// Unknown, unchanged, behind (restored under the same invocationId cannot
		// happen; a USN below the mark means the mark is not this database's), or
		// too old: follow from here.
		return f, nil
	}
	var bad error
	err = search(ctx, pc, query{
		base: nc, scope: goldap.ScopeWholeSubtree,
		filter:   "(&(uSNChanged>=" + strconv.FormatUint(m.USN+1, 10) + ")(uSNChanged<=" + strconv.FormatUint(usn, 10) + "))",
		attrs:    changeAttrs,
		controls: []goldap.Control{extendedDNString, goldap.NewControlMicrosoftShowDeleted()},
		pageSize: d.cfg.PageSize,
	}, func(e *goldap.Entry) error {
		if len(f.changes) >= max {
			return errBurst
		}
		ch, err := d.parseChange(e)
		if err != nil {
			bad = err
			return errBurst
		}
		f.changes = append(f.changes, ch)
		return nil
	})
	switch {
	case bad != nil:
		f.changes, f.resync, f.detail = nil, dirgate.ResyncUnparseable, server+": "+bad.Error()
	case errors.Is(err, errBurst):
		f.changes, f.resync, f.detail = nil, dirgate.ResyncBurst, fmt.Sprintf("%s: more than %d objects changed between USN %d and %d", server, max, m.USN, usn)
	case err != nil:
		return followed{}, err
	}
	return f, nil
}

// withMark returns marks with m as the mark for m.Source, replacing any it had, as
// the most recent; the oldest are dropped beyond dirgate.MaxChangeMarks.
func withMark(marks []dirgate.ChangeMark, m dirgate.ChangeMark) []dirgate.ChangeMark {
	out := make([]dirgate.ChangeMark, 0, len(marks)+1)
	for _, old := range marks {
		if old.Source != m.Source {
			out = append(out, old)
		}
	}
	out = append(out, m)
	if n := len(out) - dirgate.MaxChangeMarks; n > 0 {
		out = out[n:]
	}
	return out
}

// followMarkOf returns the follow mark p keeps for source.
func followMarkOf(p dirgate.ChangePosition, source string) (dirgate.ChangeMark, bool) {
	for _, m := range p.Follow {
		if m.Source == source {
			return m, true
		}
	}
	return dirgate.ChangeMark{}, false
}
