package decisionlog

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/policy"
)

// referenceLine is the decision line as dirgate built it before appendLine: nested
// maps, masks erased from them, encoded by encoding/json. It is the definition
// appendLine must match byte for byte.
func referenceLine(l *line, masks []Mask) []byte {
	in := l.input()
	var result map[string]any
	if c := &l.change; !l.isListing {
		result = map[string]any{"allowed": c.Allowed}
		if c.Defined != nil {
			result["defined"] = *c.Defined
		}
		if c.Failed {
			result["error"] = "evaluation failed"
		}
	} else {
		r := &l.listing
		nAllowed, denied, truncated := 0, []string{}, false
		for i, ok := range r.Allowed[:r.Decided] {
			switch {
			case ok:
				nAllowed++
			case len(denied) < l.maxDenied:
				denied = append(denied, r.Objects[i].GUID)
			default:
				truncated = true
			}
		}
		result = map[string]any{"allowed": nAllowed, "denied": r.Decided - nAllowed, "deniedGuids": denied, "deniedTruncated": truncated}
		if r.Errors > 0 {
			result["errors"] = r.Errors
		}
		if u := len(r.Allowed) - r.Decided; u > 0 {
			result["undecided"] = u
		}
		if r.WithheldObjects+r.WithheldFailures > 0 {
			result["withheldObjects"] = r.WithheldObjects
			names := r.WithheldProperties
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
			"displayName": in.Subject.DisplayName, "domainName": in.Subject.DomainName, "groupCount": len(in.Subject.Groups),
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
		"path":        l.path(),
		"revision":    l.revision(),
		"input":       input,
		"result":      result,
		"duration_ms": float64(l.elapsed().Microseconds()) / 1000,
	}
	if r := &l.listing; l.isListing {
		ev["engine"] = map[string]any{"mode": r.Mode, "cachedPlan": r.CachedPlan, "reusedDecisions": r.Reused}
	}
	if d := l.candidate(); d != nil {
		orEmpty := func(g []string) []string {
			if g == nil {
				return []string{}
			}
			return g
		}
		ev["candidate"] = map[string]any{
			"revision":      d.Revision,
			"newly_allowed": orEmpty(d.NewlyAllowed),
			"newly_denied":  orEmpty(d.NewlyDenied),
			"newlyAllowed":  d.NAllowed,
			"newlyDenied":   d.NDenied,
			"truncated":     len(d.NewlyAllowed)+len(d.NewlyDenied) < d.NAllowed+d.NDenied,
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
		time:      time.Date(2026, 11, 25, 4, 5, 6, int(n)*1000+7, time.FixedZone("x", 3600)),
		id:        uuid.MustParse("6f1c2a9e-51b3-4d10-8e2f-0123456789ab"),
		maxDenied: 3,
	}
	in := policy.Input{Action: policy.ActionView, Subject: dirgate.Principal{DN: "CN=" + s + ",DC=x", GUID: "g", SID: "S-1", DisplayName: s, DomainName: s + ".x",
		Groups: make([]dirgate.GroupRef, n%5)}, Group: dirgate.Object{DN: "CN=G<&>" + s, GUID: "gg"},
		Request: policy.Request{IncludeIndirect: n%2 == 0, Properties: []string{"mail", s}, SizeLimit: n}}
	if span {
		tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
		sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
		l.span = trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid})
	}
	var cand *policy.CandidateDiff
	if n%4 == 1 { // a candidate ran: some lines carry its differences
		cand = &policy.CandidateDiff{Revision: "cand-" + s, NewlyAllowed: []string{s + "-a"}, NAllowed: 1 + n, NDenied: n % 3}
		if n > 4 {
			cand.NewlyDenied = []string{s + "-d", "x"}
		}
	}
	rev, elapsed := "rev-"+s, time.Duration(n)*1234567
	switch kind {
	case 0:
		nAllowed := 0
		for _, ok := range allowed[:decided] {
			if ok {
				nAllowed++
			}
		}
		ld := &policy.ListingDecision{Revision: rev, Input: in, Elapsed: elapsed, Path: "dirgate/authz/allow", Objects: objs,
			Allowed: allowed, NAllowed: nAllowed, Decided: decided, Mode: "predicate", CachedPlan: n%2 == 1, Reused: span,
			Errors: n % 3, Candidate: cand}
		if span && n > 0 && decided == n {
			// Decisions a plan remembered: the denied GUIDs come from its memo.
			ld.Memo = new(policy.Memo)
		}
		if n%3 == 2 { // the property rule withheld something
			ld.WithheldObjects, ld.WithheldProperties = n/2, []string{"ms-mcs-admpwd", s}
		}
		l.listing, l.isListing = *ld, true
	case 1:
		in.Action, in.Object = policy.ActionRemove, &dirgate.Object{DN: "CN=m" + s, GUID: "mg", ObjectType: "user"}
		in.Request = policy.Request{Properties: []string{}}
		l.change = policy.ChangeDecision{Revision: rev, Input: in, Elapsed: elapsed, Path: "dirgate/authz/allow",
			Allowed: n%2 == 0, Failed: n%3 == 0, Candidate: cand}
	case 2:
		in.Action, in.Request.Properties = policy.ActionSignIn, nil
		defined := n%2 == 1
		l.change = policy.ChangeDecision{Revision: rev, Input: in, Elapsed: elapsed, Path: "dirgate/authz/signin",
			Allowed: defined, Defined: &defined}
	default:
		in.Request.Properties = nil
		l.change = policy.ChangeDecision{Revision: rev, Input: in, Elapsed: elapsed, Path: "dirgate/authz/allow", Allowed: true, Candidate: cand}
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
		{"/input/subject/domainName", "/input/subject/displayName"},
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
		for kind := range 4 {
			for si, s := range strs {
				for _, n := range []int{0, 1, 5, 12} {
					for _, span := range []bool{false, true} {
						l := testLine(kind, s, n, n-si%2*2, span)
						want := referenceLine(l, masks)
						got := appendLine([]byte("prefix"), l, &lm)
						if string(got) != "prefix"+string(want) {
							t.Fatalf("masks %d kind %d %q n %d span %v:\n got %s\nwant %s", mi, kind, s, n, span, got[6:], want)
						}
						checkEvent(t, l, &lm, got[6:])
					}
				}
			}
		}
	}
}

