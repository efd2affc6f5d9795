package dirgate

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
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

// Object types and their codes. The product fixes organizationalUnit 0, user 2, group 3
// and computer 4; the others are dirgate's choice (docs/compatibility.md, "objectType
// and objectTypeCode").
const (
	TypeOrganizationalUnit = "organizationalUnit"
	TypeContainer          = "container"
	TypeUser               = "user"
	TypeGroup              = "group"
	TypeComputer           = "computer"
	TypeContact            = "contact"
	TypeForeignPrincipal   = "foreignSecurityPrincipal"
	TypeDomain             = "domainDNS"
)

// typeTable is ordered from the most specific class: a computer is also a user, an
// inetOrgPerson is a user, a user is also a person. The first class an entry carries
// decides its type.
var typeTable = []struct {
	class, typ string
	code       int
}{
	{"computer", TypeComputer, 4},
	{"user", TypeUser, 2},
	{"inetorgperson", TypeUser, 2},
	{"group", TypeGroup, 3},
	{"contact", TypeContact, 5},
	{"foreignsecurityprincipal", TypeForeignPrincipal, 6},
	{"organizationalunit", TypeOrganizationalUnit, 0},
	{"container", TypeContainer, 1},
	{"domaindns", TypeDomain, 7},
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
func (e *Entry) ToObject(props []string, now time.Time) (Object, error) {
	display, domain, err := dnNames(e.DN)
	if err != nil {
		return Object{}, fmt.Errorf("entry %q: %w", e.DN, err)
	}
	raw := e.Attrs["objectguid"]
	if len(raw) == 0 || len(raw[0]) != 16 {
		return Object{}, fmt.Errorf("entry %q: missing or malformed objectGUID", e.DN)
	}
	o := Object{
		GUID:          GUIDFromBytes(raw[0]),
		DN:            e.DN,
		DisplayName:   display,
		DomainName:    domain,
		DirectoryType: DirectoryTypeActiveDirectory,
	}
	if sid := e.Attrs["objectsid"]; len(sid) > 0 {
		if o.SID, err = SIDFromBytes(sid[0]); err != nil {
			return Object{}, fmt.Errorf("entry %q: objectSid: %w", e.DN, err)
		}
	}
	o.ObjectType, o.ObjectTypeCode = ObjectType(e.Attrs["objectclass"])
	if v, ok := e.int("primarygroupid"); ok {
		o.PrimaryGroupID = int(v)
	}
	if o.ObjectType == TypeUser || o.ObjectType == TypeComputer {
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
	account  AccountStatus
	password PasswordStatus
	times    [3]Timestamp
}

// status derives account and password status from the computed attributes, as
// docs/directory.md, "userAccountControl and its computed twin" explains: locked only
// from the computed bit (lockoutTime outlives an automatic unlock), account expiry
// from accountExpires.
func (e *Entry) status(now time.Time) (*AccountStatus, *PasswordStatus) {
	st := &statuses{}
	uac, _ := e.int("useraccountcontrol")
	computed, _ := e.int("msds-user-account-control-computed")
	as := &st.account
	*as = AccountStatus{IsDisabled: uac&ufAccountDisable != 0, IsLocked: computed&ufLockout != 0}
	if v, ok := e.int("accountexpires"); ok {
		if t, ok := FileTime(v); ok {
			st.times[0].Time = t // FileTime's times are UTC, as NewTimestamp makes them
			as.ExpirationDate = &st.times[0]
		}
	}
	ps := &st.password
	ps.ExpirationStatus = PasswordNotExpired
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
			ps.ExpirationStatus = PasswordExpired
		}
	}
	// The computed bit covers "must change at next logon" (pwdLastSet 0), but never on
	// trust accounts, where the expiry is "never" whatever pwdLastSet says.
	if computed&ufPasswordExpired != 0 || (haveExpiry && expiry == 0) {
		ps.ExpirationStatus = PasswordExpired
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

// FileTime converts a Windows FILETIME (100 ns ticks since 1601-01-01 UTC). 0 and
// math.MaxInt64 mean "never" and give ok == false, as do negative values.
func FileTime(v int64) (time.Time, bool) {
	if v <= 0 || v == math.MaxInt64 {
		return time.Time{}, false
	}
	const epochSeconds = 11644473600 // 1601-01-01 to 1970-01-01
	return time.Unix(v/1e7-epochSeconds, (v%1e7)*100).UTC(), true
}

// GUIDFromBytes renders objectGUID's 16 bytes; the first three fields are
// little-endian (docs/directory.md, "objectGUID and objectSid"). Lower-case hex, as
// fmt's %x wrote it before: one allocation, where fmt took several.
func GUIDFromBytes(b []byte) string {
	_ = b[15]
	var out [36]byte
	j := 0
	for i, k := range guidOrder {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			out[j] = '-'
			j++
		}
		out[j], out[j+1] = hexDigits[b[k]>>4], hexDigits[b[k]&0xf]
		j += 2
	}
	return string(out[:])
}

// guidOrder is the byte order of GUIDFromBytes' hex digits.
var guidOrder = [16]int{3, 2, 1, 0, 5, 4, 7, 6, 8, 9, 10, 11, 12, 13, 14, 15}

const hexDigits = "0123456789abcdef"

// GUIDToBytes is the inverse of GUIDFromBytes for a canonical GUID string.
func GUIDToBytes(g string) ([]byte, error) {
	c, ok := parseGUID(g)
	if !ok {
		return nil, fmt.Errorf("invalid GUID %q", g)
	}
	h := strings.ReplaceAll(c, "-", "")
	b := make([]byte, 16)
	for i := range b {
		v, _ := strconv.ParseUint(h[2*i:2*i+2], 16, 8)
		b[i] = byte(v)
	}
	b[0], b[1], b[2], b[3] = b[3], b[2], b[1], b[0]
	b[4], b[5] = b[5], b[4]
	b[6], b[7] = b[7], b[6]
	return b, nil
}

// SIDFromBytes renders a binary SID: revision, count, 48-bit big-endian authority,
// then count little-endian 32-bit sub-authorities.
func SIDFromBytes(b []byte) (string, error) {
	if len(b) < 8 || len(b) != 8+4*int(b[1]) {
		return "", fmt.Errorf("malformed SID of %d bytes", len(b))
	}
	var auth uint64
	for _, x := range b[2:8] {
		auth = auth<<8 | uint64(x)
	}
	// "S-", 3 digits of revision, 15 of authority, and up to 255 sub-authorities of
	// 10 digits each; the usual SID (5 sub-authorities) fits the stack buffer.
	var buf [80]byte
	s := append(buf[:0], 'S', '-')
	s = strconv.AppendUint(s, uint64(b[0]), 10)
	s = append(s, '-')
	s = strconv.AppendUint(s, auth, 10)
	for i := 0; i < int(b[1]); i++ {
		s = append(s, '-')
		s = strconv.AppendUint(s, uint64(binary.LittleEndian.Uint32(b[8+4*i:])), 10)
	}
	return string(s), nil
}

// SIDToBytes is the inverse of SIDFromBytes for a validated SID string.
func SIDToBytes(sid string) ([]byte, error) {
	// looksLikeSID first: parseSID slices off the "S-" prefix without checking it.
	if !looksLikeSID(sid) {
		return nil, fmt.Errorf("invalid SID %q", sid)
	}
	c, err := parseSID(sid)
	if err != nil {
		return nil, fmt.Errorf("invalid SID %q", sid)
	}
	parts := strings.Split(c[2:], "-")
	rev, _ := strconv.ParseUint(parts[0], 10, 8)
	auth, _ := strconv.ParseUint(parts[1], 10, 48)
	b := make([]byte, 8, 8+4*(len(parts)-2))
	b[0], b[1] = byte(rev), byte(len(parts)-2)
	for i := 0; i < 6; i++ {
		b[2+i] = byte(auth >> (8 * (5 - i)))
	}
	for _, p := range parts[2:] {
		v, _ := strconv.ParseUint(p, 10, 32)
		b = binary.LittleEndian.AppendUint32(b, uint32(v))
	}
	return b, nil
}

// RID returns the last sub-authority of a SID string, the relative identifier that
// primaryGroupID refers to.
func RID(sid string) (int, bool) {
	i := strings.LastIndexByte(sid, '-')
	if i < 0 {
		return 0, false
	}
	v, err := strconv.ParseUint(sid[i+1:], 10, 32)
	return int(v), err == nil
}

// Attribute syntaxes that are not plain text. Names are lower-case.
var (
	guidAttrs = set("objectguid", "msexchmailboxguid", "ms-ds-consistencyguid", "msds-consistencyguid")
	sidAttrs  = set("objectsid", "sidhistory", "tokengroups", "securityidentifier", "msds-principalsid")
	// Integer8 attributes holding FILETIMEs.
	fileTimeAttrs = set("accountexpires", "pwdlastset", "lastlogontimestamp", "lastlogon",
		"lastlogoff", "lockouttime", "badpasswordtime", "msds-userpasswordexpirytimecomputed",
		"msds-lastsuccessfulinteractivelogontime", "msds-lastfailedinteractivelogontime")
	// GeneralizedTime attributes.
	generalizedTimeAttrs = set("whenchanged", "whencreated", "dscorepropagationdata",
		"createtimestamp", "modifytimestamp", "mstsexpiredate")
)

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// FormatValues renders an attribute's values as the strings a client receives inside
// "properties": GUIDs and SIDs in string form, FILETIMEs and GeneralizedTimes as ISO
// 8601 UTC ("never" for a FILETIME of 0 or the maximum), text as it is, anything else
// base64. It never returns nil, so an attribute without values renders as [].
func FormatValues(name string, vals [][]byte) []string {
	n := strings.ToLower(name)
	out := make([]string, 0, len(vals))
	for _, v := range vals {
		out = append(out, formatValue(n, v))
	}
	return out
}

func formatValue(name string, v []byte) string {
	switch {
	case guidAttrs[name] && len(v) == 16:
		return GUIDFromBytes(v)
	case sidAttrs[name]:
		if s, err := SIDFromBytes(v); err == nil {
			return s
		}
	case fileTimeAttrs[name]:
		if n, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			if t, ok := FileTime(n); ok {
				return t.Format(TimestampLayout)
			}
			return "never"
		}
	case generalizedTimeAttrs[name]:
		if t, ok := parseGeneralizedTime(string(v)); ok {
			return t.Format(time.RFC3339Nano)
		}
	}
	if utf8.Valid(v) {
		return string(v)
	}
	return base64.StdEncoding.EncodeToString(v)
}

// parseGeneralizedTime reads the forms AD writes: YYYYMMDDHHMMSS[.f]Z.
func parseGeneralizedTime(s string) (time.Time, bool) {
	if len(s) < 15 || s[len(s)-1] != 'Z' {
		return time.Time{}, false
	}
	t, err := time.Parse("20060102150405", s[:14])
	if err != nil {
		return time.Time{}, false
	}
	if frac := s[14 : len(s)-1]; frac != "" {
		if frac[0] != '.' && frac[0] != ',' {
			return time.Time{}, false
		}
		// Digits only: ParseFloat would also take "5e3" (500 s) or "Inf".
		for _, c := range frac[1:] {
			if c < '0' || c > '9' {
				return time.Time{}, false
			}
		}
		f, err := strconv.ParseFloat("0."+frac[1:], 64)
		if err != nil {
			return time.Time{}, false
		}
		t = t.Add(time.Duration(f * float64(time.Second)))
	}
	return t.UTC(), true
}
