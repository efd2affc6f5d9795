package ldap

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/dirgate/dirgate/internal/ldapentry"
	goldap "github.com/go-ldap/ldap/v3"
)

func TestParseRange(t *testing.T) {
	tests := []struct {
		name       string
		in         string
		want       rangeOption
		wantRanged bool
		wantErr    bool
	}{
		// What AD sends: a first range, a middle one, the last one.
		{"first", "member;range=0-1499", rangeOption{attr: "member", low: 0, high: 1499}, true, false},
		{"middle", "member;range=1500-2999", rangeOption{attr: "member", low: 1500, high: 2999}, true, false},
		{"last", "member;range=3000-*", rangeOption{attr: "member", low: 3000, last: true}, true, false},
		// Option names are case-insensitive; the attribute keeps its case.
		{"case", "Member;Range=0-*", rangeOption{attr: "Member", low: 0, last: true}, true, false},
		// Other options stay part of the description.
		{"other option", "userCertificate;binary;range=0-9", rangeOption{attr: "userCertificate;binary", high: 9}, true, false},
		// No range: Samba's answer, and every ordinary attribute.
		{"plain", "member", rangeOption{attr: "member"}, false, false},
		{"other only", "cn;lang-en", rangeOption{attr: "cn;lang-en"}, false, false},
		// A single value range.
		{"single", "member;range=5-5", rangeOption{attr: "member", low: 5, high: 5}, true, false},
		// Malformed answers are errors, never guesses.
		{"no dash", "member;range=5", rangeOption{}, false, true},
		{"backwards", "member;range=9-5", rangeOption{}, false, true},
		{"star low", "member;range=*-5", rangeOption{}, false, true},
		{"negative", "member;range=-1-5", rangeOption{}, false, true},
		{"sign", "member;range=+1-5", rangeOption{}, false, true},
		{"empty high", "member;range=1-", rangeOption{}, false, true},
		{"overflow", "member;range=0-99999999999", rangeOption{}, false, true},
		{"too big", "member;range=0-4294967296", rangeOption{}, false, true},
		{"two ranges", "member;range=0-1;range=2-3", rangeOption{}, false, true},
		{"empty name", ";range=0-1", rangeOption{}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ranged, err := parseRange(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseRange(%q) err = %v, wantErr %v", tt.in, err, tt.wantErr)
			}
			if err == nil && (got != tt.want || ranged != tt.wantRanged) {
				t.Errorf("parseRange(%q) = %+v, %v; want %+v, %v", tt.in, got, ranged, tt.want, tt.wantRanged)
			}
		})
	}
}

// FuzzParseRange: any attribute description a server sends is either rejected or
// parsed into a range whose rendering parses back to the same thing.
func FuzzParseRange(f *testing.F) {
	for _, s := range []string{"member;range=0-1499", "member;range=1500-*", "member", "a;b;range=1-2", "member;range=9-5", ";"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		r, ranged, err := parseRange(name)
		if err != nil || !ranged {
			return
		}
		if r.low < 0 || (!r.last && r.high < r.low) || r.attr == "" {
			t.Fatalf("parseRange(%q) = %+v", name, r)
		}
		hi := "*"
		if !r.last {
			hi = strconv.Itoa(r.high)
		}
		again, ranged2, err := parseRange(r.attr + ";range=" + strconv.Itoa(r.low) + "-" + hi)
		if err != nil || !ranged2 || again != r {
			t.Fatalf("round trip of %q: %+v, %v, %v", name, again, ranged2, err)
		}
	})
}

