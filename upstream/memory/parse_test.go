package memory

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/dirgate/dirgate/internal/ldapentry"
	loadtest "github.com/dirgate/dirgate/test/tools/load"
	"github.com/go-ldap/ldif"
)

// libraryEntry is what the loader made of a record before it read records itself:
// go-ldap/ldif's entry, added value by value to an ldapentry.Entry. ok is false when the
// library does not read it as one plain entry.
func libraryEntry(lines [][]byte) (e *ldapentry.Entry, ok bool) {
	text := joinLines(lines)
	if skip, err := checkRecord(text); skip || err != nil {
		return nil, false
	}
	l, err := ldif.Parse(text)
	if err != nil || len(l.Entries) != 1 || l.Entries[0].Entry == nil {
		return nil, false
	}
	e = ldapentry.NewEntry(l.Entries[0].Entry.DN)
	for _, a := range l.Entries[0].Entry.Attributes {
		e.Add(a.Name, a.ByteValues...)
	}
	delete(e.Attrs, "memberof") // build rewrites it from member values
	return e, true
}

// sameEntry reports how got differs from want, or "".
func sameEntry(got, want *ldapentry.Entry) string {
	if got.DN != want.DN {
		return fmt.Sprintf("DN %q, want %q", got.DN, want.DN)
	}
	if g, w := slices.Sorted(maps.Keys(got.Attrs)), slices.Sorted(maps.Keys(want.Attrs)); !slices.Equal(g, w) {
		return fmt.Sprintf("attributes %q, want %q", g, w)
	}
	for name, w := range want.Attrs {
		if g := got.Attrs[name]; !slices.EqualFunc(g, w, bytes.Equal) {
			return fmt.Sprintf("%s = %q, want %q", name, g, w)
		}
	}
	return ""
}

// checkParagraphs compares, record by record, the loader's reading with the
// library's: whatever parseContent accepts, the library reads the same. It returns
// how many records each read.
func checkParagraphs(t *testing.T, data []byte) (own, library int) {
	t.Helper()
	b := newBuilder()
	_ = eachParagraph(bytes.NewReader(data), func(line int, lines [][]byte) error {
		want, ok := libraryEntry(lines)
		if ok {
			library++
		}
		if !b.parseContent(lines) {
			return nil
		}
		own++
		got := b.finish(line)
		if !ok {
			t.Fatalf("record at line %d: read as %q, the library does not read it", line, got.entry.DN)
		}
		if diff := sameEntry(&got.entry, want); diff != "" {
			t.Fatalf("record at line %d: %s", line, diff)
		}
		return nil
	})
	return own, library
}

// The exports dirgate is given are read by the loader itself, record for record as
// the library reads them.
func TestParseContentReadsExports(t *testing.T) {
	for name, data := range map[string][]byte{"demo": demoLDIF, "generated": loadtest.GeneratedExport(50), "small": []byte(small)} {
		own, library := checkParagraphs(t, data)
		if own != library || own == 0 {
			t.Errorf("%s: the loader read %d records, the library %d", name, own, library)
		}
	}
}

// splitParagraphs is how the loader cut a file into records before it read files as
// it parsed them: the reference eachParagraph is checked against.
func splitParagraphs(data []byte) (starts []int, texts []string) {
	var cur []string
	start := 0
	for i, raw := range bytes.Split(data, []byte("\n")) {
		l := strings.TrimRight(string(raw), "\r\n")
		if l == "" {
			if len(cur) > 0 {
				starts, texts = append(starts, start+1), append(texts, strings.Join(cur, "\n")+"\n")
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
		starts, texts = append(starts, start+1), append(texts, strings.Join(cur, "\n")+"\n")
	}
	return starts, texts
}

func checkEachParagraph(t *testing.T, data []byte) {
	t.Helper()
	wantStarts, wantTexts := splitParagraphs(data)
	var starts []int
	var texts []string
	err := eachParagraph(iotest.OneByteReader(bytes.NewReader(data)), func(line int, lines [][]byte) error {
		starts, texts = append(starts, line), append(texts, joinLines(lines))
		return nil
	})
	if err != nil || !slices.Equal(starts, wantStarts) || !slices.Equal(texts, wantTexts) {
		t.Fatalf("records at lines %v, %q (%v), want %v, %q", starts, texts, err, wantStarts, wantTexts)
	}
}

// Records are cut as before, lines longer than the reader's buffer included.
func TestEachParagraph(t *testing.T) {
	long := strings.Repeat("x", 200<<10)
	for _, data := range []string{"", "\n", "a", "a\n", "a\r\n\r\nb\r", "\n\n a\n\r\n\nb\nc\n\n\n", "dn: " + long + "\ncn: x\n\ndn: y"} {
		checkEachParagraph(t, []byte(data))
	}
}

// FuzzParseContent: a record the loader reads itself, the library reads the same.
func FuzzParseContent(f *testing.F) {
	f.Add([]byte(small))
	f.Add(demoRecord("# CN=Finance Team,"))
	f.Add([]byte("dn: CN=x\ncn: a\nCN: b\ncn: c\n"))
	f.Add([]byte("dn:: Q049eA==\n# c\n  more\ncn:  x\n y\nmemberOf: CN=g\n1.2.3: v\n"))
	f.Add([]byte("dn: CN=x\r\r\ncontrol: 1.2 true\ncn: x\n\ndn: CN=y\nchangetype: add\ncn: y\n"))
	f.Add([]byte("version: 1\ndn: CN=x\ncn::\nsn:\ngivenName:: YQ\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkEachParagraph(t, data)
		checkParagraphs(t, data)
	})
}