// TestDeniedSegmentReused: lines written from remembered decisions equal the
// reference whatever MaxDenied each asks for, and the segment is made once per
// bound.
func TestDeniedSegmentReused(t *testing.T) {
	l := testLine(0, "seg", 12, 12, true)
	m := l.listing.Memo
	if m == nil {
		t.Fatal("testLine made no remembered decisions")
	}
	for _, max := range []int{3, 3, 1, 0, 100, 3} {
		l.maxDenied = max
		if got, want := appendLine(nil, l, nil), referenceLine(l, nil); string(got) != string(want) {
			t.Fatalf("maxDenied %d:\n got %s\nwant %s", max, got, want)
		}
		if seg, _ := m.Load().(*deniedSegment); seg == nil || seg.max != max {
			t.Fatalf("maxDenied %d: segment %+v", max, seg)
		}
	}
	first := m.Load()
	appendLine(nil, l, nil)
	if m.Load() != first {
		t.Fatal("the segment was made again for the same bound")
	}
}

// checkEvent: the typed event of l is what decoding its line gives, as OPA's
// decision-log service received it when it decoded the lines.
func checkEvent(t testing.TB, l *line, lm *lineMasks, encoded []byte) {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(encoded, &doc); err != nil {
		t.Fatalf("line %s: %v", encoded, err)
	}
	want := dirgate.DecisionEvent{Custom: map[string]any{}}
	for k, v := range doc {
		switch k {
		case "decision_id":
			want.ID = v.(string)
		case "path":
			want.Path = v.(string)
		case "time":
			tm, err := time.Parse(time.RFC3339Nano, v.(string))
			if err != nil {
				t.Fatal(err)
			}
			want.Time = tm
		case "trace_id":
			want.TraceID = v.(string)
		case "span_id":
			want.SpanID = v.(string)
		case "input":
			want.Input = v
		case "result":
			want.Result = v
		default:
			want.Custom[k] = v
		}
	}
	got := pend(l, lm).Event()
	if !got.Time.Equal(want.Time) || got.Time.Location() != time.UTC {
		t.Fatalf("event time %v, line's %v", got.Time, want.Time)
	}
	got.Time, want.Time = time.Time{}, time.Time{}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("event\n %#v\nline decoded\n %#v\nline %s", got, want, encoded)
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
		for kind := range 4 {
			l := testLine(kind, guid, n, n, n%2 == 0)
			in := l.input()
			in.Subject.DN, in.Request.Properties = dn, []string{prop}
			if l.isListing {
				l.listing.Elapsed = time.Duration(elapsed)
			} else {
				l.change.Elapsed = time.Duration(elapsed)
			}
			for _, ms := range []*lineMasks{nil, &lm} {
				var ref []Mask
				if ms != nil {
					ref = masks
				}
				got, want := appendLine(nil, l, ms), referenceLine(l, ref)
				if string(got) != string(want) {
					t.Fatalf("got %s\nwant %s", got, want)
				}
				if ms != nil {
					checkEvent(t, l, ms, got)
				}
			}
		}
	})
}

