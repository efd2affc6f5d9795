package decisionlog

import (
	"encoding/hex"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/policy"
)

// line is one decision log line (docs/policy.md, "Decision log"): a listing's or
// a change's record, stamped. appendLine writes it by appending, field by field,
// the bytes encoding/json would give for the same line built as nested maps
// (sorted keys, HTML-safe strings): the line's content is the contract, and
// building maps and encoding them by reflection cost a listing about 25 µs. A
// new field is a member here and a call in appendLine (in its sorted place), and
// a member of the event (event.go); the reference test checks the three agree.
type line struct {
	time time.Time
	id   uuid.UUID
	span trace.SpanContext // written when valid

	// A listing's decisions (isListing) or a change's decision, held by value:
	// a line is made on the stack of the request that logs it, and a pointer to
	// a decision held here would make the decision escape to the heap (every
	// listing would allocate its ListingDecision).
	listing   policy.ListingDecision
	change    policy.ChangeDecision
	isListing bool
	// maxDenied bounds a listing's deniedGuids.
	maxDenied int
}

func (l *line) revision() string {
	if l.isListing {
		return l.listing.Revision
	}
	return l.change.Revision
}

func (l *line) input() *policy.Input {
	if l.isListing {
		return &l.listing.Input
	}
	return &l.change.Input
}

func (l *line) elapsed() time.Duration {
	if l.isListing {
		return l.listing.Elapsed
	}
	return l.change.Elapsed
}

func (l *line) path() string {
	if l.isListing {
		return l.listing.Path
	}
	return l.change.Path
}

func (l *line) candidate() *policy.CandidateDiff {
	if l.isListing {
		return l.listing.Candidate
	}
	return l.change.Candidate
}

// lineMasks is the decision log's masks, prepared for appendLine.
type lineMasks struct {
	masks []Mask
	// listable[i]: masks[i] can be reported as erasing something; false when an
	// earlier mask names the same member or an ancestor, which erased it first.
	listable []bool
}

func newLineMasks(masks []Mask) lineMasks {
	lm := lineMasks{masks: masks, listable: make([]bool, len(masks))}
	for i, m := range masks {
		lm.listable[i] = !slices.ContainsFunc(masks[:i], func(e Mask) bool {
			return len(e.tokens) <= len(m.tokens) && slices.Equal(e.tokens, m.tokens[:len(e.tokens)])
		})
	}
	return lm
}

// lineWriter appends one line. Each member is written with its JSON pointer; a
// member a mask names is written and then cut off again, so that the members
// below it are still seen (a mask reports what it erased, in the masks' order,
// exactly as erasing from the map would).
type lineWriter struct {
	b    []byte
	m    *lineMasks
	seen []bool // seen[i]: the member masks[i] names is in the line
}

// obj is an object being written: n members so far.
type obj struct{ n int }

// member starts member key of o and returns a mark for end.
func (w *lineWriter) member(o *obj, key string) int {
	mark := len(w.b)
	if o.n > 0 {
		w.b = append(w.b, ',')
	}
	w.b = append(w.b, '"')
	w.b = append(w.b, key...)
	w.b = append(w.b, '"', ':')
	return mark
}

// end finishes the member started at mark: it is cut off if a mask names ptr.
func (w *lineWriter) end(o *obj, mark int, ptr string) {
	if w.m != nil {
		masked := false
		for i, m := range w.m.masks {
			if m.raw == ptr { // a member name here never needs ~ escapes
				w.seen[i] = true
				masked = true
			}
		}
		if masked {
			w.b = w.b[:mark]
			return
		}
	}
	o.n++
}

func (w *lineWriter) str(o *obj, ptr, key, v string) {
	mark := w.member(o, key)
	w.b = appendJSONString(w.b, v)
	w.end(o, mark, ptr)
}

// plain writes a string value that needs no escaping (hex digits, a timestamp).
func (w *lineWriter) plain(o *obj, ptr, key string, v []byte) {
	mark := w.member(o, key)
	w.b = append(w.b, '"')
	w.b = append(w.b, v...)
	w.b = append(w.b, '"')
	w.end(o, mark, ptr)
}

