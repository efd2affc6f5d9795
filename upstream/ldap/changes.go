package ldap

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/ldapentry"
	goldap "github.com/go-ldap/ldap/v3"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
)

// Reading changes by uSNChanged (docs/cache.md, "Changes made in the directory").
//
// Every object carries uSNChanged, the DC's update sequence number of its last
// originating or replicated write; the rootDSE's highestCommittedUSN is the DC's
// latest. One poll reads the rootDSE and the DC's invocationId, and, only when the
// USN moved, the objects with uSNChanged in (position, highestCommittedUSN]: paged, a
// handful of attributes, tombstones included (show-deleted), memberOf in extended
// form so that each group comes with its GUID. A membership change bumps the group's
// uSNChanged, not the member's (measured on Samba 4.17, docs/directory.md, "Changes
// and uSNChanged"), so the group is what changes; any attribute of any other object
// bumps that object.
//
// USNs are per DC and per database: the position keeps the DC's dsServiceName and
// invocationId (which changes when the database is restored), and, as marks, where
// the feed stood on the DCs it read before. When another DC answers, the read
// continues from that DC's mark; a position with no mark for the DC, a restored
// database, a USN that went backwards or a position older than the tombstone
// lifetime is refused (Resync), which invalidates everything once.

var _ dirgate.ChangeSource = (*Directory)(nil)

// changeAttrs are all a change needs: who, what kind, deleted or not, its groups,
// and its SID (for the groups of other domains that hold it: dirgate.Change.SID).
var changeAttrs = []string{"objectGUID", "objectClass", "isDeleted", "memberOf", "primaryGroupID", "uSNChanged", "objectSid"}

// extendedDNString asks for DNs as "<GUID=…>;<SID=…>;dn" (docs/directory.md, "The
// extended DN control").
var extendedDNString = goldap.NewControlString(goldap.ControlTypeMicrosoftExtendedDN, false, "\x30\x03\x02\x01\x01")

// defaultTombstoneLifetime is used when the forest does not set tombstoneLifetime:
// AD's documented default for forests created before Windows Server 2003 SP1 (60
// days), the shorter of the two defaults.
const defaultTombstoneLifetime = 60 * 24 * time.Hour

// changeState is what the change reader learns once and keeps.
type changeState struct {
	mu                sync.Mutex
	tombstoneLifetime time.Duration  // 0: not read yet
	primaryGUIDs      map[int]string // RID of a primary group -> its GUID
}

// ReadChanges implements dirgate.ChangeSource. The rootDSE, the invocationId and
// the changes are read on one connection (one attempt of d.do), so from one DC: the
// batch returned holds only changes of the DC whose position it returns.
func (d *Directory) ReadChanges(ctx context.Context, pos dirgate.ChangePosition, max int) (b dirgate.ChangeBatch, err error) {
	ctx, span := otel.Tracer("github.com/dirgate/dirgate/upstream/ldap").Start(ctx, "ldap read changes")
	defer func() {
		span.SetAttributes(attribute.Int("dirgate.changes", len(b.Changes)), attribute.String("dirgate.resync", b.Resync))
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}()
	var changes []change
	var primary string
	err = d.do(ctx, true, func(ctx context.Context, c conn, _ int) error {
		// A failed attempt is run again on a new connection, perhaps to another
		// DC: nothing the failed one read is kept.
		var rerr error
		b, changes, rerr = d.readChangesOn(ctx, c, pos, max)
		primary = servedBy(ctx)
		return rerr
	})
	if err != nil {
		return dirgate.ChangeBatch{}, wrap("read changes", err)
	}
	// The other DCs (follow.go). The primary's own follow mark moves with its
	// position, so that a DC the feed leaves after a failover is followed from
	// where the feed stood on it.
	b.Position.Follow = withMark(pos.Follow, dirgate.ChangeMark{Source: b.Position.Source, USN: b.Position.USN, Time: b.Position.Time})
	for _, f := range d.followOthers(ctx, primary, pos, max-len(changes)) {
		b.Position.Follow = withMark(b.Position.Follow, f.mark)
		switch {
		case b.Resync != "":
		case f.resync != "":
			b.Resync, b.Detail, changes = f.resync, f.detail, nil
		default:
			changes = append(changes, f.changes...)
		}
	}
	if len(changes) > max && b.Resync == "" {
		b.Resync, b.Detail, changes = dirgate.ResyncBurst, fmt.Sprintf("more than %d objects changed on the DCs followed", max), nil
	}
	// Primary groups come as a RID: their GUIDs are read once and remembered (the
	// same in every DC's copy of the domain, so any DC may answer).
	for i := range changes {
		ch := &changes[i]
		if ch.Kind == dirgate.ChangeDeleted || ch.primaryRID == 0 {
			continue
		}
		g, err := d.primaryGroupGUID(ctx, ch.primaryRID)
		if err != nil {
			return dirgate.ChangeBatch{}, wrap("read changes: primary group", err)
		}
		if g != "" {
			ch.Groups = append(ch.Groups, g)
		}
	}
	b.Changes = make([]dirgate.Change, len(changes))
	for i, ch := range changes {
		b.Changes[i] = ch.Change
	}
	return b, nil
}

