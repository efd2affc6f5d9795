package conformance

import (
	"slices"
	"sync"
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/test/harness/fixture"
)

// requireMembers stops the test when a removal group is not as seeded: a directory
// shared between runs has to be reseeded first.
func (s *suite) requireMembers(t *testing.T, group string) []dirgate.Object {
	t.Helper()
	got := s.list(t, group, dirgate.ListOptions{})
	want := s.org.DirectMembers(s.org.MustObject(group))
	if len(got) != len(want) {
		t.Fatalf("%s has %d members, the fixture %d: reseed the directory before running the suite again", group, len(got), len(want))
	}
	return got
}

func (s *suite) remove(t *testing.T, group, member string) dirgate.OperationResult {
	t.Helper()
	res, err := s.svc.Remove(t.Context(), dirgate.Principal{}, dirgate.MustParseIdentifier(group), dirgate.MustParseIdentifier(member))
	if err != nil {
		t.Fatalf("remove %s from %s: %v", member, group, err)
	}
	return res
}

// Removing a member takes it out of that group only; removing it again, or removing a
// non-member, changes nothing and says so; a member through primaryGroupID cannot be
// removed and the result says why.
func (s *suite) testRemove(t *testing.T) {
	before := s.requireMembers(t, fixture.RemovalDN)
	target := s.lookup(t, fixture.RemoveTargetDN)

	// The member is named by GUID, the group by DN: both resolve first.
	res := s.remove(t, fixture.RemovalDN, "{"+target.GUID+"}")
	if res.ResultType != dirgate.ResultSucceeded || res.NoChanges || res.Exception != nil ||
		keyOf(t, res.ActualObjectDN) != fixture.DNKey(fixture.RemovalDN) ||
		res.InnerMessages == nil || len(res.InnerMessages) != 0 || res.ExtraInfo == nil {
		t.Errorf("first removal: %+v, want success with changes", res)
	}
	after := byKey(t, s.list(t, fixture.RemovalDN, dirgate.ListOptions{}))
	if _, still := after[fixture.DNKey(fixture.RemoveTargetDN)]; still || len(after) != len(before)-1 {
		t.Errorf("after removal the group lists %d objects, want %d without %s", len(after), len(before)-1, fixture.RemoveTargetDN)
	}
	for _, dn := range []string{fixture.RemainFirstDN, fixture.RemainSecondDN} {
		if _, ok := after[fixture.DNKey(dn)]; !ok {
			t.Errorf("removal took %s too", dn)
		}
	}
	// Its other memberships are untouched, and its memberOf no longer names the group.
	if _, ok := byKey(t, s.list(t, fixture.AllStaffDN, dirgate.ListOptions{}))[fixture.DNKey(fixture.RemoveTargetDN)]; !ok {
		t.Error("removal from one group took the member out of All Staff")
	}
	props := s.lookup(t, fixture.RemoveTargetDN, "memberof").Properties["memberof"]
	for _, dn := range props {
		if keyOf(t, dn) == fixture.DNKey(fixture.RemovalDN) {
			t.Errorf("memberOf still names %s after the removal", fixture.RemovalDN)
		}
	}

	tests := []struct {
		name       string
		group      string
		member     string
		resultType int
		exception  bool
	}{
		// Removing again is not an error: nothing changes.
		{"again", fixture.RemovalDN, fixture.RemoveTargetDN, dirgate.ResultSucceeded, false},
		// Nor is removing an object that never was a member.
		{"never a member", fixture.RemovalDN, fixture.RegularDN, dirgate.ResultSucceeded, false},
		// A primary-group member stays: the result fails and explains.
		{"primary group only", fixture.FinanceTeamDN, fixture.PrimaryMemberDN, dirgate.ResultFailed, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := s.remove(t, tt.group, tt.member)
			if res.ResultType != tt.resultType || !res.NoChanges || (res.Exception != nil) != tt.exception {
				t.Errorf("result %+v, want type %d, no changes, exception %v", res, tt.resultType, tt.exception)
			}
		})
	}
	if _, ok := byKey(t, s.list(t, fixture.FinanceTeamDN, dirgate.ListOptions{}))[fixture.DNKey(fixture.PrimaryMemberDN)]; !ok {
		t.Error("the primary-group member left Finance Team")
	}

	errTests := []struct {
		name, group, member, code, param string
	}{
		// Errors name the parameter at fault.
		{"unknown member", fixture.RemovalDN, "CN=Nobody," + fixture.HROU, dirgate.ENOTFOUND, "member"},
		{"unknown group", "CN=Nobody," + fixture.GroupsOU, fixture.RemainFirstDN, dirgate.ENOTFOUND, "group"},
		{"group is a user", fixture.RegularDN, fixture.RemainFirstDN, dirgate.EINVALID, "group"},
	}
	for _, tt := range errTests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.svc.Remove(t.Context(), dirgate.Principal{}, dirgate.MustParseIdentifier(tt.group), dirgate.MustParseIdentifier(tt.member))
			if dirgate.ErrorCode(err) != tt.code || dirgate.ErrorParam(err) != tt.param {
				t.Errorf("got %v (code %q, param %q), want %q on %s", err, dirgate.ErrorCode(err), dirgate.ErrorParam(err), tt.code, tt.param)
			}
		})
	}
}

// Listings running while a member is removed see the group either before or after the
// removal, never a mixture or an error. Run it with -race.
func (s *suite) testConcurrent(t *testing.T) {
	const listers, rounds = 8, 20
	before := s.requireMembers(t, fixture.ConcurrentRemovalDN)
	target := fixture.DNKey(fixture.ConcurrentTargetDN)
	var beforeGUIDs, afterGUIDs []string
	for _, o := range before {
		beforeGUIDs = append(beforeGUIDs, o.GUID)
		if keyOf(t, o.DN) != target {
			afterGUIDs = append(afterGUIDs, o.GUID)
		}
	}
	if len(afterGUIDs) != len(beforeGUIDs)-1 {
		t.Fatalf("%s does not list %s", fixture.ConcurrentRemovalDN, fixture.ConcurrentTargetDN)
	}
	id := dirgate.MustParseIdentifier(fixture.ConcurrentRemovalDN)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range listers {
		wg.Go(func() {
			<-start
			for range rounds {
				objs, err := s.svc.List(t.Context(), dirgate.Principal{}, id, dirgate.ListOptions{IncludeIndirect: true})
				if err != nil {
					t.Errorf("concurrent list: %v", err)
					return
				}
				guids := make([]string, len(objs))
				for i, o := range objs {
					guids[i] = o.GUID
				}
				if !slices.Equal(guids, beforeGUIDs) && !slices.Equal(guids, afterGUIDs) {
					t.Errorf("concurrent list saw %d objects, neither the group before (%d) nor after (%d) the removal", len(guids), len(beforeGUIDs), len(afterGUIDs))
					return
				}
			}
		})
	}
	wg.Go(func() {
		<-start
		res, err := s.svc.Remove(t.Context(), dirgate.Principal{}, id, dirgate.MustParseIdentifier(fixture.ConcurrentTargetDN))
		if err != nil || res.NoChanges {
			t.Errorf("concurrent removal: %+v %v", res, err)
		}
	})
	close(start)
	wg.Wait()
	final := s.list(t, fixture.ConcurrentRemovalDN, dirgate.ListOptions{IncludeIndirect: true})
	if len(final) != len(afterGUIDs) {
		t.Errorf("after the removal the group lists %d objects, want %d", len(final), len(afterGUIDs))
	}
}
