package policy_test

import (
	"context"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/policy/internal/policytest"
)

// TestSubjectAccountStatus: input.subject.accountStatus carries the caller's account
// state, in the shape of an object's, and a policy deciding on it is decided per
// state: two callers that differ only in it never share a plan.
func TestSubjectAccountStatus(t *testing.T) {
	const src = `package dirgate.authz
allow if not input.subject.accountStatus.isLocked
allow if input.subject.accountStatus.expirationDate == "2030-01-02T03:04:05.0000000Z"
`
	a, _ := policytest.OpenDir(t, map[string]string{"p.rego": src}, map[string]any{})
	defer a.Close()
	ref := policytest.NewReference(t, map[string]string{"p.rego": src}, map[string]any{})
	objs := []dirgate.Object{{GUID: "u", DN: "CN=u,DC=x", ObjectType: dirgate.TypeUser}}
	group := dirgate.Object{DN: "CN=G,DC=x", GUID: "g", ObjectType: dirgate.TypeGroup}
	exp := dirgate.NewTimestamp(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	for _, c := range []struct {
		name   string
		status *dirgate.AccountStatus
		want   bool
	}{
		{"usable", &dirgate.AccountStatus{}, true},
		{"locked", &dirgate.AccountStatus{IsLocked: true}, false},
		{"locked, with the expiry the policy names", &dirgate.AccountStatus{IsLocked: true, ExpirationDate: exp}, true},
		{"no account (a group)", nil, true},
		{"usable again", &dirgate.AccountStatus{}, true},
	} {
		p := dirgate.Principal{DN: "CN=Caller,DC=x", GUID: "c", Groups: []dirgate.GroupRef{}, AccountStatus: c.status}
		got, err := a.FilterView(context.Background(), p, group, dirgate.ListOptions{}, objs)
		if err != nil {
			t.Fatal(err)
		}
		if (len(got) == 1) != c.want {
			t.Errorf("%s: %d objects visible, want visible %v", c.name, len(got), c.want)
		}
		compare(t, a, ref, p, group, dirgate.ListOptions{}, objs)
	}
}
