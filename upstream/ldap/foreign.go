package ldap

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/dirgate/dirgate"
	goldap "github.com/go-ldap/ldap/v3"
)

var _ dirgate.ForeignMemberAdder = (*Directory)(nil)

// groupTypeResource is groupType's domain-local bit (GROUP_TYPE_RESOURCE_GROUP,
// MS-SAMR 2.2.1.11; builtin groups such as Administrators carry it too).
const groupTypeResource = 0x4

// Why an addition by SID is refused before anything is written (AddForeignMember).
var (
	errNotDomainLocal = errors.New("a member of another domain may only be added to a domain-local group")
	errSIDNotForeign  = errors.New("the SID names an object of the group's domain that is no foreign security principal")
	errFSPOutOfScope  = errors.New("the domain's foreign security principals lie outside the base DN")
)

// AddForeignMember adds the principal of another domain whose SID is sid to group,
// by a Modify adding the value <SID=…> to member: the DC adds the foreign security
// principal (FSP) it holds for the SID, or creates one and adds it
// (docs/directory.md, "Several domains: what the directory shows").
//
// AD allows such a member only in a domain-local group; Samba checks neither the
// SID nor the group's scope (measured), so the group's groupType is read first and
// any other group is refused as AD refuses it, with the answer of any addition the
// directory refuses, nothing written. So is a SID that names an object of the
// domain that is not an FSP. Every addition costs the same requests whether or not
// an FSP existed before (the groupType, the SID, the Modify, the FSP read back), so
// that its time does not tell whether the principal was a member of any group of
// the domain.
//
// The FSP is read back by SID on the connection the Modify went over, so from the
// DC that took it, and the write is remembered under the FSP's GUID (overlay.go):
// a listing read from a DC that lacks the write shows the FSP all the same. A
// network error retries the whole sequence once on a new connection, as AddMember
// does: on the retry 68 is most likely the first attempt's own work.
func (d *Directory) AddForeignMember(ctx context.Context, group dirgate.Object, sid dirgate.Identifier) error {
	s, err := d.foreignSID(sid)
	if err != nil {
		return err
	}
	var (
		fsp     dirgate.Object
		refused error
		retried bool
		server  string
		stamp   writeStamp
	)
	err = d.do(ctx, true, func(ctx context.Context, c conn, attempt int) error {
		fsp, refused, retried, server, stamp = dirgate.Object{}, nil, attempt > 0, servedBy(ctx), writeStamp{}
		local, err := d.domainLocal(ctx, c, group.DN)
		if err != nil {
			return err
		}
		if !local {
			refused = errNotDomainLocal
			return nil
		}
		if !d.inScope("CN=ForeignSecurityPrincipals," + d.domainNC) {
			refused = errFSPOutOfScope
			return nil
		}
		held, found, err := d.readSID(ctx, c, s)
		if err != nil {
			return err
		}
		if found && !isFSPOf(held, s) {
			refused = errSIDNotForeign
			return nil
		}
		req := goldap.NewModifyRequest(group.DN, nil)
		req.Add("member", []string{"<SID=" + s + ">"})
		merr := modify(ctx, c, req)
		rc, answered := resultCode(merr)
		exists := answered && (rc == goldap.LDAPResultEntryAlreadyExists || rc == goldap.LDAPResultAttributeOrValueExists)
		if merr != nil && !exists {
			return merr
		}
		if d.multiDC() && (merr == nil || retried) {
			stamp.origin, stamp.usn = d.stampOf(ctx, c, req.DN)
		}
		held, found, err = d.readSID(ctx, c, s)
		switch {
		case err != nil:
			return err
		case !found || !isFSPOf(held, s):
			return fmt.Errorf("the foreign security principal for %s could not be read back after the write", s)
		}
		fsp = held
		return merr
	})
	if refused != nil {
		return dirgate.WrapError(dirgate.EINVALID, dirgate.RefusedAddition, fmt.Errorf("ldap: add member of another domain: %w", refused))
	}
	if err == nil {
		return d.remember(ctx, group, fsp, true, server, stamp)
	}
	rc, ok := resultCode(err)
	switch {
	case ok && (rc == goldap.LDAPResultEntryAlreadyExists || rc == goldap.LDAPResultAttributeOrValueExists) && retried:
		// Most likely the first attempt's own write (AddMember).
		return d.remember(ctx, group, fsp, true, server, stamp)
	case ok && (rc == goldap.LDAPResultEntryAlreadyExists || rc == goldap.LDAPResultAttributeOrValueExists):
		return fmt.Errorf("ldap: add member of another domain: %w (%v)", dirgate.ErrAlreadyMember, err)
	case ok && rc == goldap.LDAPResultUnwillingToPerform:
		return dirgate.WrapError(dirgate.EINVALID, dirgate.RefusedAddition, fmt.Errorf("ldap: add member of another domain: %w", err))
	}
	return wrap("add member of another domain", err)
}

