package domains

import (
	"context"
	"errors"
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
// group. For every principal of A that changed, each domain of another forest is
// asked for its FSP of that SID and the groups holding it
// (dirgate.ForeignChangeSource), and those come with the batch as changes of the
// FSPs. Within one forest B holds A's object by its DN, with no FSP: each domain of
// A's forest is asked for its groups that hold the DNs of A's changed objects
// (dirgate.ForestGroupFinder), and those come as changes of the groups
// (docs/cache.md, "Several domains").

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
	sids, dns := s.ownSIDs(b.Changes), s.ownDNs(b.Changes)
	type answer struct {
		changes []dirgate.Change
		groups  []dirgate.Object // a domain of the same forest's answer
		err     error
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		asked   = map[*domain][]string{}
		answers = map[*domain]answer{}
	)
	for _, e := range s.r.domains {
		// A domain of the same forest holds the changed objects by DN; one of
		// another forest holds the changed principals through FSPs.
		var ask func(context.Context, []string) answer
		own := sids
		switch f, ok := e.Dir.(dirgate.ForestGroupFinder); {
		case e == s.d:
			continue
		case sameForest(s.d, e) && ok:
			own = dns
			ask = func(ctx context.Context, dns []string) answer {
				gs, err := f.GroupsHolding(ctx, parseDNs(dns))
				if errors.Is(err, errors.ErrUnsupported) {
					return answer{} // a directory that cannot say holds none
				}
				return answer{groups: gs, err: err}
			}
		case !sameForest(s.d, e) && e.Foreign != nil:
			ask = func(ctx context.Context, sids []string) answer {
				chs, err := e.Foreign.ForeignChanges(ctx, sids)
				return answer{changes: answered(chs, sids), err: err}
			}
		default:
			continue
		}
		list := own
		if p := s.pending[e]; p != nil {
			list = union(own, p.sids)
		}
		if len(list) == 0 {
			continue
		}
		asked[e] = list
		wg.Go(func() {
			actx, cancel := context.WithTimeout(ctx, foreignTimeout)
			defer cancel()
			a := ask(actx, list)
			mu.Lock()
			answers[e] = a
			mu.Unlock()
		})
	}
	wg.Wait()
	for e, list := range asked {
		a := answers[e]
		if a.err != nil {
			s.keep(ctx, e, list, a.err)
			continue
		}
		p := s.pending[e]
		delete(s.pending, e)
		if p != nil && p.overflow {
			b.Resync, b.Detail, b.Changes = dirgate.ResyncForeignMissed,
				"domain "+e.name+" could not be asked which of its groups hold more than "+strconv.Itoa(maxPending)+" changed objects of "+s.d.name, nil
			return b, nil
		}
		if len(a.groups) > maxPending {
			b.Resync, b.Detail, b.Changes = dirgate.ResyncForeignMissed,
				"domain "+e.name+" named more than "+strconv.Itoa(maxPending)+" groups holding changed objects of "+s.d.name, nil
			return b, nil
		}
		b.Changes = append(b.Changes, a.changes...)
		b.Changes = append(b.Changes, s.groupChanges(ctx, e, a.groups)...)
	}
	return b, nil
}

// maxAskedDN bounds a DN asked about (and kept while a domain fails): AD's DNs,
// each RDN at most 64 characters, stay far below it. A longer DN is not asked
// about; its object is invalidated in its own domain's groups only.
const maxAskedDN = 4096

// ownDNs returns the DNs of the domain's own objects that changed, once each (a
// deleted object's groups are unknown anyway, and invalidate everything).
func (s *feedSource) ownDNs(changes []dirgate.Change) []string {
	var out []string
	seen := map[string]bool{}
	for _, ch := range changes {
		if ch.DN == "" || len(ch.DN) > maxAskedDN || ch.Kind == dirgate.ChangeDeleted || s.r.ofDN(ch.DN) != s.d {
			continue
		}
		if k := strings.ToLower(ch.DN); !seen[k] {
			seen[k] = true
			out = append(out, ch.DN)
		}
	}
	return out
}

// parseDNs parses the DNs the domain's directory read (ownDNs: each one ofDN placed,
// so each parses).
func parseDNs(dns []string) []dirgate.DN {
	out := make([]dirgate.DN, 0, len(dns))
	for _, s := range dns {
		if dn, err := dirgate.ParseDN(s); err == nil {
			out = append(out, dn)
		}
	}
	return out
}

// groupChanges turns the groups e answered, which hold changed objects of the
// feed's domain by DN, into changes that replace those groups' tokens: their
// listings show the objects as they were. Each is a ChangeObject, not a
// ChangeGroup, since the group's own members did not change: a ChangeGroup would
// also expire every caller's principal (cmd/dirgate). Only e's own groups are taken
// (a group under e's base DN); anything else is refused and logged, so that a
// hostile DC cannot invalidate another domain's listings. More than maxPending
// groups bring a resync instead (ReadChanges).
func (s *feedSource) groupChanges(ctx context.Context, e *domain, groups []dirgate.Object) []dirgate.Change {
	var out []dirgate.Change
	for _, g := range groups {
		id, err := dirgate.ParseIdentifier(g.GUID)
		if err != nil || id.Kind() != dirgate.KindGUID || !g.IsGroup() || s.r.ofDN(g.DN) != e {
			s.r.refused(ctx, e, "it answered a group holding a changed object that is not its own", g)
			continue
		}
		out = append(out, dirgate.Change{Kind: dirgate.ChangeObject, GUID: id.Canonical(), GroupsKnown: true})
	}
	return out
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

// keep remembers the SIDs (or, for a domain of the same forest, the DNs) e could
// not be asked about, for the next read.
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
		s.r.log.WarnContext(ctx, "domains: another domain could not be asked which of its groups hold changed objects; asked again with the next read",
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
