package hostile

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/dirgate/dirgate/test/harness/child"
	"github.com/dirgate/dirgate/test/harness/fixture"
)

// hostileCase is one attacker's request and the answers the documentation allows.
type hostileCase struct {
	name   string
	method string                 // GET when empty
	query  func(e *target) string // the raw (encoded) query string
	// want are the acceptable statuses. Every one but 200 must come in the error shape.
	want []int
	// param is the parameter modelState must name when the answer is a 400 of the
	// query's validation; "" means a 400 must carry no modelState. Checked only for
	// noLDAP cases: a 400 from the directory itself (invalid DN syntax) has none.
	param string
	// noLDAP cases must be refused before the directory is asked: not one byte may
	// reach it (DC target).
	noLDAP bool
	// ok checks a 200 answer; a case without it must not be answered 200.
	ok func(t *testing.T, e *target, r child.Result)
}

func enc(s string) string { return url.QueryEscape(s) }

// listQuery is group=<g> plus extra, for a GET.
func listQuery(g, extra string) func(*target) string {
	return func(*target) string { return "group=" + enc(g) + extra }
}

// Statuses the cases expect.
var (
	bad       = []int{400}
	badOrGone = []int{400, 404}
	gone      = []int{404}
)

// getCases attack the GET parameters. group: DN and filter injection, AD's extended
// DN forms, names outside the base DN; properties: LDAP attribute options and
// special selectors; every parameter: oversize, repetition, bad encodings.
func getCases() []hostileCase {
	hd := fixture.HelpDeskDN
	return []hostileCase{
		// Filter metacharacters alone are no identifier.
		{name: "group star", query: listQuery("*", ""), want: bad, param: "group", noLDAP: true},
		{name: "group parens", query: listQuery(")(", ""), want: bad, param: "group", noLDAP: true},
		{name: "group escaped NUL text", query: listQuery(`\00`, ""), want: bad, param: "group", noLDAP: true},
		{name: "group NUL byte", query: func(*target) string { return "group=%00" }, want: bad, param: "group", noLDAP: true},
		{name: "group or-filter", query: listQuery("(|(objectClass=*))", ""), want: bad, param: "group", noLDAP: true},
		{name: "group filter break-out", query: listQuery("*)(member=*", ""), want: bad, param: "group", noLDAP: true},
		{name: "group GUID with filter tail", query: func(e *target) string { return "group=" + enc(e.helpDeskGUID+")(objectClass=*") },
			want: bad, param: "group", noLDAP: true},
		{name: "group SID wildcard", query: listQuery("S-1-5-21-*", ""), want: bad, param: "group", noLDAP: true},
		// Valid DNs whose values hold filter metacharacters: they reach the directory
		// as a base DN or escaped filter value and must match nothing.
		{name: "group DN wildcard", query: listQuery("CN=*,"+fixture.GroupsOU, ""), want: gone},
		{name: "group DN prefix wildcard", query: listQuery("CN=Help*,"+fixture.GroupsOU, ""), want: gone},
		// Samba refuses parentheses in a base DN as invalid syntax: 400 from the directory.
		{name: "group DN with filter in value", query: listQuery("CN=Help Desk)(objectClass=*,"+fixture.GroupsOU, ""), want: badOrGone},
		{name: "group DN multi-valued wildcard RDN", query: listQuery("CN=Help Desk+CN=*,"+fixture.GroupsOU, ""), want: badOrGone},
		{name: "group DN escaped star", query: listQuery(`CN=Help Desk\2a,`+fixture.GroupsOU, ""), want: gone},
		// The fixture's user named "Star*(Wild) Card": a wildcard must not find it, and
		// naming it exactly finds a user, not a group.
		{name: "group DN wildcard near a real name", query: listQuery("CN=Star*,"+fixture.SalesOU, ""), want: gone},
		{name: "group names a user with metacharacters", query: listQuery(fixture.FilterNameDN, ""), want: bad},
		// An escaped NUL or other control character inside a DN value is a control
		// character (docs/api.md: refused). Samba 4.17 cuts a value at an escaped NUL:
		// were it accepted, "CN=Help Desk\00evil,…" would list Help Desk on the DC and
		// a removal through such an alias would remove the member.
		{name: "group DN with escaped NUL", query: listQuery(`CN=Help Desk\00,`+fixture.GroupsOU, ""), want: bad, param: "group", noLDAP: true},
		{name: "group DN with escaped NUL and a tail", query: listQuery(`CN=Help Desk\00evil,`+fixture.GroupsOU, ""), want: bad, param: "group", noLDAP: true},
		{name: "group DN with escaped newline", query: listQuery(`CN=Help Desk\0a,`+fixture.GroupsOU, ""), want: bad, param: "group", noLDAP: true},
		// Spellings the directory's matching rules equate with Help Desk (spaces, the
		// BER form of RFC 4514, RFC 2253's ";" separator): if answered, with Help Desk's
		// own listing, never another object's.
		{name: "group DN with escaped trailing space", query: listQuery(`CN=Help Desk\20,`+fixture.GroupsOU, ""), want: []int{200, 404}, ok: sameListingAs(hd, "")},
		{name: "group DN with double space", query: listQuery(`CN=Help  Desk,`+fixture.GroupsOU, ""), want: []int{200, 404}, ok: sameListingAs(hd, "")},
		{name: "group DN in BER form", query: listQuery(`CN=#040948656c70204465736b,`+fixture.GroupsOU, ""), want: []int{200, 400, 404}, ok: sameListingAs(hd, "")},
		// Outside the base DN, or in another naming context below it: never asked.
		{name: "group DN with evil suffix", query: listQuery(hd+",DC=evil", ""), want: gone, noLDAP: true},
		{name: "group DN in an evil domain", query: listQuery("CN=Help Desk,OU=Groups,DC=evil", ""), want: gone, noLDAP: true},
		{name: "group in the configuration NC", query: listQuery("CN=Authenticated Users,CN=WellKnown Security Principals,CN=Configuration,"+fixture.BaseDN, ""),
			want: gone, noLDAP: true},
		{name: "group in the schema NC", query: listQuery("CN=Schema,CN=Configuration,"+fixture.BaseDN, ""), want: gone, noLDAP: true},
		// AD's extended DN forms would let a client choose how the server resolves a
		// name; dirgate refuses them (docs/api.md).
		{name: "group <GUID=…>", query: func(e *target) string { return "group=" + enc("<GUID="+e.helpDeskGUID+">") },
			want: bad, param: "group", noLDAP: true},
		{name: "group <SID=…>", query: func(e *target) string { return "group=" + enc("<SID="+e.helpDeskSID+">") },
			want: bad, param: "group", noLDAP: true},
		{name: "group extended DN with a DN", query: func(e *target) string { return "group=" + enc("<GUID="+e.helpDeskGUID+">;"+hd) },
			want: bad, param: "group", noLDAP: true},
		{name: "group <WKGUID=…>", query: listQuery("<WKGUID=a9d1ca15768811d1aded00c04fd8d5cd,"+fixture.BaseDN+">", ""),
			want: bad, param: "group", noLDAP: true},
		// CRLF and other controls, encoded: header or log forging.
		{name: "group CRLF", query: listQuery(hd+"\r\nX-Injected: 1", ""), want: bad, param: "group", noLDAP: true},
		{name: "group trailing backslash", query: listQuery(hd+`\`, ""), want: bad, param: "group", noLDAP: true},
		{name: "group with legacy separators", query: listQuery(strings.ReplaceAll(hd, ",", ";"), ""), want: []int{200, 400, 404},
			ok: sameListingAs(hd, "")},
		// properties: options, selectors and filter text never reach a search.
		{name: "properties star", query: listQuery(hd, "&properties=*"), want: bad, param: "properties", noLDAP: true},
		{name: "properties plus", query: listQuery(hd, "&properties=%2B"), want: bad, param: "properties", noLDAP: true},
		{name: "properties range option", query: listQuery(hd, "&properties="+enc("member;range=0-*")), want: bad, param: "properties", noLDAP: true},
		{name: "properties binary option", query: listQuery(hd, "&properties="+enc("member;binary")), want: bad, param: "properties", noLDAP: true},
		{name: "properties filter text", query: listQuery(hd, "&properties="+enc("mail)(objectClass=*")), want: bad, param: "properties", noLDAP: true},
		{name: "properties empty name", query: listQuery(hd, "&properties=mail,,cn"), want: bad, param: "properties", noLDAP: true},
		// "1.1" is LDAP's "no attributes": it must not strip the attributes dirgate
		// itself needs. Either refused or the same objects as a plain listing.
		{name: "properties 1.1", query: listQuery(hd, "&properties=1.1"), want: []int{200, 400}, ok: sameListingAs(hd, "")},
		// Secrets: the service account must not hand out password material.
		{name: "properties password attributes", query: listQuery(hd, "&properties=unicodePwd,userPassword,supplementalCredentials,ntPwdHistory,lmPwdHistory,dBCSPwd,unixUserPassword,msDS-ManagedPassword"),
			want: []int{200}, ok: noPropertyValues},
		// Secret and confidential attributes no role names are left out altogether
		// (docs/policy.md), whatever the caller: not even their names answer.
		{name: "properties secret attributes withheld", query: listQuery(hd, "&properties="+strings.Join(withheldSecrets, ",")),
			want: []int{200}, ok: noPropertyKeys(withheldSecrets)},
		// A name given as an OID is left out unless a role names that OID, whatever
		// attribute it stands for: secrets and DN-valued attributes cannot be had
		// under another spelling than the one the lists know.
		{name: "properties by OID withheld", query: listQuery(hd, "&properties="+strings.Join(withheldOIDs, ",")),
			want: []int{200}, ok: noPropertyKeys(withheldOIDs)},
		// Oversized and many.
		{name: "properties 101 names", query: listQuery(hd, "&properties="+manyNames(101)), want: bad, param: "properties", noLDAP: true},
		{name: "properties name of 129 bytes", query: listQuery(hd, "&properties=a"+strings.Repeat("b", 128)), want: bad, param: "properties", noLDAP: true},
		{name: "properties over 4096 bytes", query: listQuery(hd, "&properties="+strings.Repeat("mail,", 820)+"mail"), want: bad, param: "properties", noLDAP: true},
		{name: "group over 2048 bytes", query: listQuery("CN="+strings.Repeat("x", 2046), ""), want: bad, param: "group", noLDAP: true},
		{name: "query over 32 KiB", query: listQuery(hd, "&pad="+strings.Repeat("x", 32<<10)), want: bad, noLDAP: true},
		// sizeLimit and includeIndirect: only their documented forms.
		{name: "sizeLimit negative", query: listQuery(hd, "&sizeLimit=-1"), want: bad, param: "sizeLimit", noLDAP: true},
		{name: "sizeLimit exponent", query: listQuery(hd, "&sizeLimit=1e3"), want: bad, param: "sizeLimit", noLDAP: true},
		{name: "sizeLimit hex", query: listQuery(hd, "&sizeLimit=0x10"), want: bad, param: "sizeLimit", noLDAP: true},
		{name: "sizeLimit plus sign", query: listQuery(hd, "&sizeLimit=%2B5"), want: bad, param: "sizeLimit", noLDAP: true},
		{name: "sizeLimit eleven digits", query: listQuery(hd, "&sizeLimit=99999999999"), want: bad, param: "sizeLimit", noLDAP: true},
		{name: "sizeLimit over the maximum", query: listQuery(hd, "&sizeLimit=1000001"), want: bad, param: "sizeLimit", noLDAP: true},
		{name: "includeIndirect yes", query: listQuery(hd, "&includeIndirect=yes"), want: bad, param: "includeIndirect", noLDAP: true},
		{name: "includeIndirect Unicode long s", query: listQuery(hd, "&includeIndirect="+enc("fal\u017fe")), want: bad, param: "includeIndirect", noLDAP: true},
		// Repetition, under any letter case: which value was meant is unknowable.
		{name: "group twice", query: func(*target) string { return "group=" + enc(hd) + "&group=" + enc(hd) }, want: bad, param: "group", noLDAP: true},
		{name: "group in two letter cases", query: func(*target) string { return "group=" + enc(hd) + "&GROUP=" + enc("*") }, want: bad, param: "group", noLDAP: true},
		{name: "properties twice", query: listQuery(hd, "&properties=mail&Properties=cn"), want: bad, param: "properties", noLDAP: true},
		{name: "sizeLimit twice", query: listQuery(hd, "&sizeLimit=1&sizelimit=2"), want: bad, param: "sizeLimit", noLDAP: true},
		// Invalid UTF-8 and broken escapes.
		{name: "group raw %FF", query: func(*target) string { return "group=%FF" }, want: bad, param: "group", noLDAP: true},
		{name: "group DN with %FF", query: func(*target) string { return "group=CN%3D%FF%2C" + enc(fixture.GroupsOU) }, want: bad, param: "group", noLDAP: true},
		{name: "group overlong UTF-8 slash", query: func(*target) string { return "group=CN%3D%C0%AF%2C" + enc(fixture.GroupsOU) }, want: bad, param: "group", noLDAP: true},
		{name: "group UTF-16 surrogate", query: func(*target) string { return "group=CN%3D%ED%A0%80%2C" + enc(fixture.GroupsOU) }, want: bad, param: "group", noLDAP: true},
		{name: "properties %FF", query: listQuery(hd, "&properties=%FF"), want: bad, param: "properties", noLDAP: true},
		{name: "sizeLimit %FF", query: listQuery(hd, "&sizeLimit=%FF"), want: bad, param: "sizeLimit", noLDAP: true},
		{name: "malformed escape", query: listQuery(hd, "&x=%zz"), want: bad, noLDAP: true},
		{name: "truncated escape", query: listQuery(hd, "&x=%4"), want: bad, noLDAP: true},
		// An unknown parameter is ignored whatever its bytes (docs/api.md).
		{name: "unknown parameter %FF", query: listQuery(hd, "&x=%FF"), want: []int{200}, ok: sameListingAs(hd, "")},
	}
}

// deleteCases attack DELETE: every one must change nothing.
func deleteCases() []hostileCase {
	rm := func(group, member func(e *target) string) func(*target) string {
		return func(e *target) string { return "group=" + enc(group(e)) + "&member=" + enc(member(e)) }
	}
	grp := func(e *target) string { return e.group }
	lit := func(s string) func(*target) string { return func(*target) string { return s } }
	return []hostileCase{
		{name: "delete member star", method: "DELETE", query: rm(grp, lit("*")), want: bad, param: "member", noLDAP: true},
		{name: "delete member filter break-out", method: "DELETE", query: rm(grp, lit(")(member=*")), want: bad, param: "member", noLDAP: true},
		{name: "delete member parens", method: "DELETE", query: rm(grp, lit(")(")), want: bad, param: "member", noLDAP: true},
		{name: "delete member escaped NUL text", method: "DELETE", query: rm(grp, lit(`\00`)), want: bad, param: "member", noLDAP: true},
		{name: "delete member or-filter", method: "DELETE", query: rm(grp, lit("(|(objectClass=*))")), want: bad, param: "member", noLDAP: true},
		{name: "delete member star break-out", method: "DELETE", query: rm(grp, lit("*)(member=*")), want: bad, param: "member", noLDAP: true},
		{name: "delete member over 2048 bytes", method: "DELETE", query: rm(grp, lit("CN="+strings.Repeat("x", 2046))), want: bad, param: "member", noLDAP: true},
		{name: "delete member DN wildcard", method: "DELETE", query: rm(grp, lit("CN=*,"+fixture.ITOU)), want: gone},
		{name: "delete member DN with filter in value", method: "DELETE", query: rm(grp, lit("CN=Rita Regular)(cn=*,"+fixture.ITOU)), want: badOrGone},
		// The escaped-NUL alias must not remove anyone either.
		{name: "delete member DN with escaped NUL", method: "DELETE", query: rm(grp, func(e *target) string { return nulAlias(e.member) }),
			want: bad, param: "member", noLDAP: true},
		{name: "delete group DN with escaped NUL", method: "DELETE", query: rm(func(e *target) string { return nulAlias(e.group) }, func(e *target) string { return e.member }),
			want: bad, param: "group", noLDAP: true},
		{name: "delete member <GUID=…>", method: "DELETE", query: rm(grp, func(e *target) string { return "<GUID=" + e.memberGUID + ">" }),
			want: bad, param: "member", noLDAP: true},
		{name: "delete member <SID=…>", method: "DELETE", query: rm(grp, func(e *target) string { return "<SID=" + e.helpDeskSID + ">" }),
			want: bad, param: "member", noLDAP: true},
		{name: "delete member with evil suffix", method: "DELETE", query: rm(grp, func(e *target) string { return e.member + ",DC=evil" }), want: gone},
		{name: "delete group star", method: "DELETE", query: rm(lit("*"), func(e *target) string { return e.member }), want: bad, param: "group", noLDAP: true},
		{name: "delete group with evil suffix", method: "DELETE", query: rm(func(e *target) string { return e.group + ",DC=evil" }, func(e *target) string { return e.member }),
			want: gone, noLDAP: true},
		{name: "delete member twice", method: "DELETE", query: func(e *target) string {
			return "group=" + enc(e.group) + "&member=" + enc(e.member) + "&Member=" + enc("*")
		}, want: bad, param: "member", noLDAP: true},
		{name: "delete member %FF", method: "DELETE", query: func(e *target) string { return "group=" + enc(e.group) + "&member=%FF" },
			want: bad, param: "member", noLDAP: true},
		{name: "delete member missing", method: "DELETE", query: func(e *target) string { return "group=" + enc(e.group) }, want: bad, param: "member", noLDAP: true},
	}
}

// nulAlias inserts an escaped NUL and a tail at the end of dn's first RDN value.
func nulAlias(dn string) string {
	i := strings.Index(dn, ",")
	return dn[:i] + `\00x` + dn[i:]
}

func manyNames(n int) string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("attr%d", i)
	}
	return strings.Join(names, ",")
}

// sameListingAs accepts a 200 only if it lists exactly what group lists with extra.
func sameListingAs(group, extra string) func(*testing.T, *target, child.Result) {
	return func(t *testing.T, e *target, r child.Result) {
		t.Helper()
		want := listedKeysExtra(t, e, group, extra)
		if got := dnKeys(t, r.Body); !sameKeys(got, want) {
			t.Errorf("listed %d objects %v, want %s's %d", len(got), got, group, len(want))
		}
	}
}

func listedKeysExtra(t *testing.T, e *target, group, extra string) []string {
	t.Helper()
	r := e.get(t, child.ListURL(e.p.Base, group, extra))
	if r.Status != 200 {
		t.Fatalf("reference listing of %s: %s", group, r)
	}
	return dnKeys(t, r.Body)
}

// noPropertyValues accepts a listing only if no object carries a value for any
// requested property (password material must never come back).
func noPropertyValues(t *testing.T, _ *target, r child.Result) {
	t.Helper()
	if strings.Contains(string(r.Body), `"properties":{}`) && !strings.Contains(string(r.Body), `"properties":{"`) {
		return
	}
	for _, p := range []string{"unicodepwd", "userpassword", "supplementalcredentials", "ntpwdhistory", "lmpwdhistory", "dbcspwd", "unixuserpassword", "msds-managedpassword"} {
		if strings.Contains(string(r.Body), `"`+p+`":["`) {
			t.Errorf("a listing disclosed %s: %.300s", p, r.Body)
		}
	}
}

// withheldSecrets are secret attributes (built-in or confidential in the schema)
// that no demo role names.
var withheldSecrets = []string{"unicodePwd", "msDS-KeyCredentialLink", "msFVE-RecoveryPassword", "msFVE-KeyPackage",
	"msTPM-OwnerInformation", "msDS-ManagedPassword", "supplementalCredentials", "unixUserPassword", "msKds-RootKeyData", "userPKCS12"}

// withheldOIDs are the attributeIDs of secret and DN-valued attributes (the
// Samba 4.17 schema's): userPKCS12, unicodePwd, msFVE-RecoveryPassword, memberOf
// and manager.
var withheldOIDs = []string{"2.16.840.1.113730.3.1.216", "1.2.840.113556.1.4.90", "1.2.840.113556.1.4.1964",
	"1.2.840.113556.1.2.102", "0.9.2342.19200300.100.1.10"}

// noPropertyKeys checks that no object of a listing has any of names among its
// properties.
func noPropertyKeys(names []string) func(t *testing.T, _ *target, r child.Result) {
	return func(t *testing.T, _ *target, r child.Result) {
		t.Helper()
		var objs []struct {
			DN         string              `json:"dn"`
			Properties map[string][]string `json:"properties"`
		}
		if err := json.Unmarshal(r.Body, &objs); err != nil || len(objs) == 0 {
			t.Fatalf("listing: %v %.300s", err, r.Body)
		}
		for _, o := range objs {
			for _, n := range names {
				if v, ok := o.Properties[strings.ToLower(n)]; ok {
					t.Errorf("%s: %s answered (%v)", o.DN, n, v)
				}
			}
		}
	}
}

// TestHostileRequests sends every case to the demo and to the DC and checks the
// answer: an allowed status, the documented error shape, the right modelState, no
// byte to the directory for what must be refused before it, and for DELETE that the
// group's members are unchanged afterwards.
func TestHostileRequests(t *testing.T) {
	targets(t, func(t *testing.T, e *target) {
		before := e.members()
		for _, tc := range append(getCases(), deleteCases()...) {
			t.Run(tc.name, func(t *testing.T) { runCase(t, e, tc) })
		}
		if after := e.members(); !sameKeys(after, before) {
			t.Errorf("hostile removals changed the group: %v, before %v", after, before)
		}
	})
}

func runCase(t *testing.T, e *target, tc hostileCase) {
	t.Helper()
	method := tc.method
	if method == "" {
		method = "GET"
	}
	sent := e.sentUp()
	r := tokenDo(e, method, e.p.Base+"?"+tc.query(e))
	judge(t, e, r, sent, tc.want, tc.param, tc.noLDAP, tc.ok)
}

// sentUp is how many bytes have gone to the DC so far (0 for the demo).
func (e *target) sentUp() int64 {
	if e.px == nil {
		return 0
	}
	return e.px.Stats().Up
}

// judge checks a hostile request's answer: one of the statuses want, no byte to
// the directory since sent when noLDAP, a 200 only if ok accepts it, anything else in
// the error shape, and a 400 refused before the directory naming param.
func judge(t *testing.T, e *target, r child.Result, sent int64, want []int, param string, noLDAP bool, ok func(*testing.T, *target, child.Result)) {
	t.Helper()
	if r.Err != nil {
		t.Fatalf("no answer: %v", r.Err)
	}
	if !slices.Contains(want, r.Status) {
		t.Fatalf("status %d, want one of %v: %.300s", r.Status, want, r.Body)
	}
	if e.px != nil && noLDAP {
		if n := e.sentUp() - sent; n != 0 {
			t.Errorf("%d bytes reached the directory for a request that must be refused before it", n)
		}
	}
	if r.Status == 200 {
		if ok == nil {
			t.Fatalf("answered 200: %.300s", r.Body)
		}
		ok(t, e, r)
		return
	}
	body, err := child.CheckError(r)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status == 400 && noLDAP {
		var got string
		for p := range body.ModelState {
			got = p
		}
		if got != param {
			t.Errorf("modelState names %q, want %q: %s", got, param, r.Body)
		}
	}
}

func tokenDo(e *target, method, u string) child.Result {
	return client.Do(context.Background(), method, u, e.token)
}
