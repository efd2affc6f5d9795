package policy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/policy"
	"github.com/dirgate/dirgate/policy/internal/policytest"
	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/upstream/memory"
)

// The demo principals of cmd/dirgate's demo tokens, and groups of the demo directory.
const (
	danaDN = policytest.DanaDN
	hugoDN = policytest.HugoDN
	// bellaDN belongs to no group that any demo role names.
	bellaDN = policytest.BellaDN

	mixedMembers = policytest.MixedMembersDN
	newsletter   = "CN=Newsletter,OU=Groups,DC=corp,DC=example,DC=com"
	itDepartment = "CN=IT Department,OU=Groups,DC=corp,DC=example,DC=com"
	financeTeam  = "CN=Finance Team,OU=Groups,DC=corp,DC=example,DC=com"
)

// demoService is the memory demo directory behind a MemberService that asks the
// bundled policy.
func demoService(t testing.TB, log io.Writer) (*dirgate.MemberService, *policy.Authorizer) {
	t.Helper()
	dir, err := memory.Demo()
	if err != nil {
		t.Fatal(err)
	}
	authz, err := policy.Open(context.Background(), policy.Config{Logger: policytest.QuietLogger(), DecisionLog: policytest.LineLog(log)})
	if err != nil {
		t.Fatal(err)
	}
	return &dirgate.MemberService{Dir: dir, Authz: authz}, authz
}

func names(objs []dirgate.Object) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = o.DisplayName
	}
	return out
}