// readChangesOn reads the changes of the DC c is connected to since pos, or since
// the mark pos keeps for that DC when pos was read from another one. The position
// returned is this DC's, carrying pos's marks and, when pos names another DC, pos
// itself as a mark (moved, marks.go); marks of this DC under another
// invocationId are dropped.
func (d *Directory) readChangesOn(ctx context.Context, c conn, pos dirgate.ChangePosition, max int) (b dirgate.ChangeBatch, changes []change, err error) {
	server, nc, usn, invocation, err := readServer(ctx, c)
	if err != nil {
		return b, nil, fmt.Errorf("rootDSE: %w", err)
	}
	now := d.now()
	source := server + "|" + invocation
	thisDC := func(m dirgate.ChangeMark) bool {
		s, _, _ := strings.Cut(m.Source, "|")
		return s == server
	}
	b.Position = moved(pos, dirgate.ChangePosition{Source: source, USN: usn, Time: now}, thisDC)
	from, fromTime := pos.USN, pos.Time
	oldServer, oldInvocation, _ := strings.Cut(pos.Source, "|")
	switch mark, marked := markOf(pos, source); {
	case pos.Source == "":
		b.Resync = dirgate.ResyncNoPosition
	case oldServer == server && oldInvocation != invocation:
		b.Resync, b.Detail = dirgate.ResyncRestored, "the server's invocationId changed: its database was restored or replaced"
	case oldServer == server:
	case marked:
		from, fromTime = mark.USN, mark.Time // back on a DC read before
	case slices.ContainsFunc(pos.Marks, thisDC):
		b.Resync, b.Detail = dirgate.ResyncRestored, "the position kept for "+server+" names another invocationId: its database was restored or replaced"
	default:
		b.Resync, b.Detail = dirgate.ResyncServerChanged, "the position was read from "+oldServer+", the server is now "+server+", for which none is kept"
	}
	if b.Resync == "" && usn < from {
		b.Resync, b.Detail = dirgate.ResyncUSNBackwards, fmt.Sprintf("highestCommittedUSN %d is below the position %d", usn, from)
	}
	if b.Resync != "" || usn == from {
		return b, nil, nil
	}
	if tl := d.tombstoneLifetimeOn(ctx, c); now.Sub(fromTime) > tl {
		b.Resync, b.Detail = dirgate.ResyncGap, fmt.Sprintf("the position is %s old, longer than the tombstone lifetime %s", now.Sub(fromTime).Round(time.Second), tl)
		return b, nil, nil
	}
	var bad error
	err = search(ctx, c, query{
		base: nc, scope: goldap.ScopeWholeSubtree,
		filter:   "(&(uSNChanged>=" + strconv.FormatUint(from+1, 10) + ")(uSNChanged<=" + strconv.FormatUint(usn, 10) + "))",
		attrs:    changeAttrs,
		controls: []goldap.Control{extendedDNString, goldap.NewControlMicrosoftShowDeleted()},
		pageSize: d.cfg.PageSize,
	}, func(e *goldap.Entry) error {
		if len(changes) >= max {
			return errBurst
		}
		ch, err := d.parseChange(e)
		if err != nil {
			bad = err
			return errBurst
		}
		changes = append(changes, ch)
		return nil
	})
	switch {
	case bad != nil:
		b.Resync, b.Detail = dirgate.ResyncUnparseable, bad.Error()
		return b, nil, nil
	case errors.Is(err, errBurst):
		b.Resync, b.Detail = dirgate.ResyncBurst, fmt.Sprintf("more than %d objects changed between USN %d and %d", max, from, usn)
		return b, nil, nil
	case err != nil:
		return dirgate.ChangeBatch{}, nil, err
	}
	return b, changes, nil
}

// errBurst stops a change search early.
var errBurst = errors.New("ldap: change search stopped")

