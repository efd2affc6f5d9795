// Package conformance is the one test suite every dirgate.Directory passes: the memory
// upstream against the fixture's AD export, the LDAP upstream against a Samba AD DC
// seeded from the same organisation. It drives the directory through
// dirgate.MemberService, so it checks what clients see, and derives every expectation
// from the fixture description by DN and name, never by GUID or SID value (a DC
// assigns its own).
//
// Objects a real DC has besides the fixture (Administrator, built-in groups) are
// neither expected nor forbidden: the suite only checks groups the seed creates, and
// checks supersets where a built-in object takes part.
package conformance

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/test/harness/fixture"
)

// Run runs the suite against the directories newDir returns, which must hold org.
//
// newDir is called once for the read-only tests and once for each test that removes
// or adds members. An in-memory directory should be loaded afresh each time. A
// directory backed by one server may return the same one: the removals touch only
// fixture.RemovalDN and fixture.ConcurrentRemovalDN, which nothing else reads, each
// once per run; the additions go to fixture.RemovalDN and are taken out again. Such a
// server must be reseeded before the next run; a second run fails with a message
// saying so rather than passing on already-removed members.
func Run(t *testing.T, newDir func(t *testing.T) dirgate.Directory, org *fixture.Org) {
	t.Run("Listing", func(t *testing.T) {
		s := newSuite(t, newDir(t), org)
		t.Run("DirectMembersOfEveryGroup", s.testDirectMembersOfEveryGroup)
		t.Run("IndirectMembersOfEveryGroup", s.testIndirectMembersOfEveryGroup)
		t.Run("FiveDeepChain", s.testFiveDeepChain)
		t.Run("Cycles", s.testCycles)
		t.Run("PrimaryGroupMember", s.testPrimaryGroupMember)
		t.Run("MixedKinds", s.testMixedKinds)
		t.Run("AccountStates", s.testAccountStates)
		t.Run("Properties", s.testProperties)
		t.Run("SizeLimit", s.testSizeLimit)
	})
	t.Run("Lookup", func(t *testing.T) {
		s := newSuite(t, newDir(t), org)
		t.Run("IdentifierForms", s.testIdentifierForms)
		t.Run("GroupByEveryForm", s.testGroupByEveryForm)
		t.Run("Principal", s.testPrincipal)
		t.Run("BadInput", s.testBadInput)
	})
	t.Run("Remove", func(t *testing.T) { newSuite(t, newDir(t), org).testRemove(t) })
	t.Run("Add", func(t *testing.T) { newSuite(t, newDir(t), org).testAdd(t) })
	t.Run("ConcurrentListingAndRemoval", func(t *testing.T) { newSuite(t, newDir(t), org).testConcurrent(t) })
}

// suite holds one directory and the service in front of it.
type suite struct {
	dir dirgate.Directory
	svc *dirgate.MemberService
	org *fixture.Org
}

func newSuite(t *testing.T, dir dirgate.Directory, org *fixture.Org) *suite {
	t.Helper()
	if dir == nil {
		t.Fatal("newDir returned nil")
	}
	return &suite{dir: dir, svc: &dirgate.MemberService{Dir: dir}, org: org}
}

// list lists a group given by any identifier form; failures end the test.
func (s *suite) list(t *testing.T, group string, opts dirgate.ListOptions) []dirgate.Object {
	t.Helper()
	id, err := dirgate.ParseIdentifier(group)
	if err != nil {
		t.Fatalf("identifier %q: %v", group, err)
	}
	objs, err := s.svc.List(t.Context(), dirgate.Principal{}, id, opts)
	if err != nil {
		t.Fatalf("list %s: %v", group, err)
	}
	return objs
}

// lookup resolves an identifier with the directory itself.
func (s *suite) lookup(t *testing.T, ident string, props ...string) dirgate.Object {
	t.Helper()
	o, err := s.dir.Lookup(t.Context(), dirgate.MustParseIdentifier(ident), props)
	if err != nil {
		t.Fatalf("lookup %s: %v", ident, err)
	}
	return o
}

// keyOf returns the comparison key of a DN a directory returned.
func keyOf(t *testing.T, dn string) string {
	t.Helper()
	d, err := dirgate.ParseDN(dn)
	if err != nil {
		t.Errorf("directory returned DN %q that does not parse: %v", dn, err)
		return dn
	}
	return d.Key()
}

