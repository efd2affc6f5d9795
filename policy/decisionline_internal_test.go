package policy

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/dirgate/dirgate"
)

// referenceLine is the decision line as dirgate built it before appendLine: nested
// maps, masks erased from them, encoded by encoding/json. It is the definition
// appendLine must match byte for byte.
func referenceLine(l *line, masks []Mask) []byte {
	in := l.in
	var result map[string]any
	if c := l.change; c != nil {
		result = map[string]any{"allowed": c.allowed}
		if c.failed {
			result["error"] = "evaluation failed"
		}
	} else {
		r := l.listing
		nAllowed, denied, truncated := 0, []string{}, false
		for i, ok := range r.allowed[:r.stats.decided] {
			switch {
			case ok:
				nAllowed++
			case len(denied) < r.maxDenied:
				denied = append(denied, r.objs[i].GUID)
			default:
				truncated = true
			}
		}
		result = map[string]any{"allowed": nAllowed, "denied": r.stats.decided - nAllowed, "deniedGuids": denied, "deniedTruncated": truncated}
		if r.stats.errors > 0 {
			result["errors"] = r.stats.errors
		}
		if u := len(r.allowed) - r.stats.decided; u > 0 {
			result["undecided"] = u
		}
		if wh := l.withheld; wh != nil && wh.count+wh.errors > 0 {
			result["withheldObjects"] = wh.count
			names := wh.names
			if names == nil {
				names = []string{}
			}
			result["withheldProperties"] = names
		}
	}
	input := map[string]any{
		"action": in.Action,
		"subject": map[string]any{
			"dn": in.Subject.DN, "guid": in.Subject.GUID, "sid": in.Subject.SID,
			"displayName": in.Subject.DisplayName, "groupCount": len(in.Subject.Groups),
		},
		"group": map[string]any{"dn": in.Group.DN, "guid": in.Group.GUID},
		"request": map[string]any{
			"includeIndirect": in.Request.IncludeIndirect,
			"properties":      in.Request.Properties,
			"sizeLimit":       in.Request.SizeLimit,
		},
	}
	if in.Object != nil {
		input["object"] = map[string]any{"dn": in.Object.DN, "guid": in.Object.GUID, "objectType": in.Object.ObjectType}
	}
	ev := map[string]any{
		"time":        l.time.UTC().Format(time.RFC3339Nano),
		"decision_id": l.id.String(),
		"path":        "dirgate/authz/allow",
		"revision":    l.revision,
		"input":       input,
		"result":      result,
		"duration_ms": float64(l.elapsed.Microseconds()) / 1000,
	}
	if l.listing != nil {
		st := l.listing.stats
		ev["engine"] = map[string]any{"mode": st.mode, "cachedPlan": st.cached, "reusedDecisions": st.reused}
	}
	if d := l.candidate; d != nil {
		orEmpty := func(g []string) []string {
			if g == nil {
				return []string{}
			}
			return g
		}
		ev["candidate"] = map[string]any{
			"revision":      d.revision,
			"newly_allowed": orEmpty(d.newlyAllowed),
			"newly_denied":  orEmpty(d.newlyDenied),
			"newlyAllowed":  d.nAllowed,
			"newlyDenied":   d.nDenied,
			"truncated":     len(d.newlyAllowed)+len(d.newlyDenied) < d.nAllowed+d.nDenied,
		}
	}
	if l.span.IsValid() {
		ev["trace_id"] = l.span.TraceID().String()
		ev["span_id"] = l.span.SpanID().String()
	}
	var erased []string
	for _, m := range masks {
		if eraseMember(m, ev) {
			erased = append(erased, m.raw)
		}
	}
	if erased != nil {
		ev["erased"] = erased
	}
	b, err := json.Marshal(ev)
	if err != nil {
		panic(err)
	}
	return b
}

func eraseMember(m Mask, doc map[string]any) bool {
	cur := doc
	for _, t := range m.tokens[:len(m.tokens)-1] {
		next, ok := cur[t].(map[string]any)
		if !ok {
			return false
		}
		cur = next
	}
	last := m.tokens[len(m.tokens)-1]
	if _, ok := cur[last]; !ok {
		return false
	}
	delete(cur, last)
	return true
}

