package ldapentry_test

import (
	"encoding/hex"
	"math"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/ldapentry"
)

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// Measured on Samba (docs/directory.md, "objectGUID and objectSid"): the first three
// GUID fields are little-endian, the SID's authority big-endian and its
// sub-authorities little-endian.
func TestGUIDAndSIDByteVectors(t *testing.T) {
	guidBytes := mustHex("08a0721e77e2fd4b812f2f72c3c885df")
	const guid = "1e72a008-e277-4bfd-812f-2f72c3c885df"
	if got := ldapentry.GUIDFromBytes(guidBytes); got != guid {
		t.Errorf("GUIDFromBytes = %s, want %s", got, guid)
	}
	for _, in := range []string{guid, "1E72A008-E277-4BFD-812F-2F72C3C885DF", "{1e72a008-e277-4bfd-812f-2f72c3c885df}"} {
		if got, err := ldapentry.GUIDToBytes(in); err != nil || !slices.Equal(got, guidBytes) {
			t.Errorf("GUIDToBytes(%s) = %x, %v", in, got, err)
		}
	}
	// The document elides the middle sub-authorities; these bytes spell them out.
	sidBytes := mustHex("010500000000000515000000c46d4a1e1a9a8d8361c2c9b350040000")
	const sid = "S-1-5-21-508194244-2207095322-3016344161-1104"
	if got, err := ldapentry.SIDFromBytes(sidBytes); err != nil || got != sid {
		t.Errorf("SIDFromBytes = %s, %v; want %s", got, err, sid)
	}
	if got, err := ldapentry.SIDToBytes(sid); err != nil || !slices.Equal(got, sidBytes) {
		t.Errorf("SIDToBytes = %x, %v", got, err)
	}
	if rid, ok := ldapentry.RID(sid); !ok || rid != 1104 {
		t.Errorf("RID = %d, %v", rid, ok)
	}
}

func TestSIDConversionsRejectMalformedInput(t *testing.T) {
	tests := []struct {
		name string
		sid  string
	}{
		// Too short to carry the "S-" prefix: this used to panic.
		{"empty", ""},
		{"S alone", "S"},
		{"no prefix", "x"},
		{"no authority", "S-1"},
		{"revision 2", "S-2-5-21"},
		{"sub-authority overflows 32 bits", "S-1-5-4294967296"},
		{"sixteen sub-authorities", "S-1-5-1-2-3-4-5-6-7-8-9-10-11-12-13-14-15-16"},
		{"zero-padded", "S-1-05-21"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if b, err := ldapentry.SIDToBytes(tt.sid); err == nil {
				t.Errorf("SIDToBytes(%q) = %x, want an error", tt.sid, b)
			}
		})
	}
	for _, b := range [][]byte{nil, mustHex("0105"), mustHex("010500000000000515000000")} {
		if s, err := ldapentry.SIDFromBytes(b); err == nil {
			t.Errorf("SIDFromBytes(%x) = %s, want an error (length does not match the count)", b, s)
		}
	}
	if _, err := ldapentry.GUIDToBytes("1e72a008-e277-4bfd-812f"); err == nil {
		t.Error("GUIDToBytes accepted a short GUID")
	}
}

func TestFileTime(t *testing.T) {
	tests := []struct {
		name string
		in   int64
		want string // TimestampLayout, or "" for never
	}{
		// The vectors of docs/directory.md, "FILETIME values": all seven fractional
		// digits are kept.
		{"lockoutTime of rx-acct4", 134397784109438560, "2026-11-21T23:46:50.9438560Z"},
		{"accountExpires of rx-acct6", 130000000000000000, "2012-12-14T23:06:40.0000000Z"},
		{"accountExpires of rx-acct2", 134400376120000000, "2026-11-24T23:46:52.0000000Z"},
		// 0 and the maximum both mean "never"; negative values are not dates.
		{"zero", 0, ""},
		{"maximum", math.MaxInt64, ""},
		{"negative", -1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ldapentry.FileTime(tt.in)
			if tt.want == "" {
				if ok {
					t.Errorf("FileTime(%d) = %v, want never", tt.in, got)
				}
				return
			}
			if !ok || got.Format(dirgate.TimestampLayout) != tt.want {
				t.Errorf("FileTime(%d) = %v %v, want %s", tt.in, got, ok, tt.want)
			}
		})
	}
}

