package ldapentry

import (
	"strings"
	"unicode/utf8"

	"github.com/dirgate/dirgate"
)

// DNs as a directory writes them are nearly always plain: one type=value per RDN,
// nothing escaped. Reading such a DN's text directly, instead of parsing it
// (dirgate.ParseDN allocates some fifty times per DN), is what a listing of many
// members saves on each (docs/benchmarks.md); the fuzz tests of plaindn_test.go hold
// each shortcut to the parser's answers.

// ContainsPlain reports whether the DN s is base or lies below it, as
// dirgate.ParseDN(s) followed by EqualFold or IsDescendantOf would, without parsing
// s. ok is false, and the parser must decide, unless s is a plain ASCII DN: each
// RDN one type=value, nothing the parser unescapes, decodes or trims. Then s's key
// (DN.Key) is s lower-cased, and a ',' in it always ends an RDN. A directory names
// almost every entry so (upstream/ldap checks the scope of every entry it reads
// with this).
func ContainsPlain(base dirgate.DN, s string) (contains, ok bool) {
	k := base.Key()
	if k == "" || !plainASCIIDN(s) {
		return false, false
	}
	if len(s) < len(k) || !asciiLowerEqual(s[len(s)-len(k):], k) {
		return false, true
	}
	return len(s) == len(k) || s[len(s)-len(k)-1] == ',', true
}

// plainASCIIDN reports whether every RDN of s is type=value with a valid type and
// a plainValue, all in ASCII.
func plainASCIIDN(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	for rdn := range strings.SplitSeq(s, ",") {
		if _, _, plain := plainRDN(rdn); !plain {
			return false
		}
	}
	return true
}

// plainRDN splits one RDN into its type and value when it is type=value with a
// valid type (which holds no space) and a plainValue.
func plainRDN(rdn string) (typ, val string, ok bool) {
	eq := strings.IndexByte(rdn, '=')
	if eq <= 0 || eq == len(rdn)-1 || !dirgate.IsAttributeName(rdn[:eq]) || !plainValue(rdn[eq+1:]) {
		return "", "", false
	}
	return rdn[:eq], rdn[eq+1:], true
}

// asciiLowerEqual reports whether s lower-cased (ASCII) is lower.
func asciiLowerEqual(s, lower string) bool {
	if len(s) != len(lower) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// dnNames returns what Entry.ToObject takes from a DN: the leaf RDN's value
// (DN.RDNValue) and the domain name (DN.DomainName), and ParseDN's error for a DN it
// rejects. A DN that plainDNNames can read exactly is not parsed: a listing reads one
// DN per member.
func dnNames(s string) (display, domain string, err error) {
	if display, domain, ok := plainDNNames(s); ok {
		return display, domain, nil
	}
	d, err := dirgate.ParseDN(s)
	if err != nil {
		return "", "", err
	}
	return d.RDNValue(), d.DomainName(), nil
}

// plainDNNames reads RDNValue and DomainName from a DN written without anything
// that dirgate.ParseDN would decode or might reject: RDNs of one type=value each,
// types that are names (dirgate.IsAttributeName), values of valid UTF-8 without
// escapes, quotes, '+', ';', '<', '>', '#', control characters, a second '=' or
// spaces at either end, no empty value. Such a DN parses to exactly its text, so the leaf's value is a
// substring of it. ok is false for anything else, which the caller parses in full
// (FuzzPlainDNNames holds the two to the same answers).
func plainDNNames(s string) (display, domain string, ok bool) {
	if s == "" || !utf8.ValidString(s) {
		return "", "", false
	}
	// One pass over the RDNs, leaf first; dcStart is where the trailing run of DC
	// RDNs begins (len(s)+1 while the last RDN seen is not one), and dcCount its
	// length, for the one allocation of the domain name.
	dcStart, dcCount := len(s)+1, 0
	for start := 0; start <= len(s); {
		end := strings.IndexByte(s[start:], ',')
		if end < 0 {
			end = len(s)
		} else {
			end += start
		}
		typ, val, plain := plainRDN(s[start:end])
		if !plain {
			return "", "", false
		}
		if start == 0 {
			display = val
		}
		if len(typ) == 2 && (typ[0]|0x20) == 'd' && (typ[1]|0x20) == 'c' {
			if dcStart > len(s) {
				dcStart, dcCount = start, 0
			}
			dcCount++
		} else {
			dcStart = len(s) + 1
		}
		start = end + 1
	}
	if dcStart > len(s) {
		return display, "", true
	}
	b := make([]byte, 0, len(s)-dcStart-3*dcCount) // each "DC=" goes, each ',' becomes '.'
	for rdn := range strings.SplitSeq(s[dcStart:], ",") {
		if len(b) > 0 {
			b = append(b, '.')
		}
		b = append(b, rdn[3:]...)
	}
	return display, string(b), true
}

// plainValue reports whether an attribute value's text is its value: nothing that
// the DN parser unescapes, decodes, trims or rejects.
func plainValue(v string) bool {
	if v[0] == ' ' || v[0] == '#' || v[len(v)-1] == ' ' {
		return false
	}
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c < 0x20, c == 0x7f, c == '\\', c == '"', c == '+', c == ';', c == '<', c == '>', c == '=':
			return false
		}
	}
	return true
}
