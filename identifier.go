package dirgate

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxIdentifierLength bounds a DN, GUID or SID given by a client, in bytes. AD limits
// an RDN value to 64 characters; 2,048 bytes leaves room for deep OU trees and
// hex-escaped non-ASCII names.
const MaxIdentifierLength = 2048

// IdentifierKind tells which of the three forms (docs/api.md, "Identifiers") an
// identifier was given in.
type IdentifierKind uint8

const (
	KindDN IdentifierKind = iota + 1
	KindGUID
	KindSID
)

func (k IdentifierKind) String() string {
	switch k {
	case KindDN:
		return "DN"
	case KindGUID:
		return "GUID"
	case KindSID:
		return "SID"
	}
	return "unknown"
}

// Identifier names a directory object by DN, GUID or SID. It keeps the text the caller
// gave (String) beside a validated canonical form (Canonical): a lower-case hyphenated
// GUID without braces, an upper-case "S-" SID, or the DN as given.
type Identifier struct {
	kind  IdentifierKind
	raw   string
	canon string
	dn    DN
}

// ParseIdentifier validates s as a DN, a GUID (optionally in braces) or a SID. The
// error is a coded EINVALID error whose message is safe to show to the client.
func ParseIdentifier(s string) (Identifier, error) {
	if s == "" {
		return Identifier{}, Errorf(EINVALID, "is empty")
	}
	if len(s) > MaxIdentifierLength {
		return Identifier{}, Errorf(EINVALID, "is longer than %d bytes", MaxIdentifierLength)
	}
	if !utf8.ValidString(s) {
		return Identifier{}, Errorf(EINVALID, "is not valid UTF-8")
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return Identifier{}, Errorf(EINVALID, "contains a control character")
		}
	}
	if g, ok := parseGUID(s); ok {
		return Identifier{kind: KindGUID, raw: s, canon: g}, nil
	}
	if looksLikeSID(s) {
		sid, err := parseSID(s)
		if err != nil {
			return Identifier{}, Errorf(EINVALID, "is not a valid SID: %s", err)
		}
		return Identifier{kind: KindSID, raw: s, canon: sid}, nil
	}
	if strings.Contains(s, "=") {
		dn, err := ParseDN(s)
		if err != nil {
			return Identifier{}, Errorf(EINVALID, "is not a valid distinguished name")
		}
		// Escapes such as \00 or \0a decode to control characters. Directories cut
		// or fold such values, so an escaped alias could name another object.
		if dn.hasControl() {
			return Identifier{}, Errorf(EINVALID, "contains a control character")
		}
		return Identifier{kind: KindDN, raw: s, canon: s, dn: dn}, nil
	}
	return Identifier{}, Errorf(EINVALID, "is not a DN, GUID or SID")
}

// MustParseIdentifier is ParseIdentifier for constants in tests and fixtures.
func MustParseIdentifier(s string) Identifier {
	id, err := ParseIdentifier(s)
	if err != nil {
		panic(err)
	}
	return id
}

// Kind returns the form the identifier was given in.
func (id Identifier) Kind() IdentifierKind { return id.kind }

// String returns the identifier exactly as the caller gave it.
func (id Identifier) String() string { return id.raw }

// Canonical returns the validated form: GUIDs lower-case without braces, SIDs with an
// upper-case "S", DNs as given.
func (id Identifier) Canonical() string { return id.canon }

// DN returns the parsed DN of a KindDN identifier (the zero DN otherwise).
func (id Identifier) DN() DN { return id.dn }

// IsZero reports whether id is the zero Identifier.
func (id Identifier) IsZero() bool { return id.kind == 0 }

// parseGUID accepts 8-4-4-4-12 hex digits, optionally in braces, in any letter case.
func parseGUID(s string) (string, bool) {
	if len(s) == 38 && s[0] == '{' && s[37] == '}' {
		s = s[1:37]
	}
	if len(s) != 36 {
		return "", false
	}
	for i := 0; i < 36; i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return "", false
			}
		default:
			if !isHex(c) {
				return "", false
			}
		}
	}
	return strings.ToLower(s), true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// looksLikeSID: "S-" followed only by digits and dashes. Anything else that starts
// with S- is left to the DN parser, which rejects it unless it really is a DN.
func looksLikeSID(s string) bool {
	if len(s) < 3 || (s[0] != 'S' && s[0] != 's') || s[1] != '-' {
		return false
	}
	for i := 2; i < len(s); i++ {
		if (s[i] < '0' || s[i] > '9') && s[i] != '-' {
			return false
		}
	}
	return true
}

// parseSID validates the string form S-R-A(-S)* as MS-DTYP 2.4.2.1 defines it:
// revision 1, a 48-bit authority and at most 15 32-bit sub-authorities.
func parseSID(s string) (string, error) {
	parts := strings.Split(s[2:], "-")
	if len(parts) < 2 {
		return "", fmt.Errorf("needs a revision and an authority")
	}
	if len(parts)-2 > 15 {
		return "", fmt.Errorf("has more than 15 sub-authorities")
	}
	for i, p := range parts {
		if p == "" || (len(p) > 1 && p[0] == '0') {
			return "", fmt.Errorf("has an empty or zero-padded number")
		}
		var bits int
		switch i {
		case 0:
			bits = 8
		case 1:
			bits = 48
		default:
			bits = 32
		}
		v, err := strconv.ParseUint(p, 10, bits)
		if err != nil {
			return "", fmt.Errorf("has a number out of range")
		}
		if i == 0 && v != 1 {
			return "", fmt.Errorf("has revision %d, not 1", v)
		}
	}
	return "S-" + s[2:], nil
}