// statusEntry builds a user-like entry from attribute pairs.
func statusEntry(classes []string, attrs ...string) *ldapentry.Entry {
	e := ldapentry.NewEntry("CN=x,DC=corp,DC=example,DC=com")
	e.Add("objectGUID", mustHex("08a0721e77e2fd4b812f2f72c3c885df"))
	for _, c := range classes {
		e.Add("objectClass", []byte(c))
	}
	for i := 0; i+1 < len(attrs); i += 2 {
		e.Add(attrs[i], []byte(attrs[i+1]))
	}
	return e
}

var (
	userClasses     = []string{"top", "person", "organizationalPerson", "user"}
	computerClasses = []string{"top", "person", "organizationalPerson", "user", "computer"}
	contactClasses  = []string{"top", "person", "organizationalPerson", "contact"}
)

// The rows of docs/directory.md, "Accounts as Samba showed them".
func TestAccountStatus(t *testing.T) {
	now := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	set := strconv.FormatInt(134397784109438560, 10)    // pwdLastSet 2026-11-21
	expiry := strconv.FormatInt(134434072109438560, 10) // +42 days
	never := strconv.FormatInt(math.MaxInt64, 10)
	type want struct {
		disabled, locked bool
		accountExpires   string // TimestampLayout or ""
		pwdStatus        int
		pwdExpires       string
		pwdChanged       bool
	}
	tests := []struct {
		name  string
		entry *ldapentry.Entry
		want  *want // nil: no account or password status
	}{
		{"rx-acct1 disabled", statusEntry(userClasses, "userAccountControl", "514", "msDS-User-Account-Control-Computed", "0",
			"accountExpires", never, "pwdLastSet", set, "msDS-UserPasswordExpiryTimeComputed", expiry),
			&want{disabled: true, pwdExpires: "2027-01-02T23:46:50.9438560Z", pwdChanged: true}},
		{"rx-acct2 expires in 3 days", statusEntry(userClasses, "userAccountControl", "512", "accountExpires", "134400376120000000",
			"pwdLastSet", set, "msDS-UserPasswordExpiryTimeComputed", expiry),
			&want{accountExpires: "2026-11-24T23:46:52.0000000Z", pwdExpires: "2027-01-02T23:46:50.9438560Z", pwdChanged: true}},
		{"rx-acct3 no expiry", statusEntry(userClasses, "userAccountControl", "66048", "accountExpires", "0",
			"pwdLastSet", set, "msDS-UserPasswordExpiryTimeComputed", never),
			&want{pwdChanged: true}},
		// Lockout lives in the computed attribute, not in userAccountControl.
		{"rx-acct4 locked", statusEntry(userClasses, "userAccountControl", "512", "msDS-User-Account-Control-Computed", "16",
			"lockoutTime", "134397784207128980", "pwdLastSet", set, "msDS-UserPasswordExpiryTimeComputed", expiry),
			&want{locked: true, pwdExpires: "2027-01-02T23:46:50.9438560Z", pwdChanged: true}},
		// pwdLastSet 0 is "must change at next logon", not "never set".
		{"rx-acct5 must change", statusEntry(userClasses, "userAccountControl", "512", "msDS-User-Account-Control-Computed", "8388608",
			"pwdLastSet", "0", "msDS-UserPasswordExpiryTimeComputed", "0"),
			&want{pwdStatus: dirgate.PasswordExpired}},
		// Account expiry has no computed bit: the date alone says it.
		{"rx-acct6 account expired", statusEntry(userClasses, "userAccountControl", "512", "accountExpires", "130000000000000000",
			"pwdLastSet", set, "msDS-UserPasswordExpiryTimeComputed", expiry),
			&want{accountExpires: "2012-12-14T23:06:40.0000000Z", pwdExpires: "2027-01-02T23:46:50.9438560Z", pwdChanged: true}},
		// lockoutTime outlives an automatic unlock: only the computed bit counts.
		{"rx-acct7 unlocked by itself", statusEntry(userClasses, "userAccountControl", "512", "msDS-User-Account-Control-Computed", "0",
			"lockoutTime", "134397789509308420", "pwdLastSet", set, "msDS-UserPasswordExpiryTimeComputed", expiry),
			&want{pwdExpires: "2027-01-02T23:46:50.9438560Z", pwdChanged: true}},
		// A password whose expiry has passed is expired even without the computed bit.
		{"password past its expiry", statusEntry(userClasses, "userAccountControl", "512",
			"pwdLastSet", "130000000000000000", "msDS-UserPasswordExpiryTimeComputed", "130036288000000000"),
			&want{pwdStatus: dirgate.PasswordExpired, pwdExpires: "2013-01-25T23:06:40.0000000Z", pwdChanged: true}},
		// A trust account's password never expires, whatever pwdLastSet says.
		{"rx-comp1 computer", statusEntry(computerClasses, "userAccountControl", "4098", "pwdLastSet", "0",
			"msDS-UserPasswordExpiryTimeComputed", never, "accountExpires", never),
			&want{disabled: true}},
		// Samba reports a password-expired bit and expiry 0 on contacts: not accounts.
		{"rx-contact1 contact", statusEntry(contactClasses, "msDS-User-Account-Control-Computed", "8388608",
			"msDS-UserPasswordExpiryTimeComputed", "0"), nil},
	}
	ts := func(p *dirgate.Timestamp) string {
		if p == nil {
			return ""
		}
		return p.String()
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := tt.entry.ToObject(nil, now)
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == nil {
				if o.AccountStatus != nil || o.PasswordStatus != nil {
					t.Errorf("status %+v %+v on a non-account", o.AccountStatus, o.PasswordStatus)
				}
				return
			}
			a, p := o.AccountStatus, o.PasswordStatus
			got := want{a.IsDisabled, a.IsLocked, ts(a.ExpirationDate), p.ExpirationStatus, ts(p.ExpirationDate), p.WhenChanged != nil}
			if got != *tt.want {
				t.Errorf("got %+v, want %+v", got, *tt.want)
			}
		})
	}
}

