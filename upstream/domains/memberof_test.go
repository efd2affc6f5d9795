package domains

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/dirgate/dirgate"
)

// A caller's groups in another domain are found by walking MemberOf breadth first
// (dirgate.MemberService.Principal). The first step into the other domain (the
// groups holding the caller's FSP) is checked; the groups that nest those are asked
// of the other domain's MemberOf, and must be checked as strictly: none may carry
// a home SID or GUID, nor a builtin SID shared by every domain.
func TestPrincipalNestedForeignGroupsChecked(t *testing.T) {
	f := newForest()
	// CORP's Domain Admins, which CORP's User is not in; a role may name it by SID or GUID.
	cAdmins := f.corp.add(object(dirgate.TypeGroup, "CN=Domain Admins,CN=Users,"+corpBase, corpSID+"-512"))
	// FABRIKAM's Local holds the FSP of CORP's Global (newForest). FABRIKAM answers
	// that Local is in three more groups of its own base DN:
	builtin := object(dirgate.TypeGroup, "CN=Administrators,CN=Builtin,"+fabBase, "S-1-5-32-544")
	f.fab.add(builtin, f.fLocal)
	bySID := object(dirgate.TypeGroup, "CN=Impostor1,"+ou+fabBase, cAdmins.SID)
	f.fab.add(bySID, f.fLocal)
	byGUID := object(dirgate.TypeGroup, "CN=Impostor2,"+ou+fabBase, fabSID+"-1301")
	byGUID.GUID = cAdmins.GUID
	f.fab.add(byGUID, f.fLocal)

	r := f.router(0)
	r.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	s := &dirgate.MemberService{Dir: r}
	p, err := s.Principal(context.Background(), dirgate.MustParseIdentifier(f.cUser.DN))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range p.Groups {
		t.Logf("group %s sid=%s guid=%s", g.DN, g.SID, g.GUID)
		switch {
		case g.SID == "S-1-5-32-544":
			t.Errorf("CORP's User holds %s with the builtin SID S-1-5-32-544: a role naming it for CORP's callers applies", g.DN)
		case strings.EqualFold(g.SID, cAdmins.SID):
			t.Errorf("CORP's User holds %s carrying CORP's Domain Admins SID", g.DN)
		case g.GUID == cAdmins.GUID:
			t.Errorf("CORP's User holds %s carrying CORP's Domain Admins GUID", g.DN)
		}
	}
}

// A principal of another domain signs in there; its own groups come from its own
// domain's MemberOf, which must not let that domain put it in a group carrying a
// home group's SID or GUID.
func TestPrincipalOtherDomainOwnGroupsChecked(t *testing.T) {
	f := newForest()
	cAdmins := f.corp.add(object(dirgate.TypeGroup, "CN=Domain Admins,CN=Users,"+corpBase, corpSID+"-512"))
	bySID := object(dirgate.TypeGroup, "CN=Impostor1,"+ou+fabBase, cAdmins.SID)
	f.fab.add(bySID, f.fUser)
	byGUID := object(dirgate.TypeGroup, "CN=Impostor2,"+ou+fabBase, fabSID+"-1301")
	byGUID.GUID = cAdmins.GUID
	f.fab.add(byGUID, f.fUser)

	r := f.router(0)
	r.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	s := &dirgate.MemberService{Dir: r}
	p, err := s.Principal(context.Background(), dirgate.MustParseIdentifier(f.fUser.DN))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range p.Groups {
		if strings.EqualFold(g.SID, cAdmins.SID) || g.GUID == cAdmins.GUID {
			t.Errorf("FABRIKAM's User holds %s (sid %s guid %s), carrying CORP's Domain Admins' identifiers", g.DN, g.SID, g.GUID)
		}
	}
}

// A group of another domain is refused when any other domain holds its GUID, not
// only one listed before it: with three domains, FABRIKAM (second) answering a group
// carrying the GUID of a group of the third domain must not pass it off.
func TestMemberOfGUIDClashWithLaterDomain(t *testing.T) {
	const (
		thirdBase = "DC=contoso,DC=example,DC=org"
		thirdSID  = "S-1-5-21-7000-8000-9000"
	)
	f := newForest()
	third := &fakeDir{name: "contoso"}
	target := third.add(object(dirgate.TypeGroup, "CN=Admins,"+thirdBase, thirdSID+"-512"))
	clash := object(dirgate.TypeGroup, "CN=Impostor,"+ou+fabBase, fabSID+"-1300")
	clash.GUID = target.GUID
	f.fab.add(clash, f.fFSP) // FABRIKAM's FSP for CORP's Global
	r, err := Config{Domains: []Domain{
		{BaseDN: corpBase, SID: corpSID, Dir: f.corp},
		{BaseDN: fabBase, SID: fabSID, Dir: f.fab},
		{BaseDN: thirdBase, SID: thirdSID, Dir: third},
	}}.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	got, err := r.MemberOf(context.Background(), f.cGlobal)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range got {
		if g.GUID == target.GUID {
			t.Errorf("CORP's Global holds %s, carrying the GUID of the third domain's %s", g.DN, target.DN)
		}
	}
}
