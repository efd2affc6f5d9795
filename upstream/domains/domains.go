// Package domains serves several Active Directory domains as one dirgate.Directory:
// a router over one directory per domain (each an upstream/ldap Directory that
// cmd/dirgate opens with that domain's DCs and service account), reached only through
// the root package's interfaces.
//
// An object is served by the domain that holds it: a DN by the domain with the
// deepest base DN it lies under (a child domain's naming context lies below its
// parent's), a SID by the domain whose SID is its domain part, a GUID by every
// domain at once, the home domain's (the first's) object kept when several hold it.
// A group's members come from the group's own domain; each member that stands for
// an object of another configured domain (a foreign security principal whose SID
// belongs to it, or, within one forest, a member held by a DN under its base DN) is
// replaced by that object as its own domain holds it (docs/directory.md, "Several
// domains: how dirgate serves them").
package domains

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/fielderr"
	"github.com/dirgate/dirgate/internal/ldapentry"
)

// DefaultConcurrency bounds the look-ups of foreign members in flight at once, over
// every listing the router serves and every domain.
const DefaultConcurrency = 8

// maxConcurrency bounds Concurrency: beyond it a setting is a typo.
const maxConcurrency = 256

// Domain is one domain of the forest as the router reaches it.
type Domain struct {
	// BaseDN is the domain's naming context (or a subtree of it) that its directory
	// serves: the router sends it every DN that lies under it and under no deeper
	// configured base DN (a child domain's).
	BaseDN string
	// SID is the domain's SID (S-1-5-21-…), as its directory read it from the
	// domain object: the router sends it every SID whose domain part it is, and
	// resolves the foreign security principals that carry such a SID there.
	SID string
	// Dir is the domain's directory.
	Dir dirgate.Directory
	// Schema, when set, names the attributes the domain's schema withholds from the
	// property policy's "*" (dirgate.PropertySchema). Domains of other forests may
	// have other schemas: the router withholds what any domain's schema names.
	Schema dirgate.PropertySchema
	// Checker, when set, checks the passwords of the domain's accounts
	// (CheckPassword): names of this domain are signed in here.
	Checker dirgate.CredentialChecker
	// Changes, when set, says what changed in the domain: the router's
	// ChangeSources follow it (changes.go).
	Changes dirgate.ChangeSource
	// Foreign, when set, finds the foreign security principals the domain holds for
	// principals of other domains, and the groups that hold them (changes.go).
	Foreign dirgate.ForeignChangeSource
	// ForestDomains are the naming contexts of the other domains of the domain's
	// forest, as its directory reads them (the forest's crossRef objects); none when
	// it is alone in its forest or cannot say. Two domains are of one forest when
	// each names the other's (sameForest): a member of the other is written to a
	// group by its DN, not through a foreign security principal, and a caller's
	// groups and a change's groups are looked for in the other by DN
	// (dirgate.ForestGroupFinder).
	ForestDomains []dirgate.DN
}

// Config describes the domains. It is the factory of the router: fill it, then Open.
type Config struct {
	// Domains are the domains served; the first is the home domain, which answers
	// what no other domain is found to hold (a SID of no configured domain, a GUID
	// no domain knows) exactly as it would alone.
	Domains []Domain
	// Concurrency bounds the look-ups of foreign members in flight at once, over
	// every listing the router serves and every domain; 0 means DefaultConcurrency.
	Concurrency int
	// Logger receives the domains that could not resolve a listing's foreign
	// members; nil is slog.Default().
	Logger *slog.Logger
}

// Validate reports every problem at once, each a *fielderr.Error naming its field.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) { errs = append(errs, fielderr.New(field, format, args...)) }
	if len(c.Domains) == 0 {
		bad("Domains", "must name at least the home domain")
	}
	if c.Concurrency < 0 || c.Concurrency > maxConcurrency {
		bad("Concurrency", "must be between 0 (meaning %d) and %d, got %d", DefaultConcurrency, maxConcurrency, c.Concurrency)
	}
	bases := make([]dirgate.DN, len(c.Domains))
	sids := map[string]int{}
	for i, d := range c.Domains {
		field := fmt.Sprintf("Domains[%d]", i)
		if d.Dir == nil {
			bad(field, "has no directory")
		}
		b, err := dirgate.ParseDN(d.BaseDN)
		if err != nil || b.IsZero() {
			bad(field, "base DN %q is not a DN: %v", d.BaseDN, err)
		}
		bases[i] = b
		if !isDomainSID(d.SID) {
			bad(field, "SID %q is not a domain SID (S-1-5-21-…)", d.SID)
		} else if j, ok := sids[strings.ToUpper(d.SID)]; ok {
			bad(field, "is the same domain as Domains[%d] (SID %s): each domain is configured once", j, d.SID)
		} else {
			sids[strings.ToUpper(d.SID)] = i
		}
		for j := range i {
			if bases[i].IsZero() || bases[j].IsZero() {
				continue
			}
			if err := Overlap(bases[j], bases[i]); err != nil {
				bad(field, "base DN %w Domains[%d]", err, j)
			}
		}
	}
	return fielderr.Join(errs...)
}