func TestObjectType(t *testing.T) {
	tests := []struct {
		name     string
		classes  []string
		wantType string
		wantCode int
	}{
		// The product fixes 0, 2, 3 and 4 (docs/compatibility.md, "objectType and
		// objectTypeCode").
		{"user", userClasses, dirgate.TypeUser, 2},
		// A computer is also a user: the more specific class wins wherever it is listed.
		{"computer", computerClasses, dirgate.TypeComputer, 4},
		{"computer listed first", []string{"computer", "user"}, dirgate.TypeComputer, 4},
		{"inetOrgPerson", append(slices.Clone(userClasses), "inetOrgPerson"), dirgate.TypeUser, 2},
		{"group", []string{"top", "group"}, dirgate.TypeGroup, 3},
		{"group in upper case", []string{"TOP", "GROUP"}, dirgate.TypeGroup, 3},
		{"organizational unit", []string{"top", "organizationalUnit"}, dirgate.TypeOrganizationalUnit, 0},
		{"container", []string{"top", "container"}, dirgate.TypeContainer, 1},
		// A contact is a person but not a user.
		{"contact", contactClasses, dirgate.TypeContact, 5},
		{"foreign security principal", []string{"top", "foreignSecurityPrincipal"}, dirgate.TypeForeignPrincipal, 6},
		{"domain", []string{"top", "domain", "domainDNS"}, dirgate.TypeDomain, 7},
		// Anything else is named by its most specific class.
		{"other", []string{"top", "msDS-PasswordSettings"}, "msDS-PasswordSettings", ldapentry.ObjectTypeCodeOther},
		{"no class", nil, "", ldapentry.ObjectTypeCodeOther},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var raw [][]byte
			for _, c := range tt.classes {
				raw = append(raw, []byte(c))
			}
			if typ, code := ldapentry.ObjectType(raw); typ != tt.wantType || code != tt.wantCode {
				t.Errorf("ObjectType = %q %d, want %q %d", typ, code, tt.wantType, tt.wantCode)
			}
		})
	}
}

