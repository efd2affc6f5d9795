// Package ldapentry holds a directory entry as LDAP carries it (Entry) and its
// rendering as the object a client receives (Entry.ToObject), with the syntaxes of
// Active Directory's attribute values: objectGUID and objectSid in binary, FILETIME
// and GeneralizedTime, and the text a client reads in "properties". Both upstreams
// (upstream/ldap, upstream/memory) turn their records into Entries, so an object
// renders identically whichever served it; the change feed keeps GUIDs in their
// binary form (changefeed/redis.go).
package ldapentry

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dirgate/dirgate"
)

// Entry is a directory entry as LDAP carries it: the server's DN and binary-safe
// attribute values keyed by lower-case attribute name. Every upstream turns its native
// records into Entries and calls ToObject, so an object renders identically whichever
// upstream served it.
type Entry struct {
	DN    string
	Attrs map[string][][]byte
}

// NewEntry returns an empty entry for dn.
func NewEntry(dn string) *Entry { return &Entry{DN: dn, Attrs: map[string][][]byte{}} }

// Add appends values to the attribute name (case-insensitive).
func (e *Entry) Add(name string, vals ...[]byte) {
	k := strings.ToLower(name)
	e.Attrs[k] = append(e.Attrs[k], vals...)
}

// Values returns the raw values of name (case-insensitive).
func (e *Entry) Values(name string) [][]byte { return e.Attrs[strings.ToLower(name)] }

// First returns the first value of name as a string, or "".
func (e *Entry) First(name string) string {
	if v := e.Values(name); len(v) > 0 {
		return string(v[0])
	}
	return ""
}

// Int returns the first value of name as an integer.
func (e *Entry) Int(name string) (int64, bool) { return e.int(strings.ToLower(name)) }

// typeTable is ordered from the most specific class: a computer is also a user, an
// inetOrgPerson is a user, a user is also a person. The first class an entry carries
// decides its type.
var typeTable = []struct {
	class, typ string
	code       int
}{
	{"computer", dirgate.TypeComputer, 4},
	{"user", dirgate.TypeUser, 2},
	{"inetorgperson", dirgate.TypeUser, 2},
	{"group", dirgate.TypeGroup, 3},
	{"contact", dirgate.TypeContact, 5},
	{"foreignsecurityprincipal", dirgate.TypeForeignPrincipal, 6},
	{"organizationalunit", dirgate.TypeOrganizationalUnit, 0},
	{"container", dirgate.TypeContainer, 1},
	{"domaindns", dirgate.TypeDomain, 7},
}

// ObjectTypeCodeOther is the code of an object whose classes are none of the above;
// its objectType is then its most specific (last listed) objectClass.
const ObjectTypeCodeOther = -1

// ObjectType returns the type and type code for an entry's objectClass values.
func ObjectType(classes [][]byte) (string, int) {
	for _, t := range typeTable {
		for _, c := range classes {
			if strings.EqualFold(string(c), t.class) {
				return t.typ, t.code
			}
		}
	}
	if len(classes) > 0 {
		return string(classes[len(classes)-1]), ObjectTypeCodeOther
	}
	return "", ObjectTypeCodeOther
}

// userAccountControl and msDS-User-Account-Control-Computed bits (docs/directory.md,
// "userAccountControl and its computed twin").
const (
	ufAccountDisable  = 0x2
	ufLockout         = 0x10
	ufPasswordExpired = 0x800000
)

