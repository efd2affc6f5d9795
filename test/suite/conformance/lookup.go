package conformance

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/test/harness/fixture"
)

// asciiLower lower-cases ASCII letters only. Directories compare DNs without regard to
// case; folding non-ASCII letters is left out so the test does not depend on a
// server's Unicode tables.
func asciiLower(s string) string {
	return strings.Map(func(r rune) rune {
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}, s)
}

// Every identifier form names the same object: DNs however they are escaped, spaced
// or cased, GUIDs in any case and in braces, SIDs.
func (s *suite) testIdentifierForms(t *testing.T) {
	muller := s.lookup(t, fixture.CommaNameDN)
	helpdesk := s.lookup(t, fixture.HelpDeskDN)
	tests := []struct {
		name  string
		ident string
		want  string // fixture DN of the object
		guid  string // its GUID, when the form does not carry the DN
	}{
		// Escaped characters in RDN values, each as the directory stores it.
		{"escaped comma", fixture.CommaNameDN, fixture.CommaNameDN, muller.GUID},
		{"escaped quote", fixture.QuoteNameDN, fixture.QuoteNameDN, ""},
		{"escaped plus", fixture.PlusNameDN, fixture.PlusNameDN, ""},
		{"escaped backslash", fixture.BackslashNameDN, fixture.BackslashNameDN, ""},
		{"escaped leading #", fixture.HashNameDN, fixture.HashNameDN, ""},
		{"filter metacharacters", fixture.FilterNameDN, fixture.FilterNameDN, ""},
		{"non-ASCII letters", fixture.NonASCIINameDN, fixture.NonASCIINameDN, ""},
		// The same DN spelled differently must name the same entry.
		{"comma escaped as hex", `CN=Müller\2C Jürgen,` + fixture.FinanceOU, fixture.CommaNameDN, muller.GUID},
		{"non-ASCII escaped as hex UTF-8", `CN=M\C3\BCller\, J\C3\BCrgen,` + fixture.FinanceOU, fixture.CommaNameDN, muller.GUID},
		{"lower case", asciiLower(fixture.CommaNameDN), fixture.CommaNameDN, muller.GUID},
		{"upper case", strings.ToUpper(fixture.HelpDeskDN), fixture.HelpDeskDN, helpdesk.GUID},
		{"spaces after commas", "CN=Help Desk, OU=Groups, DC=corp, DC=example, DC=com", fixture.HelpDeskDN, helpdesk.GUID},
		// Clients send GUIDs as they find them.
		{"GUID", helpdesk.GUID, fixture.HelpDeskDN, helpdesk.GUID},
		{"GUID upper case", strings.ToUpper(helpdesk.GUID), fixture.HelpDeskDN, helpdesk.GUID},
		{"GUID in braces", "{" + strings.ToUpper(helpdesk.GUID) + "}", fixture.HelpDeskDN, helpdesk.GUID},
		{"group SID", helpdesk.SID, fixture.HelpDeskDN, helpdesk.GUID},
		{"user SID", muller.SID, fixture.CommaNameDN, muller.GUID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := s.lookup(t, tt.ident)
			w := s.org.MustObject(tt.want)
			if keyOf(t, got.DN) != w.Key() || (tt.guid != "" && got.GUID != tt.guid) {
				t.Fatalf("%s resolved to %s (%s), want %s (%s)", tt.ident, got.DN, got.GUID, tt.want, tt.guid)
			}
			checkObject(t, got, w)
		})
	}
}

// A group given by DN, GUID or SID lists the same members in the same order.
func (s *suite) testGroupByEveryForm(t *testing.T) {
	g := s.lookup(t, fixture.HelpDeskDN)
	opts := dirgate.ListOptions{IncludeIndirect: true}
	want := s.list(t, fixture.HelpDeskDN, opts)
	for _, ident := range []string{strings.ToUpper(fixture.HelpDeskDN), "{" + strings.ToUpper(g.GUID) + "}", g.SID} {
		got := s.list(t, ident, opts)
		if !slices.EqualFunc(got, want, func(a, b dirgate.Object) bool { return a.GUID == b.GUID }) {
			t.Errorf("listing by %s differs from listing by DN", ident)
		}
	}
}