func (w *lineWriter) int(o *obj, ptr, key string, v int) {
	mark := w.member(o, key)
	w.b = strconv.AppendInt(w.b, int64(v), 10)
	w.end(o, mark, ptr)
}

func (w *lineWriter) bool(o *obj, ptr, key string, v bool) {
	mark := w.member(o, key)
	w.b = strconv.AppendBool(w.b, v)
	w.end(o, mark, ptr)
}

// open starts a member whose value is an object; close(mark) ends it.
func (w *lineWriter) open(o *obj, key string) (int, obj) {
	mark := w.member(o, key)
	w.b = append(w.b, '{')
	return mark, obj{}
}

func (w *lineWriter) close(o *obj, mark int, ptr string) {
	w.b = append(w.b, '}')
	w.end(o, mark, ptr)
}

// appendLine appends l, without the newline.
func appendLine(b []byte, l *line, masks *lineMasks) []byte {
	w := lineWriter{b: b}
	if masks != nil && len(masks.masks) > 0 {
		w.m, w.seen = masks, make([]bool, len(masks.masks))
	}
	start := len(w.b)
	w.b = append(w.b, '{')
	var top obj
	var scratch [40]byte
	w.candidate(&top, l.candidate())
	w.plain(&top, "/decision_id", "decision_id", appendUUID(scratch[:0], l.id))
	mark := w.member(&top, "duration_ms")
	w.b = appendJSONFloat(w.b, float64(l.elapsed().Microseconds())/1000)
	w.end(&top, mark, "/duration_ms")
	if r := &l.listing; l.isListing {
		mark, e := w.open(&top, "engine")
		w.bool(&e, "/engine/cachedPlan", "cachedPlan", r.CachedPlan)
		w.str(&e, "/engine/mode", "mode", r.Mode)
		w.bool(&e, "/engine/reusedDecisions", "reusedDecisions", r.Reused)
		w.close(&top, mark, "/engine")
	}
	erasedAt, erasedN := len(w.b)-start, top.n // "erased" goes here once known
	w.input(&top, l.input())
	w.str(&top, "/path", "path", l.path())
	w.result(&top, l)
	w.str(&top, "/revision", "revision", l.revision())
	if l.span.IsValid() {
		id := l.span.SpanID()
		w.plain(&top, "/span_id", "span_id", hex.AppendEncode(scratch[:0], id[:]))
	}
	w.plain(&top, "/time", "time", l.time.UTC().AppendFormat(scratch[:0], time.RFC3339Nano))
	if l.span.IsValid() {
		id := l.span.TraceID()
		w.plain(&top, "/trace_id", "trace_id", hex.AppendEncode(scratch[:0], id[:]))
	}
	w.b = append(w.b, '}')
	if w.m == nil {
		return w.b
	}
	// The masks that erased something, in their order (rare: only with masks).
	var erased []byte
	for i, m := range w.m.masks {
		if w.seen[i] && w.m.listable[i] {
			if erased == nil {
				erased = append(erased, `"erased":[`...)
			} else {
				erased = append(erased, ',')
			}
			erased = appendJSONString(erased, m.raw)
		}
	}
	if erased == nil {
		return w.b
	}
	erased = append(erased, ']')
	switch { // its comma: after the members before it, else before those after it
	case erasedN > 0:
		erased = append([]byte{','}, erased...)
	case top.n > 0:
		erased = append(erased, ',')
	}
	return slices.Insert(w.b, start+erasedAt, erased...)
}