// TestDemoListings is the promise of docs/policy.md: the two demo tokens see
// different listings of the same groups.
func TestDemoListings(t *testing.T) {
	svc, _ := demoService(t, nil)
	ctx := context.Background()
	tests := []struct {
		name     string
		caller   string
		group    string
		indirect bool
		want     []string
	}{
		// The admin's role covers everything: the contact, the foreign security
		// principal and the nested group included.
		{name: "admin sees every member", caller: danaDN, group: mixedMembers,
			want: []string{"Acme Support", "S-1-5-11", "Daisy Vargas", "Directory Admins", "WS-0001"}},
		// The help desk sees users under OU=Staff, computers under OU=Workstations and
		// (through IT Department, which it belongs to transitively) groups of
		// OU=Groups; not contacts, not foreign security principals.
		{name: "help desk sees people, computers and IT groups", caller: hugoDN, group: mixedMembers,
			want: []string{"Daisy Vargas", "Directory Admins", "WS-0001"}},
		// Only contacts and a user: the help desk sees the user alone.
		{name: "help desk does not see contacts", caller: hugoDN, group: newsletter,
			want: []string{"Hazel Zhou", "Zoë Ångström"}},
		// Nested expansion is filtered too: the groups come from OU=Groups.
		{name: "help desk sees nested groups", caller: hugoDN, group: itDepartment, indirect: true,
			want: []string{"Aaron Anderson", "Dana Admin", "Desktop Engineers", "Ethan Castillo", "Help Desk", "Hugo Helpdesk",
				"Isaac Garcia", "IT Support", "Kim Lee+Park", "Legacy\\Account", "Mason Iverson", "Quinn Morgan", "Rita Regular",
				"Service Desk Leads", "Ulric Olsen"}},
		// A caller without any role sees nothing at all, not even the group: it is
		// answered as an unknown group (want nil).
		{name: "no role, no group", caller: bellaDN, group: financeTeam},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := policytest.Principal(t, svc, tt.caller)
			got, err := svc.List(ctx, p, dirgate.MustParseIdentifier(tt.group), dirgate.ListOptions{IncludeIndirect: tt.indirect})
			if tt.want == nil {
				if dirgate.ErrorCode(err) != dirgate.ENOTFOUND || dirgate.ErrorMessage(err) != "The group was not found." {
					t.Fatalf("got %v, want the unknown group's 404", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			g := names(got)
			slices.Sort(g)
			want := slices.Clone(tt.want)
			slices.Sort(want)
			if !slices.Equal(g, want) {
				t.Errorf("listing of %s as %s:\n got %q\nwant %q", tt.group, tt.caller, g, want)
			}
		})
	}
}

// TestDemoListingFiltersBeforeSizeLimit: the size limit counts visible objects,
// so a caller never receives fewer objects than it may see because of hidden ones.
func TestDemoListingFiltersBeforeSizeLimit(t *testing.T) {
	svc, _ := demoService(t, nil)
	p := policytest.Principal(t, svc, hugoDN)
	// Mixed Members in listing order: Acme Support (hidden), Daisy Vargas, Directory Admins, ...
	got, err := svc.List(context.Background(), p, dirgate.MustParseIdentifier(mixedMembers), dirgate.ListOptions{SizeLimit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"Daisy Vargas", "Directory Admins"}; !slices.Equal(names(got), want) {
		t.Errorf("got %q, want %q", names(got), want)
	}
}

// TestDemoRemovals: removal decisions of the demo roles, and the client-safe
// EFORBIDDEN of a denial.
func TestDemoRemovals(t *testing.T) {
	tests := []struct {
		name   string
		caller string
		group  string
		member string
		want   string // error code; "" means allowed
		param  string // the parameter a 404 names
	}{
		// The help desk may remove users from the newsletter (by DN in its role).
		{name: "help desk removes a user from the newsletter", caller: hugoDN, group: newsletter,
			member: "CN=Hazel Zhou,OU=HR,OU=Staff,DC=corp,DC=example,DC=com"},
		// ... and contacts: the role's object types.
		{name: "help desk removes a contact from the newsletter", caller: hugoDN, group: newsletter,
			member: "CN=Acme Support,OU=Contacts,DC=corp,DC=example,DC=com"},
		// The removal test group is named by GUID in the role.
		{name: "help desk removes from a group named by GUID", caller: hugoDN, group: "CN=Removal Test,OU=Groups,DC=corp,DC=example,DC=com",
			member: "CN=Rick Remove,OU=HR,OU=Staff,DC=corp,DC=example,DC=com"},
		// Not from a group outside its scope.
		{name: "help desk may not remove from another group", caller: hugoDN, group: financeTeam,
			member: "CN=Caleb Owens,OU=Finance,OU=Staff,DC=corp,DC=example,DC=com", want: dirgate.EFORBIDDEN},
		// Not a group member from the newsletter's scope: only users and contacts.
		{name: "help desk may not remove a group", caller: hugoDN, group: mixedMembers,
			member: "CN=Directory Admins,OU=Groups,DC=corp,DC=example,DC=com", want: dirgate.EFORBIDDEN},
		// Workstation admins (the help desk, through nesting) remove computers anywhere.
		{name: "help desk removes a computer through Workstation Admins", caller: hugoDN, group: mixedMembers,
			member: "CN=WS-0001,OU=Workstations,DC=corp,DC=example,DC=com"},
		// The admin removes anything.
		{name: "admin removes a group from a group", caller: danaDN, group: mixedMembers,
			member: "CN=Directory Admins,OU=Groups,DC=corp,DC=example,DC=com"},
		// Viewing rights do not grant removal: the help desk views Daisy Vargas.
		{name: "help desk may not remove a user it views", caller: hugoDN, group: mixedMembers,
			member: "CN=Daisy Vargas,OU=HR,OU=Staff,DC=corp,DC=example,DC=com", want: dirgate.EFORBIDDEN},
		// A forbidden removal of a member the caller may not view is answered as an
		// unknown member: the help desk does not view contacts.
		{name: "help desk may not remove a contact it does not view", caller: hugoDN, group: mixedMembers,
			member: "CN=Acme Support,OU=Contacts,DC=corp,DC=example,DC=com", want: dirgate.ENOTFOUND, param: "member"},
		// A caller without roles views no group: every group is unknown to it.
		{name: "no role may remove nothing", caller: bellaDN, group: newsletter,
			member: "CN=Hazel Zhou,OU=HR,OU=Staff,DC=corp,DC=example,DC=com", want: dirgate.ENOTFOUND, param: "group"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var log bytes.Buffer
			svc, _ := demoService(t, &log)
			p := policytest.Principal(t, svc, tt.caller)
			_, err := svc.Remove(context.Background(), p, dirgate.MustParseIdentifier(tt.group), dirgate.MustParseIdentifier(tt.member))
			if got := dirgate.ErrorCode(err); got != tt.want {
				t.Fatalf("error code %q (%v), want %q", got, err, tt.want)
			}
			if tt.want != "" {
				var de *dirgate.Error
				if !errors.As(err, &de) || strings.Contains(de.Message, "rego") || de.Message == "" {
					t.Errorf("client message %q is not a client-safe explanation", dirgate.ErrorMessage(err))
				}
			}
			if tt.want == dirgate.ENOTFOUND {
				if msg := dirgate.ErrorMessage(err); dirgate.ErrorParam(err) != tt.param || msg != "The "+tt.param+" was not found." {
					t.Errorf("param %q, message %q: not the unknown %s's answer", dirgate.ErrorParam(err), msg, tt.param)
				}
			}
			// The request's last line decides it: the removal's, or, for an object
			// the caller may not view, that view's.
			var line struct {
				Input struct {
					Action string `json:"action"`
				} `json:"input"`
				Result struct {
					Allowed bool `json:"allowed"`
				} `json:"result"`
			}
			lines := bytes.Split(bytes.TrimSpace(log.Bytes()), []byte("\n"))
			if err := json.Unmarshal(lines[len(lines)-1], &line); err != nil {
				t.Fatalf("decision log %q: %v", log.String(), err)
			}
			if line.Result.Allowed != (tt.want == "") {
				t.Errorf("decision log says allowed=%v", line.Result.Allowed)
			}
			if want := map[bool]string{true: "view", false: "remove"}[tt.want == dirgate.ENOTFOUND]; line.Input.Action != want {
				t.Errorf("decision log's last line is a %q decision, want %q", line.Input.Action, want)
			}
		})
	}
}

// TestDemoAdditions: addition decisions of the demo roles (action "add", decided
// before the directory is touched), each logged with the action and the member.
func TestDemoAdditions(t *testing.T) {
	const (
		hazel    = "CN=Hazel Zhou,OU=HR,OU=Staff,DC=corp,DC=example,DC=com"
		caleb    = "CN=Caleb Owens,OU=Finance,OU=Staff,DC=corp,DC=example,DC=com"
		dirAdmin = "CN=Directory Admins,OU=Groups,DC=corp,DC=example,DC=com"
	)
	tests := []struct {
		name, caller, group, member string
		want                        string // error code; "" means allowed
	}{
		// The help desk adds users to the newsletter, and to a group its role names by GUID.
		{"help desk adds a user to the newsletter", hugoDN, newsletter, caleb, ""},
		{"help desk adds a user to Removal Test", hugoDN, "CN=Removal Test,OU=Groups,DC=corp,DC=example,DC=com", caleb, ""},
		// Not a group, and not to another group.
		{"help desk may not add a group to the newsletter", hugoDN, newsletter, dirAdmin, dirgate.EFORBIDDEN},
		{"help desk may not add to another group", hugoDN, financeTeam, hazel, dirgate.EFORBIDDEN},
		// Workstation admins (the help desk, through nesting) add computers to Mixed
		// Members only: never to a group whose rights the computer would then hold.
		{"help desk adds a computer through Workstation Admins", hugoDN, mixedMembers, "CN=WS-0002,OU=Workstations,DC=corp,DC=example,DC=com", ""},
		{"help desk may not add a computer to another group", hugoDN, financeTeam, "CN=WS-0002,OU=Workstations,DC=corp,DC=example,DC=com", dirgate.EFORBIDDEN},
		{"help desk may not add a computer to Directory Admins", hugoDN, dirAdmin, "CN=WS-0002,OU=Workstations,DC=corp,DC=example,DC=com", dirgate.EFORBIDDEN},
		// The admin adds anything; a caller without roles nothing.
		{"admin adds a group to a group", danaDN, financeTeam, dirAdmin, ""},
		{"no role may add nothing", bellaDN, newsletter, caleb, dirgate.ENOTFOUND},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var log bytes.Buffer
			svc, _ := demoService(t, &log)
			p := policytest.Principal(t, svc, tt.caller)
			res, err := svc.Add(context.Background(), p, dirgate.MustParseIdentifier(tt.group), dirgate.MustParseIdentifier(tt.member))
			if got := dirgate.ErrorCode(err); got != tt.want {
				t.Fatalf("error code %q (%v), want %q", got, err, tt.want)
			}
			if tt.want == "" && (res.NoChanges || res.ResultType != dirgate.ResultSucceeded) {
				t.Errorf("result %+v, want an addition", res)
			}
			wantMsg, wantAction, wantDN := "You are not allowed to add this member to this group.", "add", tt.member
			if tt.want == dirgate.ENOTFOUND {
				// A caller without roles views no group.
				wantMsg, wantAction, wantDN = "The group was not found.", "view", tt.group
			}
			if tt.want != "" && dirgate.ErrorMessage(err) != wantMsg {
				t.Errorf("client message %q", dirgate.ErrorMessage(err))
			}
			var line struct {
				Input struct {
					Action string `json:"action"`
					Object struct {
						DN string `json:"dn"`
					} `json:"object"`
				} `json:"input"`
				Result struct {
					Allowed bool `json:"allowed"`
				} `json:"result"`
			}
			if err := json.Unmarshal(log.Bytes(), &line); err != nil {
				t.Fatalf("decision log %q: %v", log.String(), err)
			}
			if line.Result.Allowed != (tt.want == "") || line.Input.Action != wantAction || !strings.EqualFold(line.Input.Object.DN, wantDN) {
				t.Errorf("decision log line %s", log.String())
			}
		})
	}
}

