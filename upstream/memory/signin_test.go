package memory

import (
	"context"
	"errors"
	"testing"

	"github.com/dirgate/dirgate"
)

func TestCheckPassword(t *testing.T) {
	d, err := Demo()
	if err != nil {
		t.Fatal(err)
	}
	d.SetPasswords(map[string]string{"Dana.Admin": "pw-1", "hugo.helpdesk": "pw-2"})
	ctx := context.Background()
	o, err := d.Lookup(ctx, dirgate.MustParseIdentifier("CN=Dana Admin,OU=IT,OU=Staff,DC=corp,DC=example,DC=com"), nil)
	if err != nil {
		t.Fatal(err)
	}
	dana := o.GUID
	for _, c := range []struct{ name, pw, guid, reason string }{
		{"dana.admin@corp.example.com", "pw-1", dana, ""},
		{"DANA.ADMIN@CORP.EXAMPLE.COM", "pw-1", dana, ""},
		{`corp\dana.admin`, "pw-1", dana, ""},
		{`other\dana.admin`, "pw-1", "", dirgate.ReasonInvalidCredentials},
		{"dana.admin@corp.example.com", "pw-2", "", dirgate.ReasonInvalidCredentials},
		{"dana.admin@corp.example.com", "", "", dirgate.ReasonInvalidCredentials},
		{"nobody@corp.example.com", "pw-1", "", dirgate.ReasonInvalidCredentials},
	} {
		id, err := d.CheckPassword(ctx, mustSignInName(t, c.name), c.pw)
		var se *dirgate.SignInError
		errors.As(err, &se)
		switch {
		case c.reason == "" && (err != nil || id.Canonical() != c.guid):
			t.Errorf("%s/%s: %v %v", c.name, c.pw, id, err)
		case c.reason != "" && (se == nil || se.Reason != c.reason):
			t.Errorf("%s/%s: %v, want %s", c.name, c.pw, err, c.reason)
		}
	}
}

func mustSignInName(t *testing.T, s string) dirgate.SignInName {
	t.Helper()
	n, err := dirgate.ParseSignInName(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
