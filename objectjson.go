package dirgate

import (
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// AppendJSON appends o's JSON encoding to dst: byte for byte what encoding/json gave
// through MarshalJSON before (TestObjectAppendJSON, FuzzObjectAppendJSON), HTML
// escaping included, without reflection. A listing's first fill encodes every
// member, and encoding/json took a fifth of it: the reflection, the compaction of
// what MarshalJSON returned, and two copies per object.
func (o *Object) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"guid":`...)
	dst = appendJSONString(dst, o.GUID)
	dst = append(dst, `,"dn":`...)
	dst = appendJSONString(dst, o.DN)
	dst = append(dst, `,"displayName":`...)
	dst = appendJSONString(dst, o.DisplayName)
	dst = append(dst, `,"objectType":`...)
	dst = appendJSONString(dst, o.ObjectType)
	dst = append(dst, `,"objectTypeCode":`...)
	dst = strconv.AppendInt(dst, int64(o.ObjectTypeCode), 10)
	dst = append(dst, `,"domainName":`...)
	dst = appendJSONString(dst, o.DomainName)
	dst = append(dst, `,"directoryType":`...)
	dst = strconv.AppendInt(dst, int64(o.DirectoryType), 10)
	dst = append(dst, `,"properties":`...)
	dst = appendJSONProperties(dst, o.Properties)
	if a := o.AccountStatus; a != nil {
		dst = append(dst, `,"accountStatus":{"isDisabled":`...)
		dst = strconv.AppendBool(dst, a.IsDisabled)
		dst = append(dst, `,"isLocked":`...)
		dst = strconv.AppendBool(dst, a.IsLocked)
		dst = append(dst, `,"expirationDate":`...)
		dst = a.ExpirationDate.appendJSON(dst)
		dst = append(dst, '}')
	}
	if p := o.PasswordStatus; p != nil {
		dst = append(dst, `,"passwordStatus":{"whenChanged":`...)
		dst = p.WhenChanged.appendJSON(dst)
		dst = append(dst, `,"expirationStatus":`...)
		dst = strconv.AppendInt(dst, int64(p.ExpirationStatus), 10)
		dst = append(dst, `,"expirationDate":`...)
		dst = p.ExpirationDate.appendJSON(dst)
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

// appendJSONProperties encodes properties as encoding/json encodes a map: keys
// sorted, a nil value as null; a nil map as {} (MarshalJSON's rule).
func appendJSONProperties(dst []byte, props map[string][]string) []byte {
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
			dst = appendJSONString(dst, k)
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
				dst = appendJSONString(dst, v)
			}
			dst = append(dst, ']')
		}
	}
	return append(dst, '}')
}

// appendJSON appends t as Timestamp.MarshalJSON renders it, null for nil.
func (t *Timestamp) appendJSON(dst []byte) []byte {
	if t == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '"')
	dst = appendTimestamp(dst, t.UTC())
	return append(dst, '"')
}

// appendTimestamp is t.AppendFormat(dst, TimestampLayout) for a UTC time, written
// digit by digit for the years of four digits (Format's general path was most of an
// object's encoding; TestAppendTimestamp, FuzzObjectAppendJSON).
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

// appendJSONString is encoding/json's string encoding with HTML escaping, as
// json.Marshal applies it: '"' and '\\' escaped, \b \f \n \r \t short, other control
// characters and '<', '>', '&' as \u00XX, invalid UTF-8 as \ufffd, U+2028 and U+2029
// as \u2028 and \u2029.
func appendJSONString(dst []byte, s string) []byte {
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

// jsonSafe holds the ASCII bytes that appendJSONString copies as they are:
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