// foreignSID checks that id is a SID of a domain other than the directory's own,
// with its RID (S-1-5-21-a-b-c-rid), and returns it in canonical form: it becomes
// part of a member value, <SID=…>, so only a SID the identifier parser accepted in
// that exact shape reaches the DC.
func (d *Directory) foreignSID(id dirgate.Identifier) (string, error) {
	bad := func(why string) (string, error) {
		return "", dirgate.WrapError(dirgate.EINVALID, codeMessages[dirgate.EINVALID], fmt.Errorf("ldap: add member of another domain: %s", why))
	}
	if id.Kind() != dirgate.KindSID {
		return bad("the member is not named by a SID")
	}
	s := id.Canonical()
	rest, ok := strings.CutPrefix(s, "S-1-5-21-")
	parts := strings.Split(rest, "-")
	if !ok || len(parts) != 4 {
		return bad("the SID is not a domain account's (S-1-5-21-…-RID)")
	}
	for _, p := range parts {
		if p == "" || strings.Trim(p, "0123456789") != "" {
			return bad("the SID is not a domain account's (S-1-5-21-…-RID)")
		}
	}
	if d.domainSID != "" && strings.EqualFold(s[:strings.LastIndexByte(s, '-')], d.domainSID) {
		return bad("the SID is of the group's own domain")
	}
	return s, nil
}

// domainLocal reads group's groupType on c and reports whether the group is
// domain-local (groupType is a signed 32-bit integer; docs/directory.md, "Several
// domains: how dirgate serves them").
func (d *Directory) domainLocal(ctx context.Context, c conn, group string) (bool, error) {
	var text string
	found := false
	err := search(ctx, c, query{base: group, scope: goldap.ScopeBaseObject, filter: "(objectClass=group)",
		attrs: []string{"groupType"}}, func(e *goldap.Entry) error {
		text, found = e.GetAttributeValue("groupType"), true
		return nil
	})
	if err != nil {
		return false, err
	}
	if !found || text == "" {
		// Resolved as a group a moment ago; no longer one: as a Modify of member on
		// a non-group answers.
		return false, goldap.NewError(goldap.LDAPResultObjectClassViolation, errors.New("the target is not a group"))
	}
	gt, err := strconv.ParseInt(text, 10, 32)
	if err != nil {
		return false, fmt.Errorf("groupType %q of %s: %w", text, group, err)
	}
	return gt&groupTypeResource != 0, nil
}

// readSID reads the object of the domain that carries sid, on c; found is false
// when there is none under the base DN.
func (d *Directory) readSID(ctx context.Context, c conn, sid string) (obj dirgate.Object, found bool, err error) {
	col := &collector{}
	err = search(ctx, c, query{base: "<SID=" + sid + ">", scope: goldap.ScopeBaseObject, filter: "(objectClass=*)", attrs: baseAttrs}, col.add)
	if rc, ok := resultCode(err); ok && rc == goldap.LDAPResultNoSuchObject {
		return dirgate.Object{}, false, nil
	}
	if err != nil {
		return dirgate.Object{}, false, err
	}
	objs, err := d.finish(ctx, c, col, nil)
	if err != nil || len(objs) != 1 {
		return dirgate.Object{}, false, err
	}
	return objs[0], true, nil
}

// isFSPOf reports whether o is a foreign security principal standing for sid.
func isFSPOf(o dirgate.Object, sid string) bool {
	return o.ObjectType == dirgate.TypeForeignPrincipal && strings.EqualFold(o.SID, sid)
}
