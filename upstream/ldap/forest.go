package ldap

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/ldapentry"
	goldap "github.com/go-ldap/ldap/v3"
)

// Within one forest AD stores a member held by another domain in the group's
// member attribute by its DN (the group's DC keeps a phantom for it: no object, only
// its DN, GUID and SID), not through a foreign security principal. An attribute
// scoped query returns only the objects the DC holds, so such members are missing
// from its answer, and a subtree search from the domain stops at a child domain's
// naming context (docs/directory.md, "Members held by another domain of the
// forest"). So, when the forest holds other domains, the adapter also reads the
// group's member values, with the extended DN control, and lists each value that
// lies in another domain of the forest as a reference: an object with that DN, GUID
// and SID and nothing else, which the router of several domains replaces by the
// object as its own domain holds it (upstream/domains).

// crossRefFilter matches the crossRef objects of the forest's domains
// (systemFlags FLAG_CR_NTDS_DOMAIN, 2: MS-ADTS 6.1.1.2.1.1.5).
const crossRefFilter = "(&(objectClass=crossRef)(nCName=*)(systemFlags:1.2.840.113556.1.4.803:=2))"

// errBadCrossRef is the detail of a crossRef whose nCName is no DN, or of too many.
var errBadCrossRef = errors.New("a crossRef names no naming context")

// maxForestDomains bounds the crossRefs read: far beyond any real forest, and a
// bound on what a DC can make every member value cost (inOtherDomain).
const maxForestDomains = 1000