// readServer reads the rootDSE's highestCommittedUSN, dsServiceName and
// defaultNamingContext, then the invocationId of the DC's NTDS Settings object.
func readServer(ctx context.Context, c conn) (server, nc string, usn uint64, invocation string, err error) {
	var usnText string
	err = search(ctx, c, query{base: "", scope: goldap.ScopeBaseObject, filter: "(objectClass=*)",
		attrs: []string{"highestCommittedUSN", "dsServiceName", "defaultNamingContext"}}, func(e *goldap.Entry) error {
		usnText, server, nc = e.GetAttributeValue("highestCommittedUSN"), e.GetAttributeValue("dsServiceName"), e.GetAttributeValue("defaultNamingContext")
		return nil
	})
	if err != nil {
		return "", "", 0, "", err
	}
	if usn, err = strconv.ParseUint(usnText, 10, 64); err != nil || server == "" || nc == "" {
		return "", "", 0, "", fmt.Errorf("rootDSE: highestCommittedUSN %q, dsServiceName %q, defaultNamingContext %q: the server is not an AD DC", usnText, server, nc)
	}
	err = search(ctx, c, query{base: server, scope: goldap.ScopeBaseObject, filter: "(objectClass=*)",
		attrs: []string{"invocationId"}}, func(e *goldap.Entry) error {
		if raw := e.GetRawAttributeValue("invocationId"); len(raw) == 16 {
			invocation = ldapentry.GUIDFromBytes(raw)
		}
		return nil
	})
	if err == nil && invocation == "" {
		err = fmt.Errorf("%s: no invocationId", server)
	}
	return server, nc, usn, invocation, err
}

// change is a dirgate.Change before its primary group is resolved.
type change struct {
	dirgate.Change
	primaryRID int
}

// parseChange reads one changed entry. Anything unexpected is an error: the feed
// then invalidates everything rather than guess.
func (d *Directory) parseChange(e *goldap.Entry) (change, error) {
	raw := e.GetRawAttributeValue("objectGUID")
	if len(raw) != 16 {
		return change{}, fmt.Errorf("a changed entry has an objectGUID of %d bytes", len(raw))
	}
	ch := change{Change: dirgate.Change{Kind: dirgate.ChangeObject, GUID: ldapentry.GUIDFromBytes(raw), GroupsKnown: true}}
	for _, c := range e.GetAttributeValues("objectClass") {
		if strings.EqualFold(c, "group") {
			ch.Kind = dirgate.ChangeGroup
		}
	}
	if raw := e.GetRawAttributeValue("objectSid"); len(raw) > 0 {
		sid, err := ldapentry.SIDFromBytes(raw)
		if err != nil {
			return change{}, fmt.Errorf("object %s: objectSid: %w", ch.GUID, err)
		}
		ch.SID = sid
	}
	// The change search asks for extended DNs, so the entry's own DN comes as
	// <GUID=…>;<SID=…>;DN.
	if x, err := parseExtendedDN(e.DN); err == nil {
		ch.DN = x.dn
	}
	if strings.EqualFold(e.GetAttributeValue("isDeleted"), "TRUE") {
		// A tombstone has lost its links: its groups are unknown.
		ch.Kind, ch.GroupsKnown = dirgate.ChangeDeleted, false
		return ch, nil
	}
	if v := e.GetAttributeValue("primaryGroupID"); v != "" {
		rid, err := strconv.Atoi(v)
		if err != nil || rid <= 0 {
			return change{}, fmt.Errorf("object %s: primaryGroupID %q", ch.GUID, v)
		}
		ch.primaryRID = rid
	}
	for _, a := range e.Attributes {
		r, ranged, err := parseRange(a.Name)
		if err != nil {
			return change{}, fmt.Errorf("object %s: %w", ch.GUID, err)
		}
		if !strings.EqualFold(r.attr, "memberOf") {
			continue
		}
		if ranged && !r.last {
			// In more groups than one read returns (AD's MaxValRange): too many to
			// follow one by one.
			ch.GroupsKnown = false
		}
		for _, v := range a.Values {
			g, err := extendedGUID(v)
			if err != nil {
				return change{}, fmt.Errorf("object %s: memberOf: %w", ch.GUID, err)
			}
			ch.Groups = append(ch.Groups, g)
		}
	}
	return ch, nil
}

// extendedGUID returns the GUID of an extended-form DN "<GUID=…>;…".
func extendedGUID(v string) (string, error) {
	rest, ok := strings.CutPrefix(v, "<GUID=")
	end := strings.IndexByte(rest, '>')
	if !ok || end < 0 {
		return "", fmt.Errorf("value without a GUID (%d bytes)", len(v))
	}
	id, err := dirgate.ParseIdentifier(rest[:end])
	if err != nil || id.Kind() != dirgate.KindGUID {
		return "", fmt.Errorf("value with a malformed GUID")
	}
	return id.Canonical(), nil
}