// byKey indexes a listing by DN key, reporting objects listed twice (by DN or GUID).
func byKey(t *testing.T, objs []dirgate.Object) map[string]dirgate.Object {
	t.Helper()
	out := make(map[string]dirgate.Object, len(objs))
	guids := make(map[string]bool, len(objs))
	for _, o := range objs {
		k := keyOf(t, o.DN)
		if _, dup := out[k]; dup || guids[o.GUID] {
			t.Errorf("%s listed twice", o.DN)
		}
		out[k] = o
		guids[o.GUID] = true
	}
	return out
}

// sameObjects reports the difference between a listing and the fixture objects it
// should hold, by DN, with a few examples of each side.
func sameObjects(t *testing.T, what string, got []dirgate.Object, want []*fixture.Object) {
	t.Helper()
	have := byKey(t, got)
	wantKeys := make(map[string]bool, len(want))
	var missing, extra []string
	for _, w := range want {
		wantKeys[w.Key()] = true
		if _, ok := have[w.Key()]; !ok {
			missing = append(missing, w.DN)
		}
	}
	for k, o := range have {
		if !wantKeys[k] {
			extra = append(extra, o.DN)
		}
	}
	if len(missing)+len(extra) > 0 {
		slices.Sort(missing)
		slices.Sort(extra)
		t.Errorf("%s: got %d objects, want %d; missing %d %s; unexpected %d %s",
			what, len(got), len(want), len(missing), sample(missing), len(extra), sample(extra))
	}
}

func sample(dns []string) string {
	if len(dns) > 5 {
		return fmt.Sprintf("%q...", dns[:5])
	}
	return fmt.Sprintf("%q", dns)
}

// typeCodes are the objectTypeCode values the product fixes (0, 2, 3, 4;
// docs/compatibility.md, "objectType and objectTypeCode") and those dirgate chose for
// contacts and foreign security principals.
var typeCodes = map[fixture.Kind]int{
	fixture.KindUser: 2, fixture.KindGroup: 3, fixture.KindComputer: 4, fixture.KindContact: 5, fixture.KindFSP: 6,
}

var guidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// checkObject compares the default property set of o with the fixture object.
func checkObject(t *testing.T, o dirgate.Object, want *fixture.Object) {
	t.Helper()
	var bad []string
	if !guidPattern.MatchString(o.GUID) {
		bad = append(bad, fmt.Sprintf("guid %q", o.GUID))
	}
	if o.DisplayName != want.Name {
		bad = append(bad, fmt.Sprintf("displayName %q, want %q", o.DisplayName, want.Name))
	}
	if o.ObjectType != string(want.Kind) || o.ObjectTypeCode != typeCodes[want.Kind] {
		bad = append(bad, fmt.Sprintf("objectType %s/%d, want %s/%d", o.ObjectType, o.ObjectTypeCode, want.Kind, typeCodes[want.Kind]))
	}
	if !strings.EqualFold(o.DomainName, fixture.Domain) || o.DirectoryType != dirgate.DirectoryTypeActiveDirectory {
		bad = append(bad, fmt.Sprintf("domainName %q directoryType %d", o.DomainName, o.DirectoryType))
	}
	if want.Kind.HasAccount() != (o.AccountStatus != nil) || want.Kind.HasAccount() != (o.PasswordStatus != nil) {
		bad = append(bad, fmt.Sprintf("accountStatus %v passwordStatus %v on a %s", o.AccountStatus, o.PasswordStatus, want.Kind))
	}
	if len(bad) > 0 {
		t.Errorf("%s: %s", want.DN, strings.Join(bad, "; "))
	}
}

// seededGroups are the groups the fixture creates, whose members are fully known on
// every directory (unlike those of built-in groups), less the two the removal tests
// change: those are checked by the removal tests, so that the read-only tests still
// hold on a shared server after a run.
func seededGroups(org *fixture.Org) []*fixture.Object {
	var out []*fixture.Object
	for _, g := range org.OfKind(fixture.KindGroup) {
		if !g.Builtin && g.DN != fixture.RemovalDN && g.DN != fixture.ConcurrentRemovalDN {
			out = append(out, g)
		}
	}
	return out
}
