package memory

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/go-ldap/ldif"
)

// eachParagraph cuts LDIF text into records the way go-ldap/ldif reads it: lines
// end in LF (CRs before it are dropped), and a line that is empty after that ends a
// record. fn gets each record's first line number and its lines, valid until fn
// returns. Parsing record by record lets load errors name the record's line; reading
// the text as it goes keeps no more than one record of it in memory (a file is not
// read whole: the load's peak is the directory, not the directory and the file).
func eachParagraph(r io.Reader, fn func(line int, lines [][]byte) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var (
		buf   []byte // the record's lines, back to back
		spans []span // the lines in buf
		lines [][]byte
		start int // the record's first line
	)
	for n := 1; ; n++ {
		from := len(buf)
		var err error
		for {
			var chunk []byte
			chunk, err = br.ReadSlice('\n')
			buf = append(buf, chunk...)
			if err != bufio.ErrBufferFull {
				break
			}
		}
		if err != nil && err != io.EOF {
			return err
		}
		l := bytes.TrimRight(buf[from:], "\r\n")
		buf = buf[:from+len(l)]
		if len(l) > 0 {
			if len(spans) == 0 {
				start = n
			}
			spans = append(spans, span{from, len(buf)})
		}
		if (len(l) == 0 || err == io.EOF) && len(spans) > 0 {
			lines = lines[:0]
			for _, s := range spans {
				lines = append(lines, buf[s.start:s.end])
			}
			if err := fn(start, lines); err != nil {
				return err
			}
			buf, spans = buf[:0], spans[:0]
		}
		if err == io.EOF {
			return nil
		}
	}
}

// joinLines is a record's text as go-ldap/ldif reads it.
func joinLines(lines [][]byte) string {
	return string(bytes.Join(lines, []byte("\n"))) + "\n"
}

// logicalLines unfolds a record: a line that starts with a space continues the one
// before it.
func logicalLines(text string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if strings.HasPrefix(l, " ") && len(out) > 0 {
			out[len(out)-1] += l[1:]
			continue
		}
		out = append(out, l)
	}
	return out
}

// checkRecord refuses what an AD export never contains but go-ldap/ldif would act on:
// "attr:< URL" values, which make the parser read local files. It also reports
// whether the record is only comments, a version line, or the "search:"/"result:"
// trailer that plain ldapsearch prints, none of which is an entry.
func checkRecord(text string) (skip bool, err error) {
	skip = true
	for _, l := range logicalLines(text) {
		if strings.HasPrefix(l, "#") {
			continue
		}
		if i := strings.IndexByte(l, ':'); i >= 0 && i+1 < len(l) && l[i+1] == '<' {
			return false, errors.New("URL values (\"attr:< url\") are not allowed")
		}
		name, _, _ := strings.Cut(l, ":")
		switch strings.ToLower(name) {
		case "version", "search", "result", "text", "matcheddn", "ref":
		default:
			skip = false
		}
	}
	return skip, nil
}

// parseLDIF turns an AD export into records. Every entry must be a plain content
// record (no changetype) with a DN that parses; rendering checks the rest.
func parseLDIF(name string, data io.Reader) ([]*record, error) {
	var out []*record
	b := newBuilder()
	var bad error // a record that does not load, as opposed to a file that does not read
	err := eachParagraph(data, func(line int, lines [][]byte) error {
		bad = parseRecord(b, name, line, lines, &out)
		return bad
	})
	switch {
	case bad != nil:
		return nil, bad
	case err != nil:
		return nil, fmt.Errorf("load %s: %w", name, err)
	}
	return out, nil
}

// parseRecord adds the entry of one record to out.
func parseRecord(b *builder, name string, line int, lines [][]byte, out *[]*record) error {
	if b.parseContent(lines) {
		*out = append(*out, b.finish(line))
		return nil
	}
	text := joinLines(lines)
	skip, err := checkRecord(text)
	if err != nil {
		return fmt.Errorf("load %s: line %d: %w", name, line, err)
	}
	if skip {
		return nil
	}
	l, err := ldif.Parse(text)
	if err != nil {
		// The parser counts lines to the end of the record, not to the fault: name
		// the record by its first line.
		var pe *ldif.ParseError
		if errors.As(err, &pe) {
			return fmt.Errorf("load %s: record at line %d: %s", name, line, pe.Message)
		}
		return fmt.Errorf("load %s: record at line %d: %w", name, line, err)
	}
	for _, e := range l.Entries {
		if e.Entry == nil {
			return fmt.Errorf("load %s: line %d: change records are not allowed in a directory export", name, line)
		}
		b.begin()
		b.setDN([]byte(e.Entry.DN))
		for _, a := range e.Entry.Attributes {
			for _, v := range a.ByteValues {
				b.addValue(a.Name, v)
			}
		}
		*out = append(*out, b.finish(line))
	}
	return nil
}