// Overlap reports whether the base DNs a and b are the same, which the router
// refuses: each domain is served once. A base DN below or above another's is
// allowed: a child domain of the same forest, whose naming context lies below its
// parent's, is configured beside its parent, and a DN goes to the domain with the
// deepest base DN that holds it (docs/directory.md, "Several domains of one forest").
func Overlap(a, b dirgate.DN) error {
	if a.EqualFold(b) {
		return fmt.Errorf("%s is the base DN of", b)
	}
	return nil
}

// isDomainSID accepts S-1-5-21-a-b-c (an NT domain's SID: MS-DTYP 2.4.2.4).
func isDomainSID(s string) bool {
	rest, ok := strings.CutPrefix(strings.ToUpper(s), "S-1-5-21-")
	if !ok {
		return false
	}
	parts := strings.Split(rest, "-")
	if len(parts) != 3 {
		return false
	}
	for _, p := range parts {
		if p == "" || len(p) > 10 || strings.Trim(p, "0123456789") != "" {
			return false
		}
	}
	return true
}

// Directory is the router. It implements dirgate.Directory, dirgate.TransitiveLister
// (when every domain's directory does), dirgate.PropertySchema and
// dirgate.CredentialChecker (signin.go). It is safe for concurrent use.
type Directory struct {
	domains []*domain // home first
	// deepest holds the domains, the deepest base DN first (ofDN).
	deepest []*domain
	// slots holds one token per foreign member's look-up in flight (Concurrency).
	slots  chan struct{}
	log    *slog.Logger
	schema atomic.Pointer[schemaUnion]
	// verified holds the GUIDs of other domains' groups found to be theirs alone
	// (memberof.go).
	verified verifiedGUIDs
}

type domain struct {
	Domain
	base dirgate.DN
	sid  string // upper-case
	name string // DNS name, for errors and logs
	// hasChild says another domain's base DN lies below this one's: a DN under
	// this base DN may still be that domain's.
	hasChild bool

	refusals      refusalLog
	groupFailures refusalLog // groups of other domains' principals that could not be read (memberof.go)
	feedFailures  refusalLog // changed principals this domain could not be asked about (changes.go)
}

var (
	_ dirgate.Directory        = (*Directory)(nil)
	_ dirgate.TransitiveLister = (*Directory)(nil)
	_ dirgate.PropertySchema   = (*Directory)(nil)
)

// Open validates c, reads the NetBIOS name of every domain whose checker can say
// it (readNetBIOSNames), and returns the router.
func (c Config) Open(ctx context.Context) (*Directory, error) {
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("domains: %w", err)
	}
	n := c.Concurrency
	if n == 0 {
		n = DefaultConcurrency
	}
	r := &Directory{slots: make(chan struct{}, n), log: c.Logger}
	if r.log == nil {
		r.log = slog.Default()
	}
	for _, d := range c.Domains {
		base := dirgate.MustParseDN(d.BaseDN) // validated
		r.domains = append(r.domains, &domain{Domain: d, base: base, sid: strings.ToUpper(d.SID), name: base.DomainName()})
	}
	for _, d := range r.domains {
		for _, e := range r.domains {
			if e.base.IsDescendantOf(d.base) {
				d.hasChild = true
			}
		}
	}
	// The base DNs that hold one DN all lie on its path to the root, so the
	// longer key is the deeper base DN.
	r.deepest = slices.Clone(r.domains)
	slices.SortStableFunc(r.deepest, func(a, b *domain) int { return len(b.base.Key()) - len(a.base.Key()) })
	if err := r.readNetBIOSNames(ctx); err != nil {
		return nil, fmt.Errorf("domains: %w", err)
	}
	return r, nil
}

// home is the first domain.
func (r *Directory) home() *domain { return r.domains[0] }