// ToObject renders an entry as a client's directory object (docs/compatibility.md,
// "Directory objects"), with the requested extra properties (names as the client gave
// them; keys are lower-cased). now decides whether a password has expired.
//
// It runs once per member of every listing filled from the memory upstream, so it
// reads attributes by their lower-case keys (Values lower-cases, allocating, for
// mixed-case names) and takes the display and domain names without a full DN parse
// when the DN is plain (dnNames).
func (e *Entry) ToObject(props []string, now time.Time) (dirgate.Object, error) {
	display, domain, err := dnNames(e.DN)
	if err != nil {
		return dirgate.Object{}, fmt.Errorf("entry %q: %w", e.DN, err)
	}
	raw := e.Attrs["objectguid"]
	if len(raw) == 0 || len(raw[0]) != 16 {
		return dirgate.Object{}, fmt.Errorf("entry %q: missing or malformed objectGUID", e.DN)
	}
	o := dirgate.Object{
		GUID:          GUIDFromBytes(raw[0]),
		DN:            e.DN,
		DisplayName:   display,
		DomainName:    domain,
		DirectoryType: dirgate.DirectoryTypeActiveDirectory,
	}
	if sid := e.Attrs["objectsid"]; len(sid) > 0 {
		if o.SID, err = SIDFromBytes(sid[0]); err != nil {
			return dirgate.Object{}, fmt.Errorf("entry %q: objectSid: %w", e.DN, err)
		}
	}
	o.ObjectType, o.ObjectTypeCode = ObjectType(e.Attrs["objectclass"])
	if v, ok := e.int("primarygroupid"); ok {
		o.PrimaryGroupID = int(v)
	}
	if o.ObjectType == dirgate.TypeUser || o.ObjectType == dirgate.TypeComputer {
		o.AccountStatus, o.PasswordStatus = e.status(now)
	}
	if len(props) > 0 {
		o.Properties = make(map[string][]string, len(props))
		for _, p := range props {
			o.Properties[strings.ToLower(p)] = FormatValues(p, e.Values(p))
		}
	}
	return o, nil
}

// statuses holds what status allocates for one object, allocated together: a
// listing of users would otherwise make five small objects per member.
type statuses struct {
	account  dirgate.AccountStatus
	password dirgate.PasswordStatus
	times    [3]dirgate.Timestamp
}

// status derives account and password status from the computed attributes, as
// docs/directory.md, "userAccountControl and its computed twin" explains: locked only
// from the computed bit (lockoutTime outlives an automatic unlock), account expiry
// from accountExpires.
func (e *Entry) status(now time.Time) (*dirgate.AccountStatus, *dirgate.PasswordStatus) {
	st := &statuses{}
	uac, _ := e.int("useraccountcontrol")
	computed, _ := e.int("msds-user-account-control-computed")
	as := &st.account
	*as = dirgate.AccountStatus{IsDisabled: uac&ufAccountDisable != 0, IsLocked: computed&ufLockout != 0}
	if v, ok := e.int("accountexpires"); ok {
		if t, ok := FileTime(v); ok {
			st.times[0].Time = t // FileTime's times are UTC, as NewTimestamp makes them
			as.ExpirationDate = &st.times[0]
		}
	}
	ps := &st.password
	ps.ExpirationStatus = dirgate.PasswordNotExpired
	pwdLastSet, havePwd := e.int("pwdlastset")
	if t, ok := FileTime(pwdLastSet); havePwd && ok {
		st.times[1].Time = t
		ps.WhenChanged = &st.times[1]
	}
	expiry, haveExpiry := e.int("msds-userpasswordexpirytimecomputed")
	if t, ok := FileTime(expiry); haveExpiry && ok {
		st.times[2].Time = t
		ps.ExpirationDate = &st.times[2]
		if !t.After(now) {
			ps.ExpirationStatus = dirgate.PasswordExpired
		}
	}
	// The computed bit covers "must change at next logon" (pwdLastSet 0), but never on
	// trust accounts, where the expiry is "never" whatever pwdLastSet says.
	if computed&ufPasswordExpired != 0 || (haveExpiry && expiry == 0) {
		ps.ExpirationStatus = dirgate.PasswordExpired
	}
	return as, ps
}

// int is Int for a lower-case name.
func (e *Entry) int(lower string) (int64, bool) {
	v := e.Attrs[lower]
	if len(v) == 0 {
		return 0, false
	}
	return parseInt(v[0])
}

// parseInt is strconv.ParseInt(string(b), 10, 64) without converting b, for the
// common value: at most 18 digits, optionally after a minus sign (which cannot
// overflow). Anything else takes strconv's path.
func parseInt(b []byte) (int64, bool) {
	digits := b
	if len(b) > 0 && b[0] == '-' {
		digits = b[1:]
	}
	if len(digits) == 0 || len(digits) > 18 {
		v, err := strconv.ParseInt(string(b), 10, 64)
		return v, err == nil
	}
	var v int64
	for _, c := range digits {
		if c < '0' || c > '9' {
			v, err := strconv.ParseInt(string(b), 10, 64) // "+5", or not a number
			return v, err == nil
		}
		v = v*10 + int64(c-'0')
	}
	if len(digits) < len(b) {
		v = -v
	}
	return v, true
}