// build validates the records and indexes them: by DN key, GUID and SID, member
// values resolved to records, primary-group members by their group's SID.
func build(name string, records []*record, now time.Time) (*Directory, error) {
	d := &Directory{
		records:   records,
		byKey:     make(map[string]*record, len(records)),
		byGUID:    make(map[string]*record, len(records)),
		bySID:     make(map[string][]*record),
		byPrimary: make(map[string][]*record),
	}
	byDN := make(map[string]*record, len(records)) // for the load: member values as spelt
	primary := map[string]string{}
	var buf []byte
	fail := func(r *record, format string, args ...any) error {
		return fmt.Errorf("load %s: entry %q at line %d: %s", name, r.entry.DN, r.line, fmt.Sprintf(format, args...))
	}
	for _, r := range records {
		dn, err := dirgate.ParseDN(r.entry.DN)
		if err != nil {
			return nil, fail(r, "invalid DN: %v", err)
		}
		if g := r.entry.Values("objectGUID"); len(g) != 1 || len(g[0]) != 16 {
			return nil, fail(r, "needs exactly one objectGUID of 16 bytes")
		}
		// Rendering once proves that every later rendering succeeds.
		obj, err := r.entry.ToObject(nil, now)
		if err != nil {
			return nil, fail(r, "%v", err)
		}
		r.key, r.guid, r.sid, r.group = dn.Key(), obj.GUID, obj.SID, obj.IsGroup()
		if d.byKey[r.key] != nil {
			return nil, fail(r, "DN already used by the entry at line %d", d.byKey[r.key].line)
		}
		if o := d.byGUID[obj.GUID]; o != nil {
			return nil, fail(r, "objectGUID %s already used by %q", obj.GUID, o.entry.DN)
		}
		d.byKey[r.key], d.byGUID[obj.GUID] = r, r
		byDN[r.entry.DN] = r
		if obj.SID != "" {
			d.bySID[obj.SID] = append(d.bySID[obj.SID], r)
			if obj.PrimaryGroupID != 0 {
				if i := strings.LastIndexByte(obj.SID, '-'); i > 0 {
					// Few groups are primary: their SIDs are kept once.
					buf = strconv.AppendInt(append(append(buf[:0], obj.SID[:i]...), '-'), int64(obj.PrimaryGroupID), 10)
					sid, ok := primary[string(buf)]
					if !ok {
						sid = string(buf)
						primary[sid] = sid
					}
					r.primarySID = sid
					d.byPrimary[sid] = append(d.byPrimary[sid], r)
				}
			}
		}
	}
	for _, r := range records {
		if err := d.resolveMembers(r, byDN); err != nil {
			return nil, fmt.Errorf("load %s: entry %q at line %d: %w", name, r.entry.DN, r.line, err)
		}
	}
	for _, r := range records {
		r.syncMemberOf()
	}
	d.dnAttrs.Store(dnValued(records, byDN, d.byKey, d.bySID))
	return d, nil
}

// resolveMembers links r to the loaded entries its member values name. A value spelt
// as the member's DN is spelt (byDN; most are) needs no parsing and is pointed at the
// member's DN; the others (phantoms, other spellings) are copied together, and the
// builder's array of member values is dropped.
func (d *Directory) resolveMembers(r *record, byDN map[string]*record) error {
	vals := r.entry.Attrs["member"]
	if len(vals) == 0 {
		return nil
	}
	seen := make(map[*record]bool, len(vals))
	own := 0 // bytes of the values not pointed at a DN
	shared := make([]bool, len(vals))
	for i, v := range vals {
		mr := byDN[string(v)]
		if mr == nil {
			m, err := dirgate.ParseDN(string(v))
			if err != nil {
				return fmt.Errorf("member %q is not a DN", v)
			}
			// A value naming no loaded entry is an object of another domain, which AD
			// shows as a phantom: it is not listed.
			mr = d.byKey[m.Key()]
		}
		if mr != nil && !seen[mr] {
			seen[mr] = true
			r.members = append(r.members, mr)
			mr.memberOf = append(mr.memberOf, r)
		}
		if mr != nil && string(v) == mr.entry.DN {
			vals[i], shared[i] = mr.dnBytes(), true
		} else {
			own += len(v)
		}
	}
	if own > 0 {
		buf := make([]byte, 0, own)
		for i, v := range vals {
			if !shared[i] {
				start := len(buf)
				buf = append(buf, v...)
				vals[i] = buf[start:len(buf):len(buf)]
			}
		}
	}
	return nil
}