// A principal carries every group its object belongs to, nested and primary groups
// included; a DC may add built-in groups the fixture does not describe.
func (s *suite) testPrincipal(t *testing.T) {
	// Each account state is resolved into the principal (docs/auth.md: it decides
	// whether the account's tokens work).
	for _, w := range s.org.MustObject(fixture.AccountStatesDN).Members {
		p, err := s.svc.Principal(t.Context(), dirgate.MustParseIdentifier(w.DN))
		if err != nil {
			t.Fatalf("principal %s: %v", w.DN, err)
		}
		a := p.AccountStatus
		if a == nil || a.IsDisabled != w.Account.Disabled || a.IsLocked != w.Account.Locked ||
			(a.ExpirationDate == nil) != w.Account.Expires.IsZero() || (a.ExpirationDate != nil && !a.ExpirationDate.Equal(w.Account.Expires)) {
			t.Errorf("principal %s: account status %+v, want disabled %v, locked %v, expires %v", w.DN, a, w.Account.Disabled, w.Account.Locked, w.Account.Expires)
		}
	}
	for _, dn := range []string{fixture.DemoAdminDN, fixture.DemoHelpdeskDN, fixture.PrimaryMemberDN} {
		obj := s.org.MustObject(dn)
		p, err := s.svc.Principal(t.Context(), dirgate.MustParseIdentifier(dn))
		if err != nil {
			t.Fatalf("principal %s: %v", dn, err)
		}
		looked := s.lookup(t, dn)
		if keyOf(t, p.DN) != obj.Key() || p.GUID != looked.GUID {
			t.Errorf("principal %s is %s (%s)", dn, p.DN, p.GUID)
		}
		// The account's state, which decides whether its tokens work (docs/auth.md).
		if p.AccountStatus == nil || !reflect.DeepEqual(p.AccountStatus, looked.AccountStatus) {
			t.Errorf("principal %s: account status %+v, the object's %+v", dn, p.AccountStatus, looked.AccountStatus)
		}
		have := map[string]bool{}
		for _, g := range p.Groups {
			k := keyOf(t, g.DN)
			if have[k] {
				t.Errorf("principal %s: group %s twice", dn, g.DN)
			}
			have[k] = true
			if !guidPattern.MatchString(g.GUID) || !strings.HasPrefix(g.SID, "S-1-5-") {
				t.Errorf("principal %s: group %+v lacks a GUID or SID", dn, g)
			}
		}
		for _, g := range s.org.Groups(obj) {
			if !have[g.Key()] {
				t.Errorf("principal %s lacks group %s", dn, g.DN)
			}
		}
	}
}

// Identifiers that name nothing are "not found", never a wildcard match or an upstream
// failure; filter metacharacters in a DN are plain characters.
func (s *suite) testBadInput(t *testing.T) {
	fsp := s.org.MustObject(fixture.AuthenticatedUsersDN)
	// A server may refuse a DN with metacharacters as invalid rather than look it up;
	// what it must never do is match something or fail.
	meta := []string{dirgate.ENOTFOUND, dirgate.EINVALID}
	tests := []struct {
		name  string
		ident string
		codes []string // acceptable error codes
	}{
		{"wildcard RDN", "CN=*," + fixture.GroupsOU, meta},
		{"hex-escaped wildcard", `CN=\2A,` + fixture.GroupsOU, meta},
		{"prefix wildcard", "CN=Help*," + fixture.GroupsOU, meta},
		{"filter injection", "CN=Help Desk)(objectClass=*," + fixture.GroupsOU, meta},
		{"backslash and parentheses", `CN=Help\5C\2A\28\29,` + fixture.GroupsOU, meta},
		{"unknown DN", "CN=Nobody," + fixture.GroupsOU, []string{dirgate.ENOTFOUND}},
		{"unknown parent", "CN=Help Desk,OU=Nowhere," + fixture.BaseDN, []string{dirgate.ENOTFOUND}},
		{"unknown GUID", "00000000-0000-4000-8000-000000000000", []string{dirgate.ENOTFOUND}},
		{"unknown GUID in braces", "{00000000-0000-4000-8000-000000000001}", []string{dirgate.ENOTFOUND}},
		{"unknown SID", "S-1-5-21-1-2-3-999999", []string{dirgate.ENOTFOUND}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := dirgate.MustParseIdentifier(tt.ident)
			_, err := s.dir.Lookup(t.Context(), id, nil)
			if code := dirgate.ErrorCode(err); !slices.Contains(tt.codes, code) {
				t.Errorf("Lookup(%s): %v (code %q), want %v", tt.ident, err, code, tt.codes)
			}
			_, err = s.svc.List(t.Context(), dirgate.Principal{}, id, dirgate.ListOptions{})
			if code := dirgate.ErrorCode(err); !slices.Contains(tt.codes, code) || dirgate.ErrorParam(err) != "group" {
				t.Errorf("List(%s): %v (code %q, param %q), want %v on group", tt.ident, err, code, dirgate.ErrorParam(err), tt.codes)
			}
		})
	}
	// S-1-5-11 is carried by the domain's foreign security principal and, on Samba, by
	// an object in the configuration partition: either it resolves to the FSP or it is
	// reported as ambiguous.
	t.Run("well-known SID", func(t *testing.T) {
		o, err := s.dir.Lookup(t.Context(), dirgate.MustParseIdentifier(fixture.AuthenticatedUsersSID), nil)
		switch code := dirgate.ErrorCode(err); code {
		case "":
			if keyOf(t, o.DN) != fsp.Key() || o.ObjectType != dirgate.TypeForeignPrincipal {
				t.Errorf("S-1-5-11 resolved to %s (%s), want %s", o.DN, o.ObjectType, fsp.DN)
			}
		case dirgate.EINVALID:
		default:
			t.Errorf("S-1-5-11: %v (code %q), want the FSP or %q", err, code, dirgate.EINVALID)
		}
	})
	// A member is listed only under a group.
	t.Run("not a group", func(t *testing.T) {
		_, err := s.svc.List(t.Context(), dirgate.Principal{}, dirgate.MustParseIdentifier(fixture.FilterNameDN), dirgate.ListOptions{})
		if dirgate.ErrorCode(err) != dirgate.EINVALID || dirgate.ErrorParam(err) != "group" {
			t.Errorf("listing a user: %v, want %q on group", err, dirgate.EINVALID)
		}
	})
}