// TestCompleteRangeErrors: a server that breaks the range protocol makes the read
// fail instead of looping or returning part of the values.
func TestCompleteRangeErrors(t *testing.T) {
	tests := []struct {
		name   string
		answer string // the attribute name the server answers with
		want   string
	}{
		// Answers a different start than asked.
		{"wrong start", "member;range=7-*", "asked from 2, got 7"},
		// Answers without any range.
		{"no range", "member", "no values from 2"},
		// Never ends: each answer covers one value and names a fixed end.
		{"no progress", "member;range=2-2", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &scriptConn{answer: func(req *goldap.SearchRequest) *goldap.Entry {
				name := tt.answer
				if tt.name == "no progress" {
					lo := strings.TrimSuffix(strings.TrimPrefix(req.Attributes[0], "member;range="), "-*")
					name = "member;range=" + lo + "-" + lo
				}
				return &goldap.Entry{DN: "CN=g", Attributes: []*goldap.EntryAttribute{attr(name, [][]byte{[]byte("x")})}}
			}}
			e := ldapentry.NewEntry("CN=g")
			err := completeRange(context.Background(), c, e, pendingRange{attr: "member", next: 2})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
			if tt.name == "no progress" && c.n != maxRangeRounds {
				t.Errorf("rounds = %d, want the bound %d", c.n, maxRangeRounds)
			}
		})
	}
}

// scriptConn answers every search with one entry built by answer.
type scriptConn struct {
	fakeConn
	answer func(*goldap.SearchRequest) *goldap.Entry
	n      int
}

func (c *scriptConn) SearchAsync(ctx context.Context, req *goldap.SearchRequest, _ int) goldap.Response {
	c.n++
	return &fakeResponse{items: []fakeItem{{entry: c.answer(req)}}}
}

// TestSearchPaging: the loop follows cookies to the end, skips references, and
// stops at the first callback error.
func TestSearchPaging(t *testing.T) {
	o := newOrg()
	bigGroup(o, 25)
	c, _ := o.srv.dial(context.Background())
	n := 0
	err := search(context.Background(), c, query{base: o.srv.domain, scope: goldap.ScopeWholeSubtree,
		filter: "(primaryGroupID=513)", attrs: []string{"objectGUID"}, pageSize: 10}, func(*goldap.Entry) error { n++; return nil })
	// 25 + alice, bob, ext; 3 pages each carrying a referral.
	if err != nil || n != 28 {
		t.Fatalf("entries = %d, err %v; want 28", n, err)
	}
	if pages := len(o.srv.log()); pages != 3 {
		t.Errorf("requests = %d, want 3 pages", pages)
	}
	stop := fmt.Errorf("stop")
	n = 0
	err = search(context.Background(), c, query{base: o.srv.domain, scope: goldap.ScopeWholeSubtree,
		filter: "(primaryGroupID=513)", pageSize: 10}, func(*goldap.Entry) error { n++; return stop })
	if err != stop || n != 1 {
		t.Errorf("callback error: n = %d, err %v", n, err)
	}
}

// TestSearchClosedConn: a connection already closed makes go-ldap's SearchAsync end
// without entries or error; search must report a network error so the read retries.
func TestSearchClosedConn(t *testing.T) {
	c := &silentConn{}
	c.closed.Store(true)
	err := search(context.Background(), c, query{base: "CN=x", scope: goldap.ScopeBaseObject, filter: "(objectClass=*)"}, func(*goldap.Entry) error { return nil })
	if !isNetworkError(err) {
		t.Errorf("err = %v, want a network error", err)
	}
}

type silentConn struct{ fakeConn }

func (c *silentConn) SearchAsync(context.Context, *goldap.SearchRequest, int) goldap.Response {
	return &fakeResponse{}
}

func TestEscapeBytes(t *testing.T) {
	sid, _ := ldapentry.SIDToBytes("S-1-5-21-508194244-2207095322-3016344161-1104")
	// The layout of docs/directory.md, "objectGUID and objectSid": 01 05 | 000000000005
	// | 21 508194244=0x1e4a6dc4 2207095322=0x838d9a1a 3016344161=0xb3c9c261 1104=0x450,
	// each sub-authority little-endian.
	if got, want := escapeBytes(sid), `\01\05\00\00\00\00\00\05\15\00\00\00\c4\6d\4a\1e\1a\9a\8d\83\61\c2\c9\b3\50\04\00\00`; got != want {
		t.Errorf("escapeBytes(SID) = %s, want %s", got, want)
	}
	// The result must compile as a filter value whatever the bytes.
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	if _, err := goldap.CompileFilter("(objectSid=" + escapeBytes(all) + ")"); err != nil {
		t.Errorf("filter with all bytes: %v", err)
	}
}