func TestFormatValues(t *testing.T) {
	guid := mustHex("08a0721e77e2fd4b812f2f72c3c885df")
	sid := mustHex("010500000000000515000000c46d4a1e1a9a8d8361c2c9b350040000")
	tests := []struct {
		name string
		attr string
		vals [][]byte
		want []string
	}{
		{"GUID", "objectGUID", [][]byte{guid}, []string{"1e72a008-e277-4bfd-812f-2f72c3c885df"}},
		// Names are case-insensitive.
		{"GUID lower-case name", "objectguid", [][]byte{guid}, []string{"1e72a008-e277-4bfd-812f-2f72c3c885df"}},
		// A GUID attribute of the wrong length is not a GUID: binary goes base64.
		{"short GUID", "objectGUID", [][]byte{{0xff, 0x01, 0x02}}, []string{"/wEC"}},
		{"SID", "objectSid", [][]byte{sid}, []string{"S-1-5-21-508194244-2207095322-3016344161-1104"}},
		{"SID history, two values", "sIDHistory", [][]byte{sid, sid}, []string{
			"S-1-5-21-508194244-2207095322-3016344161-1104", "S-1-5-21-508194244-2207095322-3016344161-1104"}},
		{"malformed SID", "objectSid", [][]byte{{0x01, 0x05, 0xff}}, []string{"AQX/"}},
		// docs/compatibility.md, "Values inside properties": "never" for an account
		// that does not expire, 0 or the maximum.
		{"accountExpires never (max)", "accountExpires", [][]byte{[]byte(strconv.FormatInt(math.MaxInt64, 10))}, []string{"never"}},
		{"accountExpires never (0)", "AccountExpires", [][]byte{[]byte("0")}, []string{"never"}},
		{"accountExpires date", "accountExpires", [][]byte{[]byte("130000000000000000")}, []string{"2012-12-14T23:06:40.0000000Z"}},
		{"FILETIME not a number", "pwdLastSet", [][]byte{[]byte("soon")}, []string{"soon"}},
		{"GeneralizedTime", "whenCreated", [][]byte{[]byte("20261121234652.0Z")}, []string{"2026-11-21T23:46:52Z"}},
		{"GeneralizedTime fraction", "whenChanged", [][]byte{[]byte("20240304090000.25Z")}, []string{"2024-03-04T09:00:00.25Z"}},
		// A fraction that is not digits is not a time: it stays as text.
		{"GeneralizedTime exponent", "whenChanged", [][]byte{[]byte("20240304090000.5e3Z")}, []string{"20240304090000.5e3Z"}},
		{"GeneralizedTime without zone", "whenChanged", [][]byte{[]byte("20240304090000")}, []string{"20240304090000"}},
		{"text", "description", [][]byte{[]byte("Zoë"), []byte("two")}, []string{"Zoë", "two"}},
		{"binary", "thumbnailPhoto", [][]byte{{0xff, 0xfe}}, []string{"//4="}},
		// No values renders as [], never null.
		{"absent", "mail", nil, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ldapentry.FormatValues(tt.attr, tt.vals)
			if got == nil || !slices.Equal(got, tt.want) {
				t.Errorf("FormatValues(%s) = %#v, want %#v", tt.attr, got, tt.want)
			}
		})
	}
}

// Properties are keyed in lower case whatever the request's spelling.
func TestToObjectProperties(t *testing.T) {
	e := statusEntry([]string{"top", "group"}, "description", "d")
	o, err := e.ToObject([]string{"Description", "mail"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.Properties["description"], []string{"d"}) || o.Properties["mail"] == nil || len(o.Properties) != 2 {
		t.Errorf("properties = %#v", o.Properties)
	}
	if o.DisplayName != "x" || o.DomainName != "corp.example.com" || o.GUID != "1e72a008-e277-4bfd-812f-2f72c3c885df" {
		t.Errorf("object = %+v", o)
	}
	if _, err := ldapentry.NewEntry("CN=y,DC=x").ToObject(nil, time.Now()); err == nil {
		t.Error("an entry without objectGUID rendered")
	}
}