// input writes the "input" member: the caller's identity (groups counted, not
// listed), the group, the object of a change, and the request.
func (w *lineWriter) input(top *obj, in *policy.Input) {
	mark, o := w.open(top, "input")
	w.str(&o, "/input/action", "action", in.Action)
	gm, g := w.open(&o, "group")
	w.str(&g, "/input/group/dn", "dn", in.Group.DN)
	w.str(&g, "/input/group/guid", "guid", in.Group.GUID)
	w.close(&o, gm, "/input/group")
	if in.Object != nil {
		om, ob := w.open(&o, "object")
		w.str(&ob, "/input/object/dn", "dn", in.Object.DN)
		w.str(&ob, "/input/object/guid", "guid", in.Object.GUID)
		w.str(&ob, "/input/object/objectType", "objectType", in.Object.ObjectType)
		w.close(&o, om, "/input/object")
	}
	rm, r := w.open(&o, "request")
	w.bool(&r, "/input/request/includeIndirect", "includeIndirect", in.Request.IncludeIndirect)
	pm := w.member(&r, "properties")
	if in.Request.Properties == nil {
		w.b = append(w.b, "null"...)
	} else {
		w.b = append(w.b, '[')
		for i, p := range in.Request.Properties {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.b = appendJSONString(w.b, p)
		}
		w.b = append(w.b, ']')
	}
	w.end(&r, pm, "/input/request/properties")
	w.int(&r, "/input/request/sizeLimit", "sizeLimit", in.Request.SizeLimit)
	w.close(&o, rm, "/input/request")
	sm, s := w.open(&o, "subject")
	w.str(&s, "/input/subject/displayName", "displayName", in.Subject.DisplayName)
	w.str(&s, "/input/subject/dn", "dn", in.Subject.DN)
	w.str(&s, "/input/subject/domainName", "domainName", in.Subject.DomainName)
	w.int(&s, "/input/subject/groupCount", "groupCount", len(in.Subject.Groups))
	w.str(&s, "/input/subject/guid", "guid", in.Subject.GUID)
	w.str(&s, "/input/subject/sid", "sid", in.Subject.SID)
	w.close(&o, sm, "/input/subject")
	w.close(top, mark, "/input")
}

// candidate writes the "candidate" member (members in encoding/json's order). The
// GUIDs it names are bounded like deniedGuids, by the same setting, for both lists
// together (newly allowed first); the counts are always complete.
func (w *lineWriter) candidate(top *obj, d *policy.CandidateDiff) {
	if d == nil {
		return
	}
	mark, o := w.open(top, "candidate")
	w.int(&o, "/candidate/newlyAllowed", "newlyAllowed", d.NAllowed)
	w.int(&o, "/candidate/newlyDenied", "newlyDenied", d.NDenied)
	w.guids(&o, "/candidate/newly_allowed", "newly_allowed", d.NewlyAllowed)
	w.guids(&o, "/candidate/newly_denied", "newly_denied", d.NewlyDenied)
	w.str(&o, "/candidate/revision", "revision", d.Revision)
	w.bool(&o, "/candidate/truncated", "truncated", truncatedDiff(d))
	w.close(top, mark, "/candidate")
}

func (w *lineWriter) guids(o *obj, ptr, key string, gs []string) {
	mark := w.member(o, key)
	w.b = append(w.b, '[')
	for i, g := range gs {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.b = appendJSONString(w.b, g)
	}
	w.b = append(w.b, ']')
	w.end(o, mark, ptr)
}

// truncatedDiff tells whether d's lists name fewer objects than it counts.
func truncatedDiff(d *policy.CandidateDiff) bool {
	return len(d.NewlyAllowed)+len(d.NewlyDenied) < d.NAllowed+d.NDenied
}

// result writes the "result" member of a listing or of a change.
func (w *lineWriter) result(top *obj, l *line) {
	mark, o := w.open(top, "result")
	if c := &l.change; !l.isListing {
		w.bool(&o, "/result/allowed", "allowed", c.Allowed)
		if c.Defined != nil {
			w.bool(&o, "/result/defined", "defined", *c.Defined)
		}
		if c.Failed {
			w.str(&o, "/result/error", "error", "evaluation failed")
		}
		w.close(top, mark, "/result")
		return
	}
	r := &l.listing
	decided := r.Decided
	nAllowed := r.NAllowed
	w.int(&o, "/result/allowed", "allowed", nAllowed)
	w.int(&o, "/result/denied", "denied", decided-nAllowed)
	dm := w.member(&o, "deniedGuids")
	var truncated bool
	if r.Memo != nil && decided == len(r.Objects) {
		seg := deniedOf(r, l.maxDenied, true, true)
		w.b, truncated = append(w.b, seg.json...), seg.truncated
	} else {
		w.b, truncated = appendDenied(w.b, r.Objects, r.Allowed[:decided], l.maxDenied)
	}
	w.end(&o, dm, "/result/deniedGuids")
	w.bool(&o, "/result/deniedTruncated", "deniedTruncated", truncated)
	if r.Errors > 0 {
		w.int(&o, "/result/errors", "errors", r.Errors)
	}
	if u := len(r.Allowed) - decided; u > 0 {
		// The size limit was reached before them: they were not decided, and are not shown.
		w.int(&o, "/result/undecided", "undecided", u)
	}
	if r.WithheldObjects+r.WithheldFailures > 0 {
		w.int(&o, "/result/withheldObjects", "withheldObjects", r.WithheldObjects)
		m := w.member(&o, "withheldProperties")
		w.b = append(w.b, '[')
		for i, n := range r.WithheldProperties {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.b = appendJSONString(w.b, n)
		}
		w.b = append(w.b, ']')
		w.end(&o, m, "/result/withheldProperties")
	}
	w.close(top, mark, "/result")
}