func mustMasks(t testing.TB, ss ...string) []Mask {
	var out []Mask
	for _, s := range ss {
		m, err := ParseMask(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// testLine is a line of every kind the log writes, from a few parameters.
func testLine(kind int, s string, n, decided int, span bool) *line {
	objs := make([]dirgate.Object, n)
	allowed := make([]bool, n)
	for i := range objs {
		objs[i].GUID = fmt.Sprintf("%s-%d", s, i)
		allowed[i] = i%3 == 0
	}
	decided = max(0, min(decided, n))
	l := &line{
		time:     time.Date(2026, 11, 25, 4, 5, 6, int(n)*1000+7, time.FixedZone("x", 3600)),
		id:       uuid.MustParse("6f1c2a9e-51b3-4d10-8e2f-0123456789ab"),
		revision: "rev-" + s,
		in: Input{Action: ActionView, Subject: dirgate.Principal{DN: "CN=" + s + ",DC=x", GUID: "g", SID: "S-1", DisplayName: s,
			Groups: make([]dirgate.GroupRef, n%5)}, Group: dirgate.Object{DN: "CN=G<&>" + s, GUID: "gg"},
			Request: Request{IncludeIndirect: n%2 == 0, Properties: []string{"mail", s}, SizeLimit: n}},
		elapsed: time.Duration(n) * 1234567,
	}
	if span {
		tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
		sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
		l.span = trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid})
	}
	if n%4 == 1 { // a candidate ran: some lines carry its differences
		l.candidate = &candidateDiff{revision: "cand-" + s, newlyAllowed: []string{s + "-a"}, nAllowed: 1 + n, nDenied: n % 3}
		if n > 4 {
			l.candidate.newlyDenied = []string{s + "-d", "x"}
		}
	}
	switch kind {
	case 0:
		nAllowed := 0
		for _, ok := range allowed[:decided] {
			if ok {
				nAllowed++
			}
		}
		l.listing = &listingResult{objs: objs, allowed: allowed, nAllowed: nAllowed, maxDenied: 3,
			stats: filterStats{mode: modePredicate, cached: n%2 == 1, reused: span, errors: n % 3, decided: decided}}
		if span && n > 0 {
			// Decisions a plan remembered: the denied GUIDs come from its segment.
			l.listing.stats.from = remembered(allowed)
		}
		if n%3 == 2 { // the property rule withheld something
			l.withheld = &withheld{count: n / 2, names: []string{"ms-mcs-admpwd", s}}
		}
	case 1:
		l.in.Action, l.in.Object = ActionRemove, &dirgate.Object{DN: "CN=m" + s, GUID: "mg", ObjectType: "user"}
		l.in.Request = Request{Properties: []string{}}
		l.change = &changeResult{allowed: n%2 == 0, failed: n%3 == 0}
	default:
		l.in.Request.Properties = nil
		l.change = &changeResult{allowed: true}
	}
	return l
}

// TestAppendLineMatchesReference: the appending encoder gives exactly the bytes of
// the map-and-encoding/json line, for every kind of line, masks of every sort
// (members, whole objects, absent members, array elements, repeated, ancestors
// before and after descendants, escapes, everything) and odd strings.
func TestAppendLineMatchesReference(t *testing.T) {
	maskSets := [][]string{
		nil,
		{"/input/subject/dn", "/input/request/properties", "/input/not/there"},
		{"/input"},
		{"/input/subject/dn", "/input"},
		{"/input", "/input/subject/dn"},
		{"/result/deniedGuids/0", "/result/deniedGuids", "/result/deniedGuids"},
		{"/decision_id", "/duration_ms", "/engine"},
		{"/decision_id", "/duration_ms", "/engine", "/input", "/path", "/result", "/revision", "/span_id", "/time", "/trace_id", "/erased"},
		{"/trace_id", "/input/object", "/input/object/dn", "/result/error", "/result/undecided", "/engine/mode"},
		{"/candidate/newly_denied", "/candidate/revision"},
		{"/candidate"},
		{"/result/withheldProperties", "/result/withheldObjects"},
		{"/in~1put", "/input/sub~0ject", "/<&>"},
	}
	strs := []string{"plain", "quote\"back\\slash", "ctl\x00\x1f\n\t", "html<&>", "utf8 é 漢 \u2028\u2029", "bad\xff\xfe", ""}
	for mi, ms := range maskSets {
		masks := mustMasks(t, ms...)
		lm := newLineMasks(masks)
		for kind := range 3 {
			for si, s := range strs {
				for _, n := range []int{0, 1, 5, 12} {
					for _, span := range []bool{false, true} {
						l := testLine(kind, s, n, n-si%2*2, span)
						want := referenceLine(l, masks)
						got := appendLine([]byte("prefix"), l, &lm)
						if string(got) != "prefix"+string(want) {
							t.Fatalf("masks %d kind %d %q n %d span %v:\n got %s\nwant %s", mi, kind, s, n, span, got[6:], want)
						}
					}
				}
			}
		}
	}
}

// remembered is what a plan remembers of a listing's decisions.
func remembered(allowed []bool) *decided {
	return &decided{n: len(allowed), allowed: append([]bool(nil), allowed...)}
}

// TestDeniedSegmentReused: lines written from remembered decisions equal the
// reference whatever DecisionLogMaxDenied each asks for, and the segment is made once
// per bound.
func TestDeniedSegmentReused(t *testing.T) {
	l := testLine(0, "seg", 12, 12, true)
	d := l.listing.stats.from
	if d == nil {
		t.Fatal("testLine made no remembered decisions")
	}
	for _, max := range []int{3, 3, 1, 0, 100, 3} {
		l.listing.maxDenied = max
		if got, want := appendLine(nil, l, nil), referenceLine(l, nil); string(got) != string(want) {
			t.Fatalf("maxDenied %d:\n got %s\nwant %s", max, got, want)
		}
		if seg := d.denied.Load(); seg == nil || seg.max != max {
			t.Fatalf("maxDenied %d: segment %+v", max, seg)
		}
	}
	first := d.denied.Load()
	appendLine(nil, l, nil)
	if d.denied.Load() != first {
		t.Fatal("the segment was made again for the same bound")
	}
}

// FuzzAppendLine: whatever the strings of the directory and the request, the line
// is the reference's.
func FuzzAppendLine(f *testing.F) {
	f.Add("CN=a,DC=x", "mail", "guid", 3, int64(1500))
	f.Add("<\x00\xff\u2028", "\"", "\\", 0, int64(0))
	masks := mustMasks(f, "/input/subject/sid", "/result/deniedGuids")
	lm := newLineMasks(masks)
	f.Fuzz(func(t *testing.T, dn, prop, guid string, n int, elapsed int64) {
		n = max(0, min(n, 50))
		for kind := range 3 {
			l := testLine(kind, guid, n, n, n%2 == 0)
			l.in.Subject.DN, l.in.Request.Properties = dn, []string{prop}
			l.elapsed = time.Duration(elapsed)
			for _, ms := range []*lineMasks{nil, &lm} {
				var ref []Mask
				if ms != nil {
					ref = masks
				}
				if got, want := appendLine(nil, l, ms), referenceLine(l, ref); string(got) != string(want) {
					t.Fatalf("got %s\nwant %s", got, want)
				}
			}
		}
	})
}

func BenchmarkDecisionLine(b *testing.B) {
	lm := newLineMasks(nil)
	l := testLine(0, "CN=Some Caller,OU=Staff,DC=example,DC=org", 1000, 1000, true)
	l.listing.maxDenied = DefaultMaxDeniedLogged
	for i := range l.listing.objs {
		l.listing.objs[i].GUID = uuid.NewString() // as long as the directory's
	}
	// "append" names the denied GUIDs from the plan's remembered decisions, as a
	// caller's repeated listing does; "append-fresh" from the decisions themselves,
	// as the first listing after a fill does.
	from := l.listing.stats.from
	for _, c := range []struct {
		name string
		from *decided
	}{{"append", from}, {"append-fresh", nil}} {
		b.Run(c.name, func(b *testing.B) {
			l.listing.stats.from = c.from
			b.ReportAllocs()
			var buf []byte
			for b.Loop() {
				buf = appendLine(buf[:0], l, &lm)
			}
		})
	}
	l.listing.stats.from = from
	b.Run("reference", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = referenceLine(l, nil)
		}
	})
}
