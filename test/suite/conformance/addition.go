package conformance

import (
	"context"

	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/test/harness/fixture"
)

func (s *suite) add(t *testing.T, group, member string) dirgate.OperationResult {
	t.Helper()
	res, err := s.svc.Add(t.Context(), dirgate.Principal{}, dirgate.MustParseIdentifier(group), dirgate.MustParseIdentifier(member))
	if err != nil {
		t.Fatalf("add %s to %s: %v", member, group, err)
	}
	return res
}

// Adding a member puts it in that group, its memberOf and the nested listings through
// the group; adding it again, or adding a primary-group member, changes nothing and
// says so. The test takes out what it added, so it leaves the directory as it found
// it (RemovalDN, which only the removal tests change).
func (s *suite) testAdd(t *testing.T) {
	before := byKey(t, s.list(t, fixture.RemovalDN, dirgate.ListOptions{}))
	if _, ok := before[fixture.DNKey(fixture.RegularDN)]; ok {
		t.Fatalf("%s already lists %s: reseed the directory before running the suite again", fixture.RemovalDN, fixture.RegularDN)
	}
	user := s.lookup(t, fixture.RegularDN)
	group := s.lookup(t, fixture.RemovalDN)
	nested := s.lookup(t, fixture.ConcurrentRemovalDN)
	t.Cleanup(func() {
		for _, m := range []string{fixture.RegularDN, fixture.ConcurrentRemovalDN} {
			if _, err := s.svc.Remove(context.Background(), dirgate.Principal{}, dirgate.MustParseIdentifier(fixture.RemovalDN), dirgate.MustParseIdentifier(m)); err != nil {
				t.Errorf("restore %s: %v", fixture.RemovalDN, err)
			}
		}
	})

	// The group is named by SID, the member by GUID in braces: both resolve first.
	res := s.add(t, group.SID, "{"+user.GUID+"}")
	if res.ResultType != dirgate.ResultSucceeded || res.NoChanges || res.Exception != nil ||
		keyOf(t, res.ActualObjectDN) != fixture.DNKey(fixture.RemovalDN) ||
		res.InnerMessages == nil || len(res.InnerMessages) != 0 || res.ExtraInfo == nil {
		t.Errorf("first addition: %+v, want success with changes", res)
	}
	after := byKey(t, s.list(t, fixture.RemovalDN, dirgate.ListOptions{}))
	if _, ok := after[fixture.DNKey(fixture.RegularDN)]; !ok || len(after) != len(before)+1 {
		t.Errorf("after the addition the group lists %d objects, want %d with %s", len(after), len(before)+1, fixture.RegularDN)
	}
	found := false
	for _, dn := range s.lookup(t, fixture.RegularDN, "memberof").Properties["memberof"] {
		found = found || keyOf(t, dn) == fixture.DNKey(fixture.RemovalDN)
	}
	if !found {
		t.Errorf("memberOf of %s does not name %s after the addition", fixture.RegularDN, fixture.RemovalDN)
	}

	// A group added as a member is expanded by nested listings.
	if res := s.add(t, fixture.RemovalDN, nested.GUID); res.NoChanges {
		t.Errorf("adding a group: %+v, want changes", res)
	}
	indirect := byKey(t, s.list(t, fixture.RemovalDN, dirgate.ListOptions{IncludeIndirect: true}))
	for _, o := range append(s.list(t, fixture.ConcurrentRemovalDN, dirgate.ListOptions{}), nested) {
		if _, ok := indirect[keyOf(t, o.DN)]; !ok {
			t.Errorf("the nested listing lacks %s after its group was added", o.DN)
		}
	}

	tests := []struct{ name, group, member string }{
		// Adding again is not an error: nothing changes.
		{"again", fixture.RemovalDN, fixture.RegularDN},
		// Nor is adding a member the group already has through primaryGroupID, which
		// the directory will not add to member.
		{"primary group", fixture.FinanceTeamDN, fixture.PrimaryMemberDN},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := s.add(t, tt.group, tt.member)
			if res.ResultType != dirgate.ResultSucceeded || !res.NoChanges || res.Exception != nil {
				t.Errorf("result %+v, want success, no changes", res)
			}
		})
	}
	if got := len(s.list(t, fixture.RemovalDN, dirgate.ListOptions{})); got != len(before)+2 {
		t.Errorf("the group lists %d objects after adding a member again, want %d", got, len(before)+2)
	}

	errTests := []struct {
		name, group, member, code, param string
	}{
		// Errors name the parameter at fault, as the body field is spelled.
		{"unknown member", fixture.RemovalDN, "CN=Nobody," + fixture.HROU, dirgate.ENOTFOUND, "newMember"},
		{"unknown group", "CN=Nobody," + fixture.GroupsOU, fixture.RegularDN, dirgate.ENOTFOUND, "group"},
		{"group is a user", fixture.RegularDN, fixture.RemainFirstDN, dirgate.EINVALID, "group"},
		{"group into itself", fixture.RemovalDN, fixture.RemovalDN, dirgate.EINVALID, "newMember"},
	}
	for _, tt := range errTests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.svc.Add(t.Context(), dirgate.Principal{}, dirgate.MustParseIdentifier(tt.group), dirgate.MustParseIdentifier(tt.member))
			if dirgate.ErrorCode(err) != tt.code || dirgate.ErrorParam(err) != tt.param {
				t.Errorf("got %v (code %q, param %q), want %q on %s", err, dirgate.ErrorCode(err), dirgate.ErrorParam(err), tt.code, tt.param)
			}
		})
	}
}
