package memory

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/go-ldap/ldif"
)

// paragraph is one blank-line-separated record of an LDIF file and the line it
// starts on, so that errors can point at it.
type paragraph struct {
	line int
	text string
}

// splitParagraphs cuts LDIF text into records the way go-ldap/ldif reads it: lines
// end in LF (CRs before it are dropped), and a line that is empty after that ends a
// record. Parsing record by record lets load errors name the record's line.
func splitParagraphs(data []byte) []paragraph {
	var out []paragraph
	var cur []string
	start := 0
	lines := bytes.Split(data, []byte("\n"))
	for i, raw := range lines {
		l := strings.TrimRight(string(raw), "\r\n")
		if l == "" {
			if len(cur) > 0 {
				out = append(out, paragraph{line: start + 1, text: strings.Join(cur, "\n") + "\n"})
				cur = nil
			}
			continue
		}
		if len(cur) == 0 {
			start = i
		}
		cur = append(cur, l)
	}
	if len(cur) > 0 {
		out = append(out, paragraph{line: start + 1, text: strings.Join(cur, "\n") + "\n"})
	}
	return out
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

// parseLDIF turns an AD export into entries. Every entry must be a plain content
// record (no changetype) with a DN that parses; rendering checks the rest.
func parseLDIF(name string, data []byte) ([]loaded, error) {
	var out []loaded
	for _, p := range splitParagraphs(data) {
		skip, err := checkRecord(p.text)
		if err != nil {
			return nil, fmt.Errorf("load %s: line %d: %w", name, p.line, err)
		}
		if skip {
			continue
		}
		l, err := ldif.Parse(p.text)
		if err != nil {
			// The parser counts lines to the end of the record, not to the fault: name
			// the record by its first line.
			var pe *ldif.ParseError
			if errors.As(err, &pe) {
				return nil, fmt.Errorf("load %s: record at line %d: %s", name, p.line, pe.Message)
			}
			return nil, fmt.Errorf("load %s: record at line %d: %w", name, p.line, err)
		}
		for _, e := range l.Entries {
			if e.Entry == nil {
				return nil, fmt.Errorf("load %s: line %d: change records are not allowed in a directory export", name, p.line)
			}
			ent := dirgate.NewEntry(e.Entry.DN)
			for _, a := range e.Entry.Attributes {
				ent.Add(a.Name, a.ByteValues...)
			}
			out = append(out, loaded{line: p.line, entry: ent})
		}
	}
	return out, nil
}

type loaded struct {
	line  int
	entry *dirgate.Entry
}

// build validates the entries and indexes them: by DN key, GUID and SID, member
// values resolved to entries, primary-group members by their group's SID.
func build(name string, entries []loaded, now time.Time) (*Directory, error) {
	d := &Directory{
		byKey:     make(map[string]*record, len(entries)),
		byGUID:    make(map[string]*record, len(entries)),
		bySID:     make(map[string][]*record),
		byPrimary: make(map[string][]*record),
	}
	fail := func(l loaded, format string, args ...any) error {
		return fmt.Errorf("load %s: entry %q at line %d: %s", name, l.entry.DN, l.line, fmt.Sprintf(format, args...))
	}
	for _, l := range entries {
		dn, err := dirgate.ParseDN(l.entry.DN)
		if err != nil {
			return nil, fail(l, "invalid DN: %v", err)
		}
		if g := l.entry.Values("objectGUID"); len(g) != 1 || len(g[0]) != 16 {
			return nil, fail(l, "needs exactly one objectGUID of 16 bytes")
		}
		// Rendering once proves that every later rendering succeeds.
		obj, err := l.entry.ToObject(nil, now)
		if err != nil {
			return nil, fail(l, "%v", err)
		}
		r := &record{entry: l.entry, line: l.line, key: dn.Key(), guid: obj.GUID, sid: obj.SID, group: obj.IsGroup()}
		if d.byKey[r.key] != nil {
			return nil, fail(l, "DN already used by the entry at line %d", d.byKey[r.key].line)
		}
		if o := d.byGUID[obj.GUID]; o != nil {
			return nil, fail(l, "objectGUID %s already used by %q", obj.GUID, o.entry.DN)
		}
		d.byKey[r.key], d.byGUID[obj.GUID] = r, r
		if obj.SID != "" {
			d.bySID[obj.SID] = append(d.bySID[obj.SID], r)
			if obj.PrimaryGroupID != 0 {
				if i := strings.LastIndexByte(obj.SID, '-'); i > 0 {
					r.primarySID = fmt.Sprintf("%s-%d", obj.SID[:i], obj.PrimaryGroupID)
					d.byPrimary[r.primarySID] = append(d.byPrimary[r.primarySID], r)
				}
			}
		}
		d.records = append(d.records, r)
	}
	for _, r := range d.records {
		seen := map[*record]bool{}
		for _, v := range r.entry.Values("member") {
			m, err := dirgate.ParseDN(string(v))
			if err != nil {
				return nil, fmt.Errorf("load %s: entry %q at line %d: member %q is not a DN", name, r.entry.DN, r.line, v)
			}
			// A value naming no loaded entry is an object of another domain, which AD shows
			// as a phantom: it is not listed.
			if mr := d.byKey[m.Key()]; mr != nil && !seen[mr] {
				seen[mr] = true
				r.members = append(r.members, mr)
				mr.memberOf = append(mr.memberOf, r)
			}
		}
	}
	for _, r := range d.records {
		r.syncMemberOf()
	}
	return d, nil
}
