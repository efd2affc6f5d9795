package explain

import (
	"context"
	"testing"

	"github.com/dirgate/dirgate"
)

// TestDraftsOneAtATime: while a draft holds the slot, another is refused with
// tooManyRequests before any work.
func TestDraftsOneAtATime(t *testing.T) {
	d := New(nil, nil, true, nil)
	d.draftSlot <- struct{}{}
	_, err := d.Decisions(context.Background(), dirgate.Principal{}, dirgate.DecisionsQuery{Draft: "package x"})
	if dirgate.ErrorCode(err) != dirgate.ETOOMANY {
		t.Fatalf("second draft: %v, want %s", err, dirgate.ETOOMANY)
	}
}

// TestStandInDomain: a subject named by DN stands for itself with the domain name
// its DN gives (as a resolved principal's), so that a role scoped to a domain
// decides at step 2 as it does once the subject is resolved; one named by GUID or
// SID has none.
func TestStandInDomain(t *testing.T) {
	for id, want := range map[string]string{
		"CN=Fiona Berg,OU=Staff,DC=fabrikam,DC=example,DC=net": "fabrikam.example.net",
		"cn=x,dc=CORP,dc=Example,dc=com":                       "CORP.Example.com",
		"CN=Builtin":                                           "",
		"0b6f39b4-9d4c-4d4f-b1a4-1bb2d5c7e6a0":                 "",
		"S-1-5-21-1-2-3-1104":                                  "",
	} {
		if got := standIn(dirgate.MustParseIdentifier(id)).DomainName; got != want {
			t.Errorf("stand-in for %s: domain name %q, want %q", id, got, want)
		}
	}
}