// deniedSegment is a listing's deniedGuids array, as JSON for the line and as
// GUIDs for the sink's event, worked out from decisions a plan remembers and kept
// in their policy.Memo: every later request of the same caller on the same
// listing writes the same bytes and hands on the same GUIDs.
type deniedSegment struct {
	max       int      // the most GUIDs named (Config.MaxDenied)
	json      []byte   // the JSON array of the first max denied GUIDs
	guids     []string // the same GUIDs; never modified: shared
	truncated bool     // more were denied than named
}

// deniedOf returns r's deniedGuids naming at most max GUIDs: from r's memo, or
// made and kept there, when the plan remembers r's decisions; made for this
// line otherwise (json only when withJSON, guids only when withGUIDs).
func deniedOf(r *policy.ListingDecision, max int, withJSON, withGUIDs bool) *deniedSegment {
	if r.Memo != nil && r.Decided == len(r.Objects) {
		if s, _ := r.Memo.Load().(*deniedSegment); s != nil && s.max == max {
			return s
		}
		s := makeDenied(r.Objects, r.Allowed, max, true, true)
		r.Memo.Store(s)
		return s
	}
	return makeDenied(r.Objects, r.Allowed[:r.Decided], max, withJSON, withGUIDs)
}

// makeDenied works out the denied GUIDs of objs that allowed denies, the first
// limit of them.
func makeDenied(objs []dirgate.Object, allowed []bool, limit int, withJSON, withGUIDs bool) *deniedSegment {
	s := &deniedSegment{max: limit}
	if withJSON {
		s.json, s.truncated = appendDenied(nil, objs, allowed, limit)
	}
	if withGUIDs {
		n := 0
		for _, ok := range allowed {
			if !ok {
				n++
			}
		}
		s.guids = make([]string, 0, min(n, max(limit, 0)))
		for i, ok := range allowed {
			if !ok && len(s.guids) < limit {
				s.guids = append(s.guids, objs[i].GUID)
			}
		}
		s.truncated = n > len(s.guids)
	}
	return s
}

// appendDenied appends the JSON array of the GUIDs of the first max objects of objs
// that allowed denies, and reports whether it left some out.
func appendDenied(b []byte, objs []dirgate.Object, allowed []bool, max int) ([]byte, bool) {
	b = append(b, '[')
	named, truncated := 0, false
	for i, ok := range allowed {
		switch {
		case ok:
		case named < max:
			if named > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, objs[i].GUID)
			named++
		default:
			truncated = true
		}
	}
	return append(b, ']'), truncated
}

// appendJSONString appends s as encoding/json encodes a string: printable ASCII
// other than " \ < > & as is (the usual case, without allocating), anything else
// by encoding/json itself.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if !plainByte[s[i]] {
			enc, _ := json.Marshal(s) // a string always encodes
			return append(b, enc...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// plainByte marks the bytes encoding/json writes as they are.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendJSONFloat appends f as encoding/json encodes a float64.
func appendJSONFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9, as encoding/json does
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// appendUUID appends u in its canonical form without the allocation of String.
func appendUUID(b []byte, u uuid.UUID) []byte {
	const hexDigits = "0123456789abcdef"
	for i, x := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b = append(b, '-')
		}
		b = append(b, hexDigits[x>>4], hexDigits[x&0xf])
	}
	return b
}