// ofDN returns the domain with the deepest base DN that holds dn, nil for none: a
// DN of a child domain is the child's, whichever domain is configured first.
func (r *Directory) ofDN(dn string) *domain {
	var parsed dirgate.DN
	for _, d := range r.deepest {
		in, ok := ldapentry.ContainsPlain(d.base, dn)
		if !ok {
			if parsed.IsZero() {
				p, err := dirgate.ParseDN(dn)
				if err != nil {
					return nil
				}
				parsed = p
			}
			in = parsed.EqualFold(d.base) || parsed.IsDescendantOf(d.base)
		}
		if in {
			return d
		}
	}
	return nil
}

// ofParsedDN is ofDN for a parsed DN.
func (r *Directory) ofParsedDN(dn dirgate.DN) *domain {
	for _, d := range r.deepest {
		if dn.EqualFold(d.base) || dn.IsDescendantOf(d.base) {
			return d
		}
	}
	return nil
}

// sameForest reports whether d and e are two domains of one forest: each names the
// other's naming context among its forest's domains. Both must say so, so that a
// domain of another forest cannot claim, by naming the home domain, that the home
// domain's objects are held by DN in its groups, nor be sent the home domain's DNs.
func sameForest(d, e *domain) bool {
	return d != e && namesDomain(d, e) && namesDomain(e, d)
}

// namesDomain reports whether d's forest names e's own domain (the DC components
// of e's base DN) among its domains: a domain whose base DN merely lies below one
// that d names (a DC=evil child of a listed DC=corp) is not named.
func namesDomain(d, e *domain) bool {
	for _, nc := range d.ForestDomains {
		if strings.EqualFold(nc.DomainName(), e.name) {
			return true
		}
	}
	return false
}

// ofSID returns the domain whose SID is sid's domain part (sid less its last
// sub-authority, the RID), nil for none: a builtin or well-known SID, or one of a
// domain not configured.
func (r *Directory) ofSID(sid string) *domain {
	i := strings.LastIndexByte(sid, '-')
	if i < 0 {
		return nil
	}
	part := sid[:i]
	for _, d := range r.domains {
		if strings.EqualFold(part, d.sid) {
			return d
		}
	}
	return nil
}

// ofObject returns the domain that holds obj (by its DN), the home domain when
// none does (an object the router did not hand out).
func (r *Directory) ofObject(obj dirgate.Object) *domain {
	if d := r.ofDN(obj.DN); d != nil {
		return d
	}
	return r.home()
}

// Lookup sends a DN to the domain whose base DN holds it (the home domain answers
// one that no domain holds, as it would alone: not found), a SID to the domain of
// its domain part (the home domain for any other SID: builtin and well-known SIDs,
// and those of domains not configured, which it holds as foreign security
// principals if at all), and a GUID to every domain at once (lookupGUID).
func (r *Directory) Lookup(ctx context.Context, id dirgate.Identifier, props []string) (dirgate.Object, error) {
	switch id.Kind() {
	case dirgate.KindDN:
		if d := r.ofParsedDN(id.DN()); d != nil {
			return r.lookupIn(ctx, d, id, props)
		}
	case dirgate.KindSID:
		if d := r.ofSID(id.Canonical()); d != nil {
			return r.lookupIn(ctx, d, id, props)
		}
	case dirgate.KindGUID:
		return r.lookupGUID(ctx, id, props)
	}
	return r.home().Dir.Lookup(ctx, id, props)
}

// lookupGUID asks every domain at once and returns the home domain's object when
// it holds the GUID, else that of the first other domain in order that does. When
// any domain failed, its failure is the answer whatever the others found: the
// object may be there, and an answer that depended on what home found would tell
// a GUID the home domain holds (an object the caller may not view) from one no
// domain holds. Both cost the same look-ups, one per domain, at once.
func (r *Directory) lookupGUID(ctx context.Context, id dirgate.Identifier, props []string) (dirgate.Object, error) {
	if len(r.domains) == 1 {
		return r.home().Dir.Lookup(ctx, id, props)
	}
	objs := make([]dirgate.Object, len(r.domains))
	errs := make([]error, len(r.domains))
	var wg sync.WaitGroup
	for i, d := range r.domains {
		wg.Add(1)
		go func() {
			defer wg.Done()
			objs[i], errs[i] = r.lookupIn(ctx, d, id, props)
			if errors.Is(errs[i], errNotItsOwn) {
				// Refused and logged: as if the domain did not hold the GUID.
				errs[i] = dirgate.Errorf(dirgate.ENOTFOUND, "The object was not found.")
			}
		}()
	}
	wg.Wait()
	// The object of the first domain in order that holds it, home first, even when
	// another domain failed: an object of a domain that answers is served whatever
	// happens to the others (docs/directory.md, "Limits with several domains", says
	// what a caller can tell meanwhile). Every domain is asked at once and answered
	// for, so that the time does not depend on which domain holds it.
	for i, err := range errs {
		if err == nil {
			return objs[i], nil
		}
	}
	for i, err := range errs {
		if dirgate.ErrorCode(err) != dirgate.ENOTFOUND {
			return dirgate.Object{}, fmt.Errorf("domains: lookup in %s: %w", r.domains[i].name, err)
		}
	}
	return dirgate.Object{}, errs[0]
}

