package ldap

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/dirgate/dirgate"
	goldap "github.com/go-ldap/ldap/v3"
)

// scoped reads the objects named by attr's values on dn (member of a group, memberOf
// of an object) in one ASQ search where the server supports it, otherwise with the
// equivalent paged subtree search under BaseDN.
func (d *Directory) scoped(ctx context.Context, c conn, dn, attr, reverse string, attrs []string, emit func(*goldap.Entry) error) error {
	if !d.asq {
		return search(ctx, c, query{
			base: d.cfg.BaseDN, scope: goldap.ScopeWholeSubtree,
			filter: "(" + reverse + "=" + goldap.EscapeFilter(dn) + ")", attrs: attrs, pageSize: d.cfg.PageSize,
		}, emit)
	}
	q := query{base: dn, scope: goldap.ScopeBaseObject, filter: "(objectClass=*)", attrs: attrs,
		controls: []goldap.Control{asqControl(attr)}}
	if !d.pageASQ.Load() {
		var buf []*goldap.Entry
		err := search(ctx, c, q, func(e *goldap.Entry) error { buf = append(buf, e); return nil })
		if rc, _ := resultCode(err); rc != goldap.LDAPResultSizeLimitExceeded && rc != goldap.LDAPResultAdminLimitExceeded {
			if err != nil {
				return err
			}
			for _, e := range buf {
				if err := emit(e); err != nil {
					return err
				}
			}
			return nil
		}
		d.pageASQ.Store(true) // the server enforces a page size: page from now on
	}
	q.pageSize = d.cfg.PageSize
	return search(ctx, c, q, emit)
}

// primaryFilter matches the objects whose primary group has one of rids.
func primaryFilter(rids []int) string {
	if len(rids) == 1 {
		return "(primaryGroupID=" + strconv.Itoa(rids[0]) + ")"
	}
	var b strings.Builder
	b.WriteString("(|")
	for _, r := range rids {
		b.WriteString("(primaryGroupID=" + strconv.Itoa(r) + ")")
	}
	b.WriteString(")")
	return b.String()
}

// Members returns the objects in group's member attribute and those whose
// primaryGroupID is the group's RID (the primary group is never in member;
// docs/directory.md, "The primary group"), each once, members outside BaseDN left out
// but for those held by another domain of the forest, listed as references (forest.go).
func (d *Directory) Members(ctx context.Context, group dirgate.Object, props []string) ([]dirgate.Object, error) {
	attrs, err := attributes(props)
	if err != nil {
		return nil, err
	}
	rid, primary := d.domainRID(group.SID)
	primary = primary && group.IsGroup()
	// The writes that may need laying over the answer are read first, and the
	// answering DC's replication state before its members: a DC that holds a write by
	// then lists it (overlay.go).
	pending, complete := d.pendingWrites(ctx, group)
	var states sync.Map // server URL -> replState, the latest attempt's
	var others sync.Map // server URL -> []dirgate.Object, members in the forest's other domains (forest.go)
	objs, served, err := d.readServed(ctx, props, func(ctx context.Context, c conn, emit func(*goldap.Entry) error) error {
		if anyStamped(pending) || !complete {
			st, ok, err := d.readReplState(ctx, c)
			if err != nil {
				return err
			}
			if ok {
				states.Store(servedBy(ctx), st)
			} else {
				states.Delete(servedBy(ctx))
			}
		}
		if err := d.scoped(ctx, c, group.DN, "member", "memberOf", attrs, emit); err != nil {
			return err
		}
		if len(d.forestNCs) > 0 {
			refs, err := d.otherDomainMembers(ctx, c, group.DN, props)
			if err != nil {
				return err
			}
			others.Store(servedBy(ctx), refs)
		}
		if !primary {
			return nil
		}
		return search(ctx, c, query{
			base: d.cfg.BaseDN, scope: goldap.ScopeWholeSubtree,
			filter: primaryFilter([]int{rid}), attrs: attrs, pageSize: d.cfg.PageSize,
		}, emit)
	})
	if err != nil {
		return nil, wrap("members", err)
	}
	var st *replState
	if v, ok := states.Load(served); ok {
		s := v.(replState)
		st = &s
	}
	if v, ok := others.Load(served); ok {
		objs = append(objs, v.([]dirgate.Object)...)
	}
	if !complete && !d.holdsOthers(ctx, group, served, st) {
		return nil, errWritesUnknown
	}
	return d.overlay(ctx, group, served, st, pending, dedupe(objs, ""), props), nil
}

// MemberOf returns the groups obj is a direct member of (its memberOf values, read
// with one ASQ search) and its primary group.
func (d *Directory) MemberOf(ctx context.Context, obj dirgate.Object) ([]dirgate.Object, error) {
	attrs := baseAttrs
	objs, err := d.read(ctx, nil, func(ctx context.Context, c conn, emit func(*goldap.Entry) error) error {
		if err := d.scoped(ctx, c, obj.DN, "memberOf", "member", attrs, emit); err != nil {
			return err
		}
		if obj.PrimaryGroupID <= 0 || d.domainSID == "" {
			return nil
		}
		err := search(ctx, c, query{
			base:  "<SID=" + d.domainSID + "-" + strconv.Itoa(obj.PrimaryGroupID) + ">",
			scope: goldap.ScopeBaseObject, filter: "(objectClass=*)", attrs: attrs,
		}, emit)
		if rc, _ := resultCode(err); rc == goldap.LDAPResultNoSuchObject {
			return nil // a primaryGroupID naming a deleted group: no group to report
		}
		return err
	})
	if err != nil {
		return nil, wrap("member of", err)
	}
	return dedupe(objs, ""), nil
}