// helpdeskOnMixed returns the help desk's principal, and Mixed Members with its
// listing: a caller who sees some of a listing's objects and not others.
func helpdeskOnMixed(t *testing.T, svc *dirgate.MemberService) (dirgate.Principal, dirgate.Object, []dirgate.Object) {
	t.Helper()
	p := policytest.Principal(t, svc, fixture.DemoHelpdeskDN)
	group, err := svc.Dir.Lookup(context.Background(), dirgate.MustParseIdentifier(fixture.MixedDN), nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := svc.Listing(context.Background(), group, dirgate.ListOptions{})
	objs := l.Objects
	if err != nil {
		t.Fatal(err)
	}
	return p, group, objs
}

// TestReusedDecisions: listing the same shared slice again (as the cache hands it
// out) reuses the previous decisions, which must be the ones a fresh evaluation
// gives; a listing with equal contents in another slice is decided afresh.
func TestReusedDecisions(t *testing.T) {
	var log bytes.Buffer
	svc, authz := demoService(t, &log)
	ctx := context.Background()
	p, group, objs := helpdeskOnMixed(t, svc)
	copied := append([]dirgate.Object(nil), objs...)
	var results [][]string
	for _, listing := range [][]dirgate.Object{objs, objs, copied} {
		out, err := authz.FilterView(ctx, p, group, dirgate.ListOptions{}, listing)
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, names(out))
	}
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d decision log lines, want 3", len(lines))
	}
	for i, want := range []bool{false, true, false} {
		if got := strings.Contains(lines[i], `"reusedDecisions":true`); got != want {
			t.Errorf("listing %d: reused %v, want %v", i+1, got, want)
		}
	}
	for i := 1; i < 3; i++ {
		if strings.Join(results[i], "|") != strings.Join(results[0], "|") {
			t.Fatalf("listing %d decided differently: %d objects vs %d", i+1, len(results[i]), len(results[0]))
		}
	}
	if len(results[0]) == 0 || len(results[0]) == len(objs) {
		t.Fatalf("the help desk sees %d of %d: the test needs a mixed view", len(results[0]), len(objs))
	}
}

