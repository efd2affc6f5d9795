package ldap

import (
	"context"
	"errors"
	"fmt"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/ldapentry"
	goldap "github.com/go-ldap/ldap/v3"
)

// notFound codes err as ENOTFOUND with the generic client message.
func notFound(op string, err error) error {
	return dirgate.WrapError(dirgate.ENOTFOUND, codeMessages[dirgate.ENOTFOUND], fmt.Errorf("ldap: %s: %w", op, err))
}

// errOutOfScope is the detail of a "not found" for an object outside BaseDN.
var errOutOfScope = errors.New("outside the base DN")

// Lookup reads one object: a DN as a base search on itself, a GUID or SID through
// AD's <GUID=…>/<SID=…> base DN forms (the identifier is already validated and in
// canonical form, which both AD and Samba accept; docs/directory.md, "Identifiers as
// base DNs").
func (d *Directory) Lookup(ctx context.Context, id dirgate.Identifier, props []string) (dirgate.Object, error) {
	var base string
	switch id.Kind() {
	case dirgate.KindDN:
		if !d.inScopeDN(id.DN()) {
			return dirgate.Object{}, notFound("lookup", errOutOfScope)
		}
		base = id.String()
	case dirgate.KindGUID:
		base = "<GUID=" + id.Canonical() + ">"
	case dirgate.KindSID:
		base = "<SID=" + id.Canonical() + ">"
	default:
		return dirgate.Object{}, dirgate.Errorf(dirgate.EINVALID, "The identifier is empty.")
	}
	attrs, err := attributes(props)
	if err != nil {
		return dirgate.Object{}, err
	}
	objs, err := d.read(ctx, props, func(ctx context.Context, c conn, emit func(*goldap.Entry) error) error {
		return search(ctx, c, query{base: base, scope: goldap.ScopeBaseObject, filter: "(objectClass=*)", attrs: attrs}, emit)
	})
	if rc, _ := resultCode(err); rc == goldap.LDAPResultNoSuchObject && id.Kind() == dirgate.KindSID {
		// Samba answers 32 "Duplicate base-DN matches" for a SID that several
		// objects carry, such as S-1-5-11 (an FSP in the domain and a well-known
		// principal in the configuration partition); look inside BaseDN only.
		return d.lookupSID(ctx, id, props)
	}
	if err != nil {
		return dirgate.Object{}, wrap("lookup", err)
	}
	if len(objs) != 1 {
		return dirgate.Object{}, notFound("lookup", errOutOfScope)
	}
	return objs[0], nil
}

// lookupSID finds a SID with a subtree search under BaseDN.
func (d *Directory) lookupSID(ctx context.Context, id dirgate.Identifier, props []string) (dirgate.Object, error) {
	raw, err := ldapentry.SIDToBytes(id.Canonical())
	if err != nil {
		return dirgate.Object{}, dirgate.WrapError(dirgate.EINVALID, codeMessages[dirgate.EINVALID], err)
	}
	attrs, err := attributes(props)
	if err != nil {
		return dirgate.Object{}, err
	}
	objs, err := d.read(ctx, props, func(ctx context.Context, c conn, emit func(*goldap.Entry) error) error {
		return search(ctx, c, query{
			base: d.cfg.BaseDN, scope: goldap.ScopeWholeSubtree,
			filter: "(objectSid=" + escapeBytes(raw) + ")", attrs: attrs, pageSize: d.cfg.PageSize,
		}, emit)
	})
	switch {
	case err != nil:
		return dirgate.Object{}, wrap("lookup by SID", err)
	case len(objs) == 0:
		return dirgate.Object{}, notFound("lookup by SID", errors.New("no object carries the SID"))
	case len(objs) > 1:
		return dirgate.Object{}, dirgate.WrapError(dirgate.EINVALID, "The SID names more than one object.",
			fmt.Errorf("ldap: lookup by SID: %d objects carry %s", len(objs), id.Canonical()))
	}
	return objs[0], nil
}
