package domains

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dirgate/dirgate"
)

// Each domain's changes are followed on their own (one change feed per domain, each
// with its own position: cmd/dirgate), through the source ChangeSources gives for
// it. That source adds to each batch what the other domains hold of the changed
// principals: a listing of a group of domain B that shows a user of domain A
// (through the foreign security principal B holds for the user) recorded only the
// group's token, so a change of the user, read from A, must also invalidate that
// group. For every principal of A that changed, each other domain is asked for its
// FSP of that SID and the groups holding it (dirgate.ForeignChangeSource), and those
// come with the batch as changes of the FSPs (docs/cache.md, "Several domains").

// foreignTimeout bounds one other domain's answer, so that a domain whose DCs are
// silent holds back each read of another domain's changes by at most this.
const foreignTimeout = 2 * time.Second

// maxPending bounds the SIDs kept for a domain that could not be asked: beyond it
// the next answer of that domain comes with a resync instead (ResyncForeignMissed).
const maxPending = 10000

// DomainChanges is one domain's change source, as ChangeSources returns it.
type DomainChanges struct {
	// Domain is the domain's DNS name, from its base DN.
	Domain string
	// Source reads the domain's changes, with those of the other domains' FSPs of
	// its principals.
	Source dirgate.ChangeSource
}

// ChangeSources returns a change source for each domain that has one (Domain.
// Changes), in the configured order (the home domain first).
func (r *Directory) ChangeSources() []DomainChanges {
	var out []DomainChanges
	for _, d := range r.domains {
		if d.Changes == nil {
			continue
		}
		out = append(out, DomainChanges{Domain: d.name, Source: &feedSource{r: r, d: d, pending: map[*domain]*pendingSIDs{}}})
	}
	return out
}

// feedSource is one domain's change source with the other domains' FSPs added.
type feedSource struct {
	r *Directory
	d *domain

	mu      sync.Mutex
	pending map[*domain]*pendingSIDs // per other domain: what it could not be asked yet
}

// pendingSIDs are SIDs of changed principals another domain could not be asked
// about: they are asked again with the next read, until it answers.
type pendingSIDs struct {
	sids     map[string]bool
	overflow bool // more than maxPending: the answer brings a resync
}

var _ dirgate.ChangeCoverage = (*feedSource)(nil)

// ChangeCoverage is the domain's own source's, when it says.
func (s *feedSource) ChangeCoverage(ctx context.Context) error {
	if cc, ok := s.d.Changes.(dirgate.ChangeCoverage); ok {
		return cc.ChangeCoverage(ctx)
	}
	return nil
}

// ReadChanges reads the domain's changes since pos and adds, for its principals
// that changed, the changes of the FSPs that other domains hold for them. A domain
// that fails to answer is logged and asked again with the next read (the SIDs are
// kept, up to maxPending; beyond that its next answer comes with a resync); the
// batch is returned all the same, so that one domain's outage does not hold back
// another's feed.
func (s *feedSource) ReadChanges(ctx context.Context, pos dirgate.ChangePosition, max int) (dirgate.ChangeBatch, error) {
	b, err := s.d.Changes.ReadChanges(ctx, pos, max)
	if err != nil {
		return b, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if b.Resync != "" {
		// Everything is invalidated: nothing is left to match.
		clear(s.pending)
		return b, nil
	}
	sids := s.ownSIDs(b.Changes)
	type answer struct {
		changes []dirgate.Change
		err     error
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		asked   = map[*domain][]string{}
		answers = map[*domain]answer{}
	)
	for _, e := range s.r.domains {
		if e == s.d || e.Foreign == nil {
			continue
		}
		ask := sids
		if p := s.pending[e]; p != nil {
			ask = union(sids, p.sids)
		}
		if len(ask) == 0 {
			continue
		}
		asked[e] = ask
		wg.Go(func() {
			actx, cancel := context.WithTimeout(ctx, foreignTimeout)
			defer cancel()
			chs, err := e.Foreign.ForeignChanges(actx, ask)
			mu.Lock()
			answers[e] = answer{chs, err}
			mu.Unlock()
		})
	}
	wg.Wait()
	for e, ask := range asked {
		a := answers[e]
		if a.err != nil {
			s.keep(ctx, e, ask, a.err)
			continue
		}
		p := s.pending[e]
		delete(s.pending, e)
		if p != nil && p.overflow {
			b.Resync, b.Detail, b.Changes = dirgate.ResyncForeignMissed,
				"domain "+e.name+" could not be asked which of its groups hold more than "+strconv.Itoa(maxPending)+" changed principals of "+s.d.name, nil
			return b, nil
		}
		b.Changes = append(b.Changes, answered(a.changes, ask)...)
	}
	return b, nil
}

// ownSIDs returns the SIDs of the domain's own principals that changed, once each
// (an FSP the domain holds carries another domain's SID; a deleted object's
// groups are unknown anyway, and invalidate everything).
func (s *feedSource) ownSIDs(changes []dirgate.Change) []string {
	var out []string
	seen := map[string]bool{}
	for _, ch := range changes {
		if ch.SID == "" || ch.Kind == dirgate.ChangeDeleted || s.r.ofSID(ch.SID) != s.d {
			continue
		}
		sid := strings.ToUpper(ch.SID)
		if !seen[sid] {
			seen[sid] = true
			out = append(out, sid)
		}
	}
	return out
}

// keep remembers the SIDs e could not be asked about, for the next read.
func (s *feedSource) keep(ctx context.Context, e *domain, sids []string, err error) {
	p := s.pending[e]
	if p == nil {
		p = &pendingSIDs{sids: map[string]bool{}}
		s.pending[e] = p
	}
	for _, sid := range sids {
		if len(p.sids) >= maxPending && !p.sids[sid] {
			p.overflow = true
			break
		}
		p.sids[sid] = true
	}
	// Asked again with every read while it fails: one line per refusalEvery.
	if ok, skipped := e.feedFailures.due(); ok {
		s.r.log.WarnContext(ctx, "domains: another domain could not be asked which of its groups hold changed principals; asked again with the next read",
			"domain", e.name, "changesOf", s.d.name, "pending", len(p.sids), "overflow", p.overflow, "error", err, "unlogged", skipped)
	}
}

// answered keeps the changes of FSPs whose SID was asked, one per SID: another
// domain's answer names only what it was asked about. Each is an FSP's change
// (ChangeObject), whatever the answer says: an FSP is no group, and its groups
// are known from its memberOf, so that a hostile answer cannot make the feed
// expire every principal or invalidate everything on each read.
func answered(changes []dirgate.Change, asked []string) []dirgate.Change {
	set := make(map[string]bool, len(asked))
	for _, sid := range asked {
		set[sid] = true
	}
	var out []dirgate.Change
	for _, ch := range changes {
		sid := strings.ToUpper(ch.SID)
		if ch.GUID == "" || !set[sid] {
			continue
		}
		delete(set, sid)
		out = append(out, dirgate.Change{Kind: dirgate.ChangeObject, GUID: ch.GUID, SID: ch.SID, Groups: ch.Groups,
			GroupsKnown: ch.GroupsKnown || ch.Kind == dirgate.ChangeDeleted})
	}
	return out
}

// union is sids and the pending ones, each once.
func union(sids []string, pending map[string]bool) []string {
	out := append([]string(nil), sids...)
	for sid := range pending {
		out = append(out, sid)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