// TestReusedSelection: SelectView answers from remembered decisions with the
// selection made when they were remembered, shared between requests. Every size
// limit still gets exactly its first objects, and a limited answer never changes
// what a later unlimited one receives.
func TestReusedSelection(t *testing.T) {
	svc, authz := demoService(t, io.Discard)
	ctx := context.Background()
	p, group, objs := helpdeskOnMixed(t, svc)
	var visible []int // positions the help desk sees, from an evaluation on a copy
	seen, err := authz.FilterView(ctx, p, group, dirgate.ListOptions{}, append([]dirgate.Object(nil), objs...))
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range objs {
		if slices.ContainsFunc(seen, func(s dirgate.Object) bool { return s.GUID == o.GUID }) {
			visible = append(visible, i)
		}
	}
	if len(visible) < 3 || len(visible) == len(objs) {
		t.Fatalf("the help desk sees %d of %d: the test needs a mixed view", len(visible), len(objs))
	}
	for _, limit := range []int{0, 1, 2, 0, len(visible), len(visible) - 1, len(visible) + 1, 0} {
		sel, err := authz.SelectView(ctx, p, group, dirgate.ListOptions{SizeLimit: limit}, objs, limit)
		if err != nil {
			t.Fatal(err)
		}
		want := visible
		if limit > 0 && limit < len(want) {
			want = want[:limit]
		}
		var got []int
		for i := range sel.Len() {
			if sel.Has(i) {
				got = append(got, i)
			}
		}
		if sel.Len() != len(objs) || !slices.Equal(got, want) {
			t.Fatalf("limit %d: selected %v of %d, want %v", limit, got, sel.Len(), want)
		}
	}
}
