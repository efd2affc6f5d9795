package memory

import (
	"bytes"
	"encoding/base64"
)

// The loader's own reading of a plain content record. go-ldap/ldif allocates a
// reader, a copy of every line, and every value twice (as a string and as bytes) for
// each record, which made the load of a large export produce some thirty times the
// file's size in garbage. parseContent reads the records an AD export is made of
// exactly as go-ldap/ldif reads them and declines everything else (version lines,
// controls, change records, URL values, syntax errors, an attribute spelt two ways),
// which then goes to go-ldap/ldif as before: its answers and its error messages stay
// those of the library. FuzzParseContent checks the two readings against each other.

// span is a range of the parser's scratch buffer.
type span struct{ start, end int }

// parseContent reads a record (its physical lines, without line ends) into the
// builder, or reports false, having added nothing, when go-ldap/ldif must read it.
func (b *builder) parseContent(lines [][]byte) bool {
	if len(lines) == 0 || lines[0][0] == ' ' {
		return false // a record starting with a continuation: left to the library
	}
	logical := b.unfold(lines)
	if len(logical) < 2 {
		return false // no dn, or only a dn: the library's errors
	}
	first := b.line(logical[0])
	if !bytes.HasPrefix(first, []byte("dn:")) {
		return false
	}
	if second := b.line(logical[1]); bytes.HasPrefix(second, []byte("control:")) || bytes.HasPrefix(second, []byte("changetype:")) {
		return false
	}
	b.begin()
	for i, l := range logical {
		name, val, ok := b.parseLine(b.line(l))
		if !ok {
			return false
		}
		if i == 0 {
			b.setDN(val)
			continue
		}
		if !b.addExact(name, val) {
			return false
		}
	}
	return true
}

// unfold joins continuation lines as go-ldap/ldif does: a line starting with a space
// continues the one before, comment lines are dropped, and so are the continuations
// of a comment. The logical lines are spans of b.scratch.
func (b *builder) unfold(lines [][]byte) []span {
	b.scratch = b.scratch[:0]
	b.logical = b.logical[:0]
	isComment, open := false, false
	for _, l := range lines {
		switch l[0] {
		case '#':
			isComment = true
			continue
		case ' ':
			if !isComment && open {
				b.scratch = append(b.scratch, l[1:]...)
				b.logical[len(b.logical)-1].end = len(b.scratch)
			}
			continue
		}
		isComment, open = false, true
		start := len(b.scratch)
		b.scratch = append(b.scratch, l...)
		b.logical = append(b.logical, span{start, len(b.scratch)})
	}
	return b.logical
}

func (b *builder) line(s span) []byte { return b.scratch[s.start:s.end] }

// parseLine splits "name: value" or "name:: base64", declining what go-ldap/ldif
// refuses (no colon, nothing after it, an invalid name, bad base64) and URL values.
// The value is in b.value until the next call.
func (b *builder) parseLine(line []byte) (name, val []byte, ok bool) {
	off := bytes.IndexByte(line, ':')
	if off < 0 || off > len(line)-2 {
		return nil, nil, false
	}
	name = line[:off]
	if !validAttr(name) {
		return nil, nil, false
	}
	switch line[off+1] {
	case '<':
		return nil, nil, false
	case ':':
		enc := bytes.TrimLeft(line[off+2:], " ")
		b.value = append(b.value[:0], make([]byte, base64.StdEncoding.DecodedLen(len(enc)))...)
		n, err := base64.StdEncoding.Decode(b.value, enc)
		if err != nil {
			return nil, nil, false
		}
		return name, b.value[:n], true
	default:
		return name, bytes.TrimLeft(line[off+1:], " "), true
	}
}

// validAttr is go-ldap/ldif's rule for attribute names: a letter then letters,
// digits, '-' or ';', or an OID.
func validAttr(attr []byte) bool {
	if len(attr) == 0 {
		return false
	}
	switch c := attr[0]; {
	case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
	case c >= '0' && c <= '9':
		return validOID(attr)
	default:
		return false
	}
	for _, c := range attr[1:] {
		switch {
		case c >= '0' && c <= '9', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c == '-', c == ';':
		default:
			return false
		}
	}
	return true
}

// validOID: digits and dots, never two dots in a row.
func validOID(oid []byte) bool {
	lastDot := true
	for _, c := range oid {
		switch {
		case c == '.' && lastDot:
			return false
		case c == '.':
			lastDot = true
		case c >= '0' && c <= '9':
			lastDot = false
		default:
			return false
		}
	}
	return true
}