// errNotItsOwn is the detail of an object a domain other than home answered that
// cannot be its: its DN outside the domain's base DN, or another identifier than
// the one asked. A hostile or broken DC could otherwise pass off another domain's
// object (a home DN or GUID) as its own.
var errNotItsOwn = errors.New("the domain answered an object that is not its own")

// lookupIn looks id up in d. An object a domain other than home answers is
// accepted only when its DN lies under d's base DN and it carries the SID or GUID
// asked; otherwise the answer is an EUPSTREAM error wrapping errNotItsOwn, logged.
func (r *Directory) lookupIn(ctx context.Context, d *domain, id dirgate.Identifier, props []string) (dirgate.Object, error) {
	obj, err := d.Dir.Lookup(ctx, id, props)
	if err != nil || d == r.home() {
		return obj, err
	}
	if err := r.checkAnswer(ctx, d, id, obj); err != nil {
		return dirgate.Object{}, dirgate.WrapError(dirgate.EUPSTREAM, "", fmt.Errorf("domains: lookup in %s: %w", d.name, err))
	}
	return obj, nil
}

// checkAnswer reports, wrapping errNotItsOwn and logged, an object d answered for
// id that cannot be d's (lookupIn).
func (r *Directory) checkAnswer(ctx context.Context, d *domain, id dirgate.Identifier, obj dirgate.Object) error {
	var why string
	switch {
	case r.ofDN(obj.DN) != d:
		why = "its DN lies outside the domain's base DN"
	case id.Kind() == dirgate.KindSID && !strings.EqualFold(obj.SID, id.Canonical()):
		why = "it carries another SID than the one asked"
	case id.Kind() == dirgate.KindGUID && !strings.EqualFold(obj.GUID, id.Canonical()):
		why = "it carries another GUID than the one asked"
	default:
		return nil
	}
	r.refused(ctx, d, why, obj)
	return fmt.Errorf("%w: %s", errNotItsOwn, why)
}

// refusalLog bounds the log lines about one domain's refused answers: at most one
// per refusalEvery, counting those left out.
type refusalLog struct {
	mu      sync.Mutex
	last    time.Time
	skipped int
}

const refusalEvery = 10 * time.Second

// due reports whether a line may be logged now, and how many were left out since
// the last one.
func (l *refusalLog) due() (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if !l.last.IsZero() && now.Sub(l.last) < refusalEvery {
		l.skipped++
		return false, 0
	}
	skipped := l.skipped
	l.last, l.skipped = now, 0
	return true, skipped
}

// refused logs an answer of d that the router refused, at most once per
// refusalEvery for d; the DN logged is bounded.
func (r *Directory) refused(ctx context.Context, d *domain, why string, obj dirgate.Object) {
	ok, skipped := d.refusals.due()
	if !ok {
		return
	}
	r.log.WarnContext(ctx, "domains: an answer of another domain refused: "+why,
		"domain", d.name, "dn", bounded(obj.DN), "guid", bounded(obj.GUID), "refusedUnlogged", skipped)
}

// bounded cuts a value a directory answered to 256 bytes for a log.
func bounded(s string) string {
	if len(s) > 256 {
		return s[:256] + "…"
	}
	return s
}

// ErrAcrossDomains is the detail of a change of a member of another forest's domain
// that the group's domain cannot make: a removal when it holds no foreign security
// principal for the member, an addition when its directory cannot add members by
// SID (dirgate.ForeignMemberAdder) and it holds none, or when the member carries no
// SID of its own domain (changeOf, addForeign).
var ErrAcrossDomains = errors.New("the group's domain holds no foreign security principal for the member of another domain")

// RemoveMember asks the group's domain to remove member: a member of another domain
// of the same forest by its DN, as the group's domain holds it; a member of another
// forest's domain through the foreign security principal the group's domain holds
// for it (changeOf). A member of another forest's domain with no such principal is
// not a member: ErrNotMember, as for any other non-member.
func (r *Directory) RemoveMember(ctx context.Context, group, member dirgate.Object) error {
	d, m, err := r.changeOf(ctx, group, member, "remove member")
	if errors.Is(err, ErrAcrossDomains) {
		return fmt.Errorf("domains: remove member: %w", dirgate.ErrNotMember)
	}
	if err != nil {
		return err
	}
	return d.Dir.RemoveMember(ctx, group, m)
}