func TestASQControl(t *testing.T) {
	// docs/directory.md, "Attribute scoped query (ASQ)": SEQUENCE{OCTET STRING
	// "member"} is 30 08 04 06 'member'.
	c := asqControl("member").(*goldap.ControlString)
	if want := append([]byte{0x30, 0x08, 0x04, 0x06}, "member"...); !bytes.Equal([]byte(c.ControlValue), want) || !c.Criticality || c.ControlType != oidASQ {
		t.Errorf("asqControl(member) = %+v", c)
	}
}

// FuzzConvert: an entry converted keeps exactly what Entry.Add would have built from
// it (the values under their lower-case names, nil for an attribute without values,
// ranged parts joined), and the same pending ranges, whatever names and values a
// server sends; appending to a converted attribute never writes into go-ldap's.
func FuzzConvert(f *testing.F) {
	f.Add("objectGUID", "member;range=0-1", "Member", "cn", []byte("a\x00bc"), uint8(3))
	f.Add("mail", "mail", "MAIL", "member;range=2-*", []byte(""), uint8(0))
	f.Add("x;range=9-5", "a", "b", "c", []byte("v"), uint8(1))
	f.Fuzz(func(t *testing.T, n0, n1, n2, n3 string, vals []byte, counts uint8) {
		var attrs []*goldap.EntryAttribute
		for i, name := range []string{n0, n1, n2, n3} {
			k := int(counts>>(2*i)) & 3 // 0 to 3 values, cut from vals
			var bv [][]byte
			for j := range k {
				bv = append(bv, vals[min(j, len(vals)):])
			}
			attrs = append(attrs, &goldap.EntryAttribute{Name: name, ByteValues: bv})
		}
		e := &goldap.Entry{DN: "CN=x", Attributes: attrs}
		want := ldapentry.NewEntry(e.DN)
		var wantPending []pendingRange
		wantErr := false
		for _, a := range attrs {
			r, ranged, err := parseRange(a.Name)
			if err != nil {
				wantErr = true
				break
			}
			if !ranged {
				want.Add(a.Name, a.ByteValues...)
				continue
			}
			want.Add(r.attr, a.ByteValues...)
			if !r.last {
				wantPending = append(wantPending, pendingRange{attr: r.attr, next: r.high + 1})
			}
		}
		got, pending, err := convert(e, lowerNames{})
		if (err != nil) != wantErr {
			t.Fatalf("convert err = %v, want an error: %v", err, wantErr)
		}
		if err != nil {
			return
		}
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(pending, wantPending) {
			t.Fatalf("convert = %#v, %v\nwant %#v, %v", got, pending, want, wantPending)
		}
		for k, vs := range got.Attrs {
			got.Attrs[k] = append(vs, []byte("appended"))
		}
		for _, a := range attrs {
			for _, v := range a.ByteValues[len(a.ByteValues):cap(a.ByteValues)] {
				if v != nil {
					t.Fatalf("appending to the entry wrote into go-ldap's values of %q", a.Name)
				}
			}
		}
	})
}

// lowerNames keeps at most maxLowerNames names: a server cannot make it grow.
func TestLowerNamesBounded(t *testing.T) {
	n := lowerNames{}
	for i := range 3 * maxLowerNames {
		if got := n.lower(fmt.Sprintf("Attr%d", i)); got != fmt.Sprintf("attr%d", i) {
			t.Fatalf("lower = %q", got)
		}
	}
	if len(n) != maxLowerNames {
		t.Errorf("%d names kept, want %d", len(n), maxLowerNames)
	}
}
