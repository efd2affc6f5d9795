package domains

import (
	"context"
	"errors"
	"testing"

	"github.com/dirgate/dirgate"
)

// fakeChecker accepts every password, answering its domain's name as the subject,
// and knows its NetBIOS name unless it fails.
type fakeChecker struct {
	netbios string
	fail    error
	checked []string
}

func (c *fakeChecker) CheckPassword(ctx context.Context, name dirgate.SignInName, password string) (dirgate.Identifier, error) {
	c.checked = append(c.checked, name.String())
	return dirgate.ParseIdentifier("CN=" + name.User + ",DC=" + c.netbios)
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
	corp, fab := &fakeChecker{netbios: "CORP"}, &fakeChecker{netbios: "FABRIKAM"}
	r, err := Config{Domains: []Domain{
		{BaseDN: corpBase, SID: corpSID, Dir: f.corp, Checker: corp},
		{BaseDN: fabBase, SID: fabSID, Dir: f.fab, Checker: fab},
	}}.Open()
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