// RemoveMember deletes member's DN from group's member attribute.
//
// A Modify that fails with a network error is sent once more on a new connection:
// deleting one value is idempotent. The server answers 53 unwillingToPerform to
// deleting a value that is not there (docs/directory.md, "Changing membership");
// after both objects were resolved that means "not a member", or "primary group" when
// the member's primaryGroupID is the group's RID. On the retry, 53 means the first
// attempt most likely removed the member before the connection broke, and is reported
// as success.
func (d *Directory) RemoveMember(ctx context.Context, group, member dirgate.Object) error {
	req := goldap.NewModifyRequest(group.DN, nil)
	req.Delete("member", []string{member.DN})
	retried, server, stamp, err := d.modifyMember(ctx, req)
	if err == nil {
		return d.remember(ctx, group, member, false, server, stamp)
	}
	if rc, ok := resultCode(err); ok && rc == goldap.LDAPResultUnwillingToPerform {
		if d.isPrimaryGroup(group, member) {
			return fmt.Errorf("ldap: remove member: %w", dirgate.ErrPrimaryGroup)
		}
		if retried {
			return d.remember(ctx, group, member, false, server, stamp)
		}
		return fmt.Errorf("ldap: remove member: %w (%v)", dirgate.ErrNotMember, err)
	}
	return wrap("remove member", err)
}

// AddMember adds member's DN to group's member attribute.
//
// Adding one value is idempotent, so a Modify that fails with a network error is sent
// once more on a new connection. Samba answers 68 entryAlreadyExists to adding a
// member that is there, and also to adding one whose primaryGroupID is the group's
// RID (measured; RFC servers say 20 attributeOrValueExists): "already a member", or,
// on the retry, most likely the first attempt's work, reported as success. 53
// unwillingToPerform is AD's refusal of the addition itself: the primary group again
// on some versions, or a rule of group scopes (a domain-local group in a global
// group; Samba does not enforce those), which the client can only fix by asking for
// another change, so it is a 400. A member deleted since it was resolved is 32.
func (d *Directory) AddMember(ctx context.Context, group, member dirgate.Object) error {
	req := goldap.NewModifyRequest(group.DN, nil)
	req.Add("member", []string{member.DN})
	retried, server, stamp, err := d.modifyMember(ctx, req)
	if err == nil {
		return d.remember(ctx, group, member, true, server, stamp)
	}
	rc, ok := resultCode(err)
	switch {
	case !ok:
	case (rc == goldap.LDAPResultEntryAlreadyExists || rc == goldap.LDAPResultAttributeOrValueExists || rc == goldap.LDAPResultUnwillingToPerform) && d.isPrimaryGroup(group, member):
		// Never written, whatever the attempt: primaryGroupID is not a member value.
		return fmt.Errorf("ldap: add member: %w (primary group: %v)", dirgate.ErrAlreadyMember, err)
	case rc == goldap.LDAPResultEntryAlreadyExists || rc == goldap.LDAPResultAttributeOrValueExists:
		if retried {
			// Most likely the first attempt's own write; a member that was there
			// before it is indistinguishable, and is then reported as a change too.
			return d.remember(ctx, group, member, true, server, stamp)
		}
		return fmt.Errorf("ldap: add member: %w (%v)", dirgate.ErrAlreadyMember, err)
	case rc == goldap.LDAPResultUnwillingToPerform:
		return dirgate.WrapError(dirgate.EINVALID, dirgate.RefusedAddition, fmt.Errorf("ldap: add member: %w", err))
	}
	return wrap("add member", err)
}

// modifyMember sends a change of one member value, once more on a new connection
// after a network error (changing one value is idempotent), and reports whether the
// answer came from that retry. With several DCs, a change that may be remembered (it
// succeeded, or a retry met its likely own work) is stamped on the same connection
// (replstate.go).
func (d *Directory) modifyMember(ctx context.Context, req *goldap.ModifyRequest) (retried bool, server string, st writeStamp, err error) {
	err = d.do(ctx, true, func(ctx context.Context, c conn, attempt int) error {
		retried, server, st = attempt > 0, servedBy(ctx), writeStamp{}
		err := modify(ctx, c, req)
		if d.multiDC() && (err == nil || retried && serverAnswered(err)) {
			st.origin, st.usn = d.stampOf(ctx, c, req.DN)
		}
		return err
	})
	return retried, server, st, err
}

// writeStamp is a write's origin DC and USN (replstate.go).
type writeStamp struct {
	origin string
	usn    int64
}

// isPrimaryGroup reports whether group is member's primary group: both of this
// domain, and member's primaryGroupID the group's RID.
func (d *Directory) isPrimaryGroup(group, member dirgate.Object) bool {
	rid, ok := d.domainRID(group.SID)
	// A member of another domain of the forest has its primary group there: its
	// primaryGroupID is a RID of that domain, which may be this group's too.
	_, own := d.domainRID(member.SID)
	return ok && own && member.PrimaryGroupID == rid
}

// dedupe keeps the first object of each GUID and drops skip.
func dedupe(objs []dirgate.Object, skip string) []dirgate.Object {
	seen := make(map[string]bool, len(objs))
	out := objs[:0]
	for _, o := range objs {
		if o.GUID == skip || seen[o.GUID] {
			continue
		}
		seen[o.GUID] = true
		out = append(out, o)
	}
	return out
}