// readForest reads the naming contexts of the forest's domains from the crossRef
// objects under CN=Partitions of the configuration naming context, and returns
// those other than own. A forest it cannot read whole (no configuration naming
// context, no access, a crossRef naming no DN, more than maxForestDomains) is
// reported as an error with no naming context, and the adapter lists only its own
// domain's members as before.
func readForest(ctx context.Context, c conn, configNC string, own dirgate.DN) ([]dirgate.DN, error) {
	if configNC == "" {
		return nil, errors.New("the rootDSE names no configuration naming context")
	}
	var out []dirgate.DN
	err := search(ctx, c, query{
		base: "CN=Partitions," + configNC, scope: goldap.ScopeSingleLevel,
		filter: crossRefFilter, attrs: []string{"nCName"}, pageSize: 1000,
	}, func(e *goldap.Entry) error {
		nc, err := dirgate.ParseDN(e.GetAttributeValue("nCName"))
		if err != nil || nc.IsZero() {
			return fmt.Errorf("%w: crossRef %q: nCName %q is not a DN", errBadCrossRef, bounded(e.DN), bounded(e.GetAttributeValue("nCName")))
		}
		if !nc.EqualFold(own) {
			if len(out) == maxForestDomains {
				return fmt.Errorf("%w: more than %d domains", errBadCrossRef, maxForestDomains)
			}
			out = append(out, nc)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ForestDomainNCs are the naming contexts of the forest's other domains as the
// directory read them at Open (none when it could not read them).
func (d *Directory) ForestDomainNCs() []dirgate.DN { return slices.Clone(d.forestNCs) }

// inOtherDomain reports whether dn, a member value, lies in another domain of the
// forest: the deepest domain naming context that holds it, the own one included,
// is another's. An object of the own domain outside the base DN is not another
// domain's although the parent domain's naming context holds its DN too.
func (d *Directory) inOtherDomain(dn string) bool {
	if d.inScope(dn) {
		return false // most values: the group's own domain
	}
	p, err := dirgate.ParseDN(dn)
	if err != nil {
		return false
	}
	in := func(nc dirgate.DN) bool { return p.EqualFold(nc) || p.IsDescendantOf(nc) }
	deepest, other := dirgate.DN{}, false
	if own, err := dirgate.ParseDN(d.domainNC); err == nil && in(own) {
		deepest = own
	}
	for _, nc := range d.forestNCs {
		if in(nc) && (deepest.IsZero() || nc.IsDescendantOf(deepest)) {
			deepest, other = nc, true
		}
	}
	return other
}

// otherDomainMembers returns, as references, group's member values that lie in
// another domain of the forest, read with the extended DN control (one request,
// more with range retrieval). A value it cannot read is an error: the listing would
// otherwise lack a member silently.
func (d *Directory) otherDomainMembers(ctx context.Context, c conn, group string, props []string) ([]dirgate.Object, error) {
	vals, err := memberValues(ctx, c, group, extendedDNString)
	if err != nil {
		return nil, err
	}
	now := d.now()
	var out []dirgate.Object
	for _, v := range vals {
		ref, err := parseExtendedDN(string(v))
		if err != nil {
			return nil, fmt.Errorf("member of %q: %w", bounded(group), err)
		}
		if !d.inOtherDomain(ref.dn) {
			continue
		}
		o, err := ref.object(props, now)
		if err != nil {
			return nil, fmt.Errorf("member of %q: %w", bounded(group), err)
		}
		out = append(out, o)
	}
	return out, nil
}

// memberValues reads every value of group's member attribute, through range
// retrieval, sending controls with each request.
func memberValues(ctx context.Context, c conn, group string, controls ...goldap.Control) ([][]byte, error) {
	var entry *ldapentry.Entry
	var pending []pendingRange
	err := search(ctx, c, query{
		base: group, scope: goldap.ScopeBaseObject, filter: "(objectClass=*)",
		attrs: []string{"member"}, controls: controls,
	}, func(e *goldap.Entry) error {
		var err error
		entry, pending, err = convert(e, lowerNames{})
		return err
	})
	if err != nil || entry == nil {
		return nil, err
	}
	// The extended DN control also writes the entry's own DN in the extended form,
	// which is no base DN for the range requests.
	entry.DN = group
	for _, p := range pending {
		if err := completeRange(ctx, c, entry, p, controls...); err != nil {
			return nil, err
		}
	}
	return entry.Values("member"), nil
}

// holdingChunk bounds the DNs of one GroupsHolding filter.
const holdingChunk = 100

// GroupsHolding returns the groups under BaseDN that hold any of dns, objects of
// other domains of the forest, as members (dirgate.ForestGroupFinder), with one
// search per holdingChunk DNs: the group's DC matches a value against its phantom.
func (d *Directory) GroupsHolding(ctx context.Context, dns []dirgate.DN) ([]dirgate.Object, error) {
	if len(dns) == 0 {
		return nil, nil
	}
	objs, err := d.read(ctx, nil, func(ctx context.Context, c conn, emit func(*goldap.Entry) error) error {
		for rest := dns; len(rest) > 0; {
			n := min(len(rest), holdingChunk)
			var f strings.Builder
			f.WriteString("(&(objectClass=group)(|")
			for _, dn := range rest[:n] {
				f.WriteString("(member=" + goldap.EscapeFilter(dn.String()) + ")")
			}
			f.WriteString("))")
			err := search(ctx, c, query{
				base: d.cfg.BaseDN, scope: goldap.ScopeWholeSubtree, filter: f.String(),
				attrs: baseAttrs, pageSize: d.cfg.PageSize,
			}, emit)
			if err != nil {
				return err
			}
			rest = rest[n:]
		}
		return nil
	})
	if err != nil {
		return nil, wrap("groups holding", err)
	}
	return dedupe(objs, ""), nil
}

var _ dirgate.ForestGroupFinder = (*Directory)(nil)

// extendedDN is one value read with the extended DN control.
type extendedDN struct {
	guid, sid, dn string
}

// maxExtendedDN bounds a value: AD's DNs stay far below it.
const maxExtendedDN = 64 << 10

// parseExtendedDN parses "<GUID=…>;<SID=…>;DN" (the SID part only for security
// principals) as AD and Samba return it with flag 1. The GUID is required and
// canonicalised; other parts (<WKGUID=…>) are refused, as the control never
// returns them for member values.
func parseExtendedDN(s string) (extendedDN, error) {
	var out extendedDN
	if len(s) > maxExtendedDN {
		return out, fmt.Errorf("extended DN of %d bytes", len(s))
	}
	rest := s
	for strings.HasPrefix(rest, "<") {
		end := strings.IndexByte(rest, '>')
		if end < 0 {
			return out, fmt.Errorf("extended DN %q: unterminated part", bounded(s))
		}
		part := rest[1:end]
		rest = rest[end+1:]
		if r, ok := strings.CutPrefix(rest, ";"); ok {
			rest = r
		} else if rest != "" {
			return out, fmt.Errorf("extended DN %q: no ';' after a part", bounded(s))
		}
		key, val, ok := strings.Cut(part, "=")
		switch {
		case !ok:
			return out, fmt.Errorf("extended DN %q: part without '='", bounded(s))
		case strings.EqualFold(key, "GUID") && out.guid == "":
			id, err := dirgate.ParseIdentifier(val)
			if err != nil || id.Kind() != dirgate.KindGUID {
				return out, fmt.Errorf("extended DN %q: bad GUID", bounded(s))
			}
			out.guid = id.Canonical()
		case strings.EqualFold(key, "SID") && out.sid == "":
			id, err := dirgate.ParseIdentifier(val)
			if err != nil || id.Kind() != dirgate.KindSID {
				return out, fmt.Errorf("extended DN %q: bad SID", bounded(s))
			}
			out.sid = id.Canonical()
		default:
			return out, fmt.Errorf("extended DN %q: unexpected part", bounded(s))
		}
	}
	if out.guid == "" {
		return out, fmt.Errorf("extended DN %q: no GUID", bounded(s))
	}
	if _, err := dirgate.ParseDN(rest); err != nil || rest == "" {
		return out, fmt.Errorf("extended DN %q: bad DN", bounded(s))
	}
	out.dn = rest
	return out, nil
}

// object renders the reference as a listed object: its DN, GUID and SID, and the
// names its DN gives; no class, no other property (the DC holds none).
func (x extendedDN) object(props []string, now time.Time) (dirgate.Object, error) {
	e := ldapentry.NewEntry(x.dn)
	g, err := ldapentry.GUIDToBytes(x.guid)
	if err != nil {
		return dirgate.Object{}, err
	}
	e.Add("objectGUID", g)
	if x.sid != "" {
		b, err := ldapentry.SIDToBytes(x.sid)
		if err != nil {
			return dirgate.Object{}, err
		}
		e.Add("objectSid", b)
	}
	return e.ToObject(props, now)
}

// bounded cuts a value a server sent to 256 bytes for an error.
func bounded(s string) string {
	if len(s) > 256 {
		return s[:256] + "…"
	}
	return s
}
