package domains

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/dirgate/dirgate"
)

// fakeChecker accepts every password, answering subject (an identifier) as the
// account signed in, and knows its NetBIOS name unless it fails.
type fakeChecker struct {
	netbios string
	subject string
	fail    error
	checked []string
}

func (c *fakeChecker) CheckPassword(ctx context.Context, name dirgate.SignInName, password string) (dirgate.Identifier, error) {
	c.checked = append(c.checked, name.String())
	return dirgate.ParseIdentifier(c.subject)
}

func (c *fakeChecker) NetBIOSName(ctx context.Context) (string, error) {
	if c.fail != nil {
		return "", c.fail
	}
	return c.netbios, nil
}

// TestCheckPasswordRoutes: a name is checked by the domain it names, any other by
// the home domain, which refuses it alone.
func TestCheckPasswordRoutes(t *testing.T) {
	f := newForest()
	corp := &fakeChecker{netbios: "CORP", subject: f.cUser.GUID}
	fab := &fakeChecker{netbios: "FABRIKAM", subject: f.fUser.GUID}
	r, err := Config{Domains: []Domain{
		{BaseDN: corpBase, SID: corpSID, Dir: f.corp, Checker: corp},
		{BaseDN: fabBase, SID: fabSID, Dir: f.fab, Checker: fab},
	}}.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		want *fakeChecker
	}{
		{"user@fabrikam.example.net", fab},
		{"User@FABRIKAM.example.NET", fab},
		{"user@corp.example.com", corp},
		// An alternative UPN suffix names no domain: the home domain's, as alone.
		{"user@alt.example.org", corp},
		{`FABRIKAM\user`, fab},
		{`fabrikam\user`, fab},
		{`CORP\user`, corp},
		{`OTHER\user`, corp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			corp.checked, fab.checked = nil, nil
			name, err := dirgate.ParseSignInName(tt.name)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.CheckPassword(context.Background(), name, "pw"); err != nil {
				t.Fatal(err)
			}
			other := corp
			if tt.want == corp {
				other = fab
			}
			if len(tt.want.checked) != 1 || len(other.checked) != 0 {
				t.Errorf("checked by CORP %q, FABRIKAM %q", corp.checked, fab.checked)
			}
		})
	}
	// FABRIKAM cannot say its NetBIOS name: a name that may be its is its failure,
	// never a refusal by CORP; CORP's own names still sign in.
	down := errors.New("fabrikam down")
	fab.fail = down
	for _, n := range []string{`OTHER\user`, `FABRIKAM\user`} {
		name, _ := dirgate.ParseSignInName(n)
		corp.checked = nil
		if _, err := r.CheckPassword(context.Background(), name, "pw"); !errors.Is(err, down) || corp.checked != nil {
			t.Errorf("%s with FABRIKAM down: %v, CORP checked %q", n, err, corp.checked)
		}
	}
	name, _ := dirgate.ParseSignInName(`CORP\user`)
	if _, err := r.CheckPassword(context.Background(), name, "pw"); err != nil {
		t.Errorf(`CORP\user with FABRIKAM down: %v`, err)
	}
}

// TestCheckPasswordOtherDomainNamesOnlyItsOwn: a domain other than home whose
// checker names an account that is not its own (a home GUID, a home DN, its own
// GUID for an object outside its base DN) signs no one in: the session would look
// the subject up through the router and find the home domain's account.
func TestCheckPasswordOtherDomainNamesOnlyItsOwn(t *testing.T) {
	f := newForest()
	// FABRIKAM answers CORP's User's GUID for its own twin: the router resolves
	// the GUID to CORP's account.
	twin := f.cUser
	twin.DN, twin.SID = "CN=Twin,"+ou+fabBase, fabSID+"-1400"
	f.fab.add(twin)
	// An object FABRIKAM answers but that lies under CORP's base DN.
	outside := object(dirgate.TypeUser, "CN=Outside,"+ou+corpBase, fabSID+"-1401")
	f.fab.add(outside)
	tests := []struct {
		name, subject string
		wantCode      string
	}{
		{"its own account", f.fUser.GUID, ""},
		{"a home GUID it holds a twin for", f.cUser.GUID, dirgate.EUPSTREAM},
		{"a home GUID it does not hold", f.cUser2.GUID, dirgate.EUPSTREAM},
		{"a home DN", f.cUser.DN, dirgate.EUPSTREAM},
		{"an object outside its base DN", outside.GUID, dirgate.EUPSTREAM},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs strings.Builder
			r, err := Config{Domains: []Domain{
				{BaseDN: corpBase, SID: corpSID, Dir: f.corp, Checker: &fakeChecker{netbios: "CORP", subject: f.cUser2.GUID}},
				{BaseDN: fabBase, SID: fabSID, Dir: f.fab, Checker: &fakeChecker{netbios: "FABRIKAM", subject: tt.subject}},
			}, Logger: slog.New(slog.NewTextHandler(&logs, nil))}.Open(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			name, _ := dirgate.ParseSignInName("user@fabrikam.example.net")
			id, err := r.CheckPassword(context.Background(), name, "pw")
			if code := dirgate.ErrorCode(err); code != tt.wantCode {
				t.Fatalf("subject %v, error %v (code %q), want code %q", id, err, code, tt.wantCode)
			}
			if tt.wantCode != "" && (!id.IsZero() || !strings.Contains(logs.String(), "sign-in refused")) {
				t.Errorf("refused with subject %v, log %q", id, logs.String())
			}
		})
	}
}

// TestCheckPasswordNetBIOSNameInOrder: while the home domain cannot say its NetBIOS
// name, DOMAIN\user stops there with its failure, even when a later domain claims
// that name: the password never goes to a domain that might not own the name.
func TestCheckPasswordNetBIOSNameInOrder(t *testing.T) {
	f := newForest()
	down := errors.New("corp down")
	corp := &fakeChecker{netbios: "CORP", subject: f.cUser.GUID, fail: down}
	fab := &fakeChecker{netbios: "CORP", subject: f.fUser.GUID}
	r, err := Config{Domains: []Domain{
		{BaseDN: corpBase, SID: corpSID, Dir: f.corp, Checker: corp},
		{BaseDN: fabBase, SID: fabSID, Dir: f.fab, Checker: fab},
	}}.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	name, _ := dirgate.ParseSignInName(`CORP\admin`)
	if _, err := r.CheckPassword(context.Background(), name, "pw"); !errors.Is(err, down) || fab.checked != nil {
		t.Fatalf(`CORP\admin with CORP's name unread: %v, FABRIKAM checked %q`, err, fab.checked)
	}
}

// TestOpenRefusesSameNetBIOSName: two domains that say one NetBIOS name (in any
// letter case) are refused at start.
func TestOpenRefusesSameNetBIOSName(t *testing.T) {
	f := newForest()
	_, err := Config{Domains: []Domain{
		{BaseDN: corpBase, SID: corpSID, Dir: f.corp, Checker: &fakeChecker{netbios: "CORP"}},
		{BaseDN: fabBase, SID: fabSID, Dir: f.fab, Checker: &fakeChecker{netbios: "corp"}},
	}}.Open(context.Background())
	if err == nil || !strings.Contains(err.Error(), "same NetBIOS name") {
		t.Fatalf("error %v, want the same NetBIOS name refused", err)
	}
}
