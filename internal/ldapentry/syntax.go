package ldapentry

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dirgate/dirgate"
)

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

// GUIDToBytes is the inverse of GUIDFromBytes for a GUID string, in the forms
// dirgate.ParseIdentifier accepts.
func GUIDToBytes(g string) ([]byte, error) {
	id, err := dirgate.ParseIdentifier(g)
	if err != nil || id.Kind() != dirgate.KindGUID {
		return nil, fmt.Errorf("invalid GUID %q", g)
	}
	h := strings.ReplaceAll(id.Canonical(), "-", "")
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

// SIDToBytes is the inverse of SIDFromBytes for a SID string that
// dirgate.ParseIdentifier accepts as one.
func SIDToBytes(sid string) ([]byte, error) {
	id, err := dirgate.ParseIdentifier(sid)
	if err != nil || id.Kind() != dirgate.KindSID {
		return nil, fmt.Errorf("invalid SID %q", sid)
	}
	parts := strings.Split(id.Canonical()[2:], "-")
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
				return t.Format(dirgate.TimestampLayout)
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
