// Package objectjson holds the byte-level JSON encoding of a directory object's
// values: strings, the properties map and timestamps, each byte for byte what
// encoding/json writes for them, HTML escaping included, without reflection.
// dirgate.Object.AppendJSON lays out an object's fields with them (object.go): a
// listing's first fill encodes every member, and encoding/json took a fifth of it,
// the reflection, the compaction of what MarshalJSON returned, and two copies per
// object. Decoded is a string as a client (and a policy) receives it once encoded.
package objectjson

import (
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// TimestampLayout is dirgate.TimestampLayout (the root package imports this one, so
// it cannot be named from here; TestTimestampLayout holds the two equal).
const TimestampLayout = "2006-01-02T15:04:05.0000000Z"

// AppendProperties encodes properties as encoding/json encodes a map: keys sorted, a
// nil value as null; a nil map as {} (dirgate.Object.MarshalJSON's rule).
func AppendProperties(dst []byte, props map[string][]string) []byte {
	dst = append(dst, '{')
	if len(props) > 0 {
		var buf [16]string
		keys := buf[:0]
		for k := range props {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendString(dst, k)
			dst = append(dst, ':')
			vs := props[k]
			if vs == nil {
				dst = append(dst, "null"...)
				continue
			}
			dst = append(dst, '[')
			for j, v := range vs {
				if j > 0 {
					dst = append(dst, ',')
				}
				dst = AppendString(dst, v)
			}
			dst = append(dst, ']')
		}
	}
	return append(dst, '}')
}

// AppendTimestamp appends t as a JSON string in TimestampLayout, as
// dirgate.Timestamp.MarshalJSON renders it.
func AppendTimestamp(dst []byte, t time.Time) []byte {
	dst = append(dst, '"')
	dst = appendTimestamp(dst, t.UTC())
	return append(dst, '"')
}

// appendTimestamp is t.AppendFormat(dst, TimestampLayout) for a UTC time, written
// digit by digit for the years of four digits (Format's general path was most of an
// object's encoding; TestAppendTimestamp here, FuzzObjectAppendJSON in the root's
// objectjson_test.go).
func appendTimestamp(dst []byte, t time.Time) []byte {
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.AppendFormat(dst, TimestampLayout)
	}
	hour, minute, sec := t.Clock()
	dst = appendDigits(dst, year, 4)
	dst = append(dst, '-')
	dst = appendDigits(dst, int(month), 2)
	dst = append(dst, '-')
	dst = appendDigits(dst, day, 2)
	dst = append(dst, 'T')
	dst = appendDigits(dst, hour, 2)
	dst = append(dst, ':')
	dst = appendDigits(dst, minute, 2)
	dst = append(dst, ':')
	dst = appendDigits(dst, sec, 2)
	dst = append(dst, '.')
	dst = appendDigits(dst, t.Nanosecond()/100, 7)
	return append(dst, 'Z')
}

// appendDigits appends the n last decimal digits of v ≥ 0, zero-padded.
func appendDigits(dst []byte, v, n int) []byte {
	var buf [8]byte
	for i := n - 1; i >= 0; i-- {
		buf[i] = byte('0' + v%10)
		v /= 10
	}
	return append(dst, buf[:n]...)
}

const hexDigits = "0123456789abcdef"

// Decoded is s as decoding its JSON encoding gives it back, as a client (and a
// policy) receives it: encoding/json replaces each byte that is not valid UTF-8 with
// U+FFFD.
func Decoded(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteString("\uFFFD")
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// AppendString is encoding/json's string encoding with HTML escaping, as
// json.Marshal applies it: '"' and '\\' escaped, \b \f \n \r \t short, other control
// characters and '<', '>', '&' as \u00XX, invalid UTF-8 as \ufffd, U+2028 and U+2029
// as \u2028 and \u2029.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if jsonSafe[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '\\', '"':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// jsonSafe holds the ASCII bytes that AppendString copies as they are:
// encoding/json's htmlSafeSet.
var jsonSafe = func() (t [utf8.RuneSelf]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		t[c] = true
	}
	for _, c := range `"\<>&` {
		t[c] = false
	}
	return t
}()
