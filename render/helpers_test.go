package render_test

import (
	"context"
	"fmt"

	"github.com/dirgate/dirgate"
)

// flatDir is a directory of one group, CN=top,DC=x, whose members are n users
// CN=m0000,DC=x and on. It only reads.
type flatDir struct {
	top   dirgate.Object
	users []dirgate.Object
}

func newFlatDir(n int) *flatDir {
	d := &flatDir{top: dirgate.Object{GUID: guidOf(0), DN: "CN=top,DC=x", DisplayName: "top", ObjectType: dirgate.TypeGroup}}
	for i := range n {
		name := fmt.Sprintf("m%04d", i)
		d.users = append(d.users, dirgate.Object{GUID: guidOf(i + 1), DN: "CN=" + name + ",DC=x", DisplayName: name, ObjectType: dirgate.TypeUser})
	}
	return d
}

func guidOf(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", i) }

func (d *flatDir) Lookup(_ context.Context, id dirgate.Identifier, _ []string) (dirgate.Object, error) {
	for _, o := range append([]dirgate.Object{d.top}, d.users...) {
		if (id.Kind() == dirgate.KindDN && dirgate.MustParseDN(o.DN).EqualFold(id.DN())) || (id.Kind() == dirgate.KindGUID && o.GUID == id.Canonical()) {
			return o, nil
		}
	}
	return dirgate.Object{}, dirgate.Errorf(dirgate.ENOTFOUND, "not found")
}

func (d *flatDir) Members(_ context.Context, g dirgate.Object, _ []string) ([]dirgate.Object, error) {
	if g.GUID == d.top.GUID {
		return append([]dirgate.Object(nil), d.users...), nil
	}
	return nil, nil
}

func (d *flatDir) MemberOf(context.Context, dirgate.Object) ([]dirgate.Object, error) {
	return nil, nil
}

func (d *flatDir) RemoveMember(context.Context, dirgate.Object, dirgate.Object) error {
	return dirgate.Errorf(dirgate.EINTERNAL, "read-only")
}

func (d *flatDir) AddMember(context.Context, dirgate.Object, dirgate.Object) error {
	return dirgate.Errorf(dirgate.EINTERNAL, "read-only")
}

// hideAuthz is an authorizer that only filters: it hides the objects whose display
// names it holds.
type hideAuthz struct{ hide map[string]bool }

func (a *hideAuthz) FilterView(_ context.Context, _ dirgate.Principal, _ dirgate.Object, _ dirgate.ListOptions, objs []dirgate.Object) ([]dirgate.Object, error) {
	var out []dirgate.Object
	for _, o := range objs {
		if !a.hide[o.DisplayName] {
			out = append(out, o)
		}
	}
	return out, nil
}

func (a *hideAuthz) AllowRemove(context.Context, dirgate.Principal, dirgate.Object, dirgate.Object) error {
	return nil
}

func (a *hideAuthz) AllowAdd(context.Context, dirgate.Principal, dirgate.Object, dirgate.Object) error {
	return nil
}

func (a *hideAuthz) AllowView(context.Context, dirgate.Principal, dirgate.Object, dirgate.Object) error {
	return nil
}