// AddMember asks the group's domain to add member. A member of another domain of
// the same forest is written by its DN (changeOf): the group's DC stores it so and
// applies AD's rules of group scopes itself. A member of another forest's domain is
// added by its SID (addForeign) when the group's directory can do so: the directory
// adds the foreign security principal it holds for the SID, or creates one, and
// refuses it in any group but a domain-local one, as AD does. Otherwise it is added
// through the FSP the group's domain holds for it (changeOf); with none the
// addition is refused, answered as the directory answers any addition it refuses.
func (r *Directory) AddMember(ctx context.Context, group, member dirgate.Object) error {
	if d, m := r.ofObject(group), r.ofDN(member.DN); m != nil && m != d && !sameForest(d, m) {
		if f, ok := d.Dir.(dirgate.ForeignMemberAdder); ok {
			err := r.addForeign(ctx, f, d, m, group, member)
			if !errors.Is(err, errors.ErrUnsupported) {
				return err
			}
		}
	}
	d, m, err := r.changeOf(ctx, group, member, "add member")
	if errors.Is(err, ErrAcrossDomains) {
		return dirgate.WrapError(dirgate.EINVALID, dirgate.RefusedAddition, err)
	}
	if err != nil {
		return err
	}
	return d.Dir.AddMember(ctx, group, m)
}

// addForeign adds member, an object of domain m, to group, a group of domain d,
// through d's directory by the member's SID. Only a SID whose domain part is m's
// reaches d: a member that carries another (or none) is refused as any addition
// the directory refuses, nothing written. Whether d held a foreign security
// principal for the member before makes no difference to the requests the router
// sends, nor to its answer.
func (r *Directory) addForeign(ctx context.Context, f dirgate.ForeignMemberAdder, d, m *domain, group, member dirgate.Object) error {
	fail := func(err error) error {
		return fmt.Errorf("domains: add member: group in %s, member in %s: %w", d.name, m.name, err)
	}
	id, err := dirgate.ParseIdentifier(member.SID)
	if err != nil || id.Kind() != dirgate.KindSID || r.ofSID(id.Canonical()) != m {
		return dirgate.WrapError(dirgate.EINVALID, dirgate.RefusedAddition, fail(fmt.Errorf("%w (the member carries no SID of its domain)", ErrAcrossDomains)))
	}
	if err := f.AddForeignMember(ctx, group, id); err != nil {
		return fail(err)
	}
	return nil
}

// changeOf returns the group's domain and the member as that domain holds it: the
// member itself when it lies in the group's domain (or in none configured) or in
// another domain of the same forest (AD holds such a member in `member` by its DN),
// else the foreign security principal the group's domain holds for the member's
// SID, an object of the group's domain (looked up by SID there: the group's DC
// answers an FSP's SID with the FSP). A member of another forest's domain for which
// the group's domain holds no FSP is an error wrapping ErrAcrossDomains, which the
// callers answer as the directory answers a non-member or a refused addition
// (AddMember creates the FSP instead where the directory can: addForeign). A member
// of another forest's domain is never written by its DN: AD holds such a member
// only as a foreign security principal.
func (r *Directory) changeOf(ctx context.Context, group, member dirgate.Object, op string) (*domain, dirgate.Object, error) {
	d := r.ofObject(group)
	m := r.ofDN(member.DN)
	if m == nil || m == d || sameForest(d, m) {
		return d, member, nil
	}
	refuse := func(detail error) (*domain, dirgate.Object, error) {
		return nil, dirgate.Object{}, fmt.Errorf("domains: %s: group in %s, member in %s: %w", op, d.name, m.name, detail)
	}
	id, err := dirgate.ParseIdentifier(member.SID)
	if err != nil || id.Kind() != dirgate.KindSID {
		return refuse(ErrAcrossDomains)
	}
	fsp, err := d.Dir.Lookup(ctx, id, nil)
	switch {
	case dirgate.ErrorCode(err) == dirgate.ENOTFOUND:
		return refuse(ErrAcrossDomains)
	case err != nil:
		return nil, dirgate.Object{}, fmt.Errorf("domains: %s: the foreign security principal in %s: %w", op, d.name, err)
	case fsp.ObjectType != dirgate.TypeForeignPrincipal || r.ofDN(fsp.DN) != d || !strings.EqualFold(fsp.SID, member.SID):
		return refuse(fmt.Errorf("%w (the SID names a %s there)", ErrAcrossDomains, fsp.ObjectType))
	}
	return d, fsp, nil
}