// primaryGroupGUID returns the GUID of the domain group with rid, "" when none.
func (d *Directory) primaryGroupGUID(ctx context.Context, rid int) (string, error) {
	d.changes.mu.Lock()
	g, ok := d.changes.primaryGUIDs[rid]
	d.changes.mu.Unlock()
	if ok {
		return g, nil
	}
	sid := d.domainSID + "-" + strconv.Itoa(rid)
	err := d.do(ctx, true, func(ctx context.Context, c conn, _ int) error {
		return search(ctx, c, query{base: "<SID=" + sid + ">", scope: goldap.ScopeBaseObject, filter: "(objectClass=*)",
			attrs: []string{"objectGUID"}}, func(e *goldap.Entry) error {
			if raw := e.GetRawAttributeValue("objectGUID"); len(raw) == 16 {
				g = ldapentry.GUIDFromBytes(raw)
			}
			return nil
		})
	})
	if rc, _ := resultCode(err); rc == goldap.LDAPResultNoSuchObject {
		return "", nil // no such group (any more): nothing cached depends on it
	}
	if err != nil {
		return "", err
	}
	d.changes.mu.Lock()
	if d.changes.primaryGUIDs == nil {
		d.changes.primaryGUIDs = map[int]string{}
	}
	if len(d.changes.primaryGUIDs) < 10000 {
		d.changes.primaryGUIDs[rid] = g
	}
	d.changes.mu.Unlock()
	return g, nil
}

// tombstoneLifetime reads the forest's tombstoneLifetime (days) once; until it can be
// read, and where it is not set, the shorter default applies.
func (d *Directory) tombstoneLifetime(ctx context.Context) time.Duration {
	tl := defaultTombstoneLifetime
	_ = d.do(ctx, true, func(ctx context.Context, c conn, _ int) error {
		tl = d.tombstoneLifetimeOn(ctx, c)
		return nil
	})
	return tl
}

// tombstoneLifetimeOn is tombstoneLifetime read on c, so that a change read needs
// no second connection. The value is the forest's, the same on every DC.
func (d *Directory) tombstoneLifetimeOn(ctx context.Context, c conn) time.Duration {
	d.changes.mu.Lock()
	tl := d.changes.tombstoneLifetime
	d.changes.mu.Unlock()
	if tl > 0 {
		return tl
	}
	var cfgNC, days string
	err := search(ctx, c, query{base: "", scope: goldap.ScopeBaseObject, filter: "(objectClass=*)",
		attrs: []string{"configurationNamingContext"}}, func(e *goldap.Entry) error {
		cfgNC = e.GetAttributeValue("configurationNamingContext")
		return nil
	})
	if err == nil && cfgNC != "" {
		err = search(ctx, c, query{base: "CN=Directory Service,CN=Windows NT,CN=Services," + cfgNC, scope: goldap.ScopeBaseObject,
			filter: "(objectClass=*)", attrs: []string{"tombstoneLifetime"}}, func(e *goldap.Entry) error {
			days = e.GetAttributeValue("tombstoneLifetime")
			return nil
		})
	}
	if err != nil {
		return defaultTombstoneLifetime // try again next time
	}
	tl = defaultTombstoneLifetime
	if n, err := strconv.Atoi(days); err == nil && n > 0 && n < 100000 {
		tl = time.Duration(n) * 24 * time.Hour
	}
	d.changes.mu.Lock()
	d.changes.tombstoneLifetime = tl
	d.changes.mu.Unlock()
	return tl
}

// wkDeletedObjects is the well-known GUID of a naming context's Deleted Objects
// container (MS-ADTS 6.1.1.4).
const wkDeletedObjects = "18e2ea80684f11d2b9aa00c04f79f805"

// ChangeCoverage implements dirgate.ChangeCoverage: deletions are seen only if the
// bind account may read tombstones. By default only administrators may (AD and
// Samba: CN=Deleted Objects grants List Contents and Read Property to SYSTEM and
// Administrators); an account without the right gets the container without any
// attribute (measured on Samba 4.17).
func (d *Directory) ChangeCoverage(ctx context.Context) error {
	var visible bool
	err := d.do(ctx, true, func(ctx context.Context, c conn, _ int) error {
		_, nc, _, _, err := readServer(ctx, c)
		if err != nil {
			return err
		}
		return search(ctx, c, query{base: "<WKGUID=" + wkDeletedObjects + "," + nc + ">", scope: goldap.ScopeBaseObject,
			filter: "(objectClass=*)", attrs: []string{"isDeleted"},
			controls: []goldap.Control{goldap.NewControlMicrosoftShowDeleted()}}, func(e *goldap.Entry) error {
			visible = strings.EqualFold(e.GetAttributeValue("isDeleted"), "TRUE")
			return nil
		})
	})
	if rc, _ := resultCode(err); rc == goldap.LDAPResultNoSuchObject || err == nil && !visible {
		return errors.New("deletions are not visible: the bind account cannot read CN=Deleted Objects, so deleted objects leave cached listings only after the cache TTL (docs/operations.md)")
	}
	return wrap("probe deleted objects", err)
}