func BenchmarkDecisionLine(b *testing.B) {
	lm := newLineMasks(nil)
	l := testLine(0, "CN=Some Caller,OU=Staff,DC=example,DC=org", 1000, 1000, true)
	l.maxDenied = DefaultMaxDenied
	for i := range l.listing.Objects {
		l.listing.Objects[i].GUID = uuid.NewString() // as long as the directory's
	}
	// "append" names the denied GUIDs from the plan's remembered decisions, as a
	// caller's repeated listing does; "append-fresh" from the decisions themselves,
	// as the first listing after a fill does.
	from := l.listing.Memo
	for _, c := range []struct {
		name string
		from *policy.Memo
	}{{"append", from}, {"append-fresh", nil}} {
		b.Run(c.name, func(b *testing.B) {
			l.listing.Memo = c.from
			b.ReportAllocs()
			var buf []byte
			for b.Loop() {
				buf = appendLine(buf[:0], l, &lm)
			}
		})
	}
	l.listing.Memo = from
	// "pend" is what a request pays when a sink is set, "event" what the sink
	// pays to build the event from it.
	b.Run("pend", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = pend(l, &lm)
		}
	})
	p := pend(l, &lm)
	b.Run("event", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = p.Event()
		}
	})
	b.Run("reference", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = referenceLine(l, nil)
		}
	})
}

// TestPendingReadsNothingShared: a decision on its way to the sink keeps what its
// event needs, so that the event built later is the same whatever the request's
// shared data (the listing's objects and decisions, the requested properties)
// became meanwhile.
func TestPendingReadsNothingShared(t *testing.T) {
	lm := newLineMasks(nil)
	for _, kind := range []int{0, 1} {
		l := testLine(kind, "shared", 12, 10, true)
		want := pend(l, &lm).Event()
		p := pend(l, &lm)
		in := l.input()
		if len(in.Request.Properties) > 0 {
			in.Request.Properties[0] = "changed"
		}
		if l.isListing {
			for i := range l.listing.Objects {
				l.listing.Objects[i].GUID = "changed"
				l.listing.Allowed[i] = !l.listing.Allowed[i]
			}
		}
		got := p.Event()
		got.Time, want.Time = time.Time{}, time.Time{}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("kind %d: the event changed with the request's data:\n got %#v\nwant %#v", kind, got, want)
		}
	}
}
