package decisionlog

import (
	"slices"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/objectjson"
)

// pending is a decision on its way to the sink (a dirgate.DecisionRecord): what
// its event needs of the line, copied on the request that made the decision, so
// that the sink builds the event on its own goroutine without reading anything
// the request shares (a listing's objects and decisions) after it returned.
// Making it costs the request a copy of the line and of the denied GUIDs it
// names; building the event (nested maps, about 20 µs for a listing naming 100
// denied GUIDs, BenchmarkDecisionLine/event) is the sink's.
type pending struct {
	l     line // without its listing's objects and decisions
	masks *lineMasks
	// A listing's denied GUIDs (at most maxDenied; shared with the plan's
	// remembered decisions, never modified), whether more were denied, and how
	// many objects were left undecided.
	denied    []string
	truncated bool
	undecided int
}

var _ dirgate.DecisionRecord = (*pending)(nil)

// pend copies what l's event needs.
func pend(l *line, masks *lineMasks) *pending {
	p := &pending{l: *l, masks: masks}
	in := p.l.input()
	in.Request.Properties = slices.Clone(in.Request.Properties)
	if l.isListing {
		r := &l.listing
		seg := deniedOf(r, l.maxDenied, false, true)
		p.denied, p.truncated = seg.guids, seg.truncated
		p.undecided = len(r.Allowed) - r.Decided
		p.l.listing.Objects, p.l.listing.Allowed, p.l.listing.Memo = nil, nil, nil
	}
	return p
}

// Event is the decision as a typed event: its line's members in the form
// encoding/json decodes the line into (objects as map[string]any, arrays as
// []any, numbers as float64, strings with each byte that is not UTF-8 replaced
// by U+FFFD), masked as the line is, the members OPA's event has a place for
// taken out and the others left in Custom. A sink gets exactly what decoding the
// line would give, without the line being encoded or decoded
// (TestAppendLineMatchesReference checks the two against each other).
func (p *pending) Event() dirgate.DecisionEvent {
	l := &p.l
	doc := p.doc()
	var erased []any
	for _, mask := range p.masks.masks {
		if eraseMember(mask, doc) {
			erased = append(erased, objectjson.Decoded(mask.raw))
		}
	}
	if erased != nil {
		doc["erased"] = erased
	}
	ev := dirgate.DecisionEvent{Custom: make(map[string]any, len(doc))}
	for k, v := range doc {
		switch k {
		case "decision_id":
			ev.ID, _ = v.(string)
		case "path":
			ev.Path, _ = v.(string)
		case "time":
			ev.Time = l.time.UTC().Round(0) // what the line's RFC 3339 time parses to
		case "trace_id":
			ev.TraceID, _ = v.(string)
		case "span_id":
			ev.SpanID, _ = v.(string)
		case "input":
			ev.Input = v
		case "result":
			ev.Result = v
		default:
			ev.Custom[k] = v
		}
	}
	return ev
}

// doc is the line as nested maps, before masking.
func (p *pending) doc() map[string]any {
	l := &p.l
	in := l.input()
	subject := map[string]any{
		"dn": objectjson.Decoded(in.Subject.DN), "guid": objectjson.Decoded(in.Subject.GUID), "sid": objectjson.Decoded(in.Subject.SID),
		"displayName": objectjson.Decoded(in.Subject.DisplayName), "domainName": objectjson.Decoded(in.Subject.DomainName),
		"groupCount": float64(len(in.Subject.Groups)),
	}
	var props any // null when nil, as encoding/json writes it
	if in.Request.Properties != nil {
		props = texts(in.Request.Properties)
	}
	input := map[string]any{
		"action":  objectjson.Decoded(in.Action),
		"subject": subject,
		"group":   map[string]any{"dn": objectjson.Decoded(in.Group.DN), "guid": objectjson.Decoded(in.Group.GUID)},
		"request": map[string]any{
			"includeIndirect": in.Request.IncludeIndirect,
			"properties":      props,
			"sizeLimit":       float64(in.Request.SizeLimit),
		},
	}
	if o := in.Object; o != nil {
		input["object"] = map[string]any{"dn": objectjson.Decoded(o.DN), "guid": objectjson.Decoded(o.GUID), "objectType": objectjson.Decoded(o.ObjectType)}
	}
	doc := map[string]any{
		"time":        l.time.UTC().Format(time.RFC3339Nano),
		"decision_id": l.id.String(),
		"path":        objectjson.Decoded(l.path()),
		"revision":    objectjson.Decoded(l.revision()),
		"input":       input,
		"result":      p.resultDoc(),
		"duration_ms": float64(l.elapsed().Microseconds()) / 1000,
	}
	if r := &l.listing; l.isListing {
		doc["engine"] = map[string]any{"mode": objectjson.Decoded(r.Mode), "cachedPlan": r.CachedPlan, "reusedDecisions": r.Reused}
	}
	if d := l.candidate(); d != nil {
		doc["candidate"] = map[string]any{
			"revision":      objectjson.Decoded(d.Revision),
			"newly_allowed": texts(d.NewlyAllowed),
			"newly_denied":  texts(d.NewlyDenied),
			"newlyAllowed":  float64(d.NAllowed),
			"newlyDenied":   float64(d.NDenied),
			"truncated":     truncatedDiff(d),
		}
	}
	if l.span.IsValid() {
		doc["trace_id"] = l.span.TraceID().String()
		doc["span_id"] = l.span.SpanID().String()
	}
	return doc
}

// resultDoc is the "result" member of the line.
func (p *pending) resultDoc() map[string]any {
	l := &p.l
	if c := &l.change; !l.isListing {
		result := map[string]any{"allowed": c.Allowed}
		if c.Defined != nil {
			result["defined"] = *c.Defined
		}
		if c.Failed {
			result["error"] = "evaluation failed"
		}
		return result
	}
	r := &l.listing
	result := map[string]any{"allowed": float64(r.NAllowed), "denied": float64(r.Decided - r.NAllowed),
		"deniedGuids": texts(p.denied), "deniedTruncated": p.truncated}
	if r.Errors > 0 {
		result["errors"] = float64(r.Errors)
	}
	if p.undecided > 0 {
		result["undecided"] = float64(p.undecided)
	}
	if r.WithheldObjects+r.WithheldFailures > 0 {
		result["withheldObjects"] = float64(r.WithheldObjects)
		result["withheldProperties"] = texts(r.WithheldProperties)
	}
	return result
}

// eraseMember removes the member m names from doc, and reports whether it was
// there.
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

// texts is ss as a decoded JSON array ([] for nil).
func texts(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = objectjson.Decoded(s)
	}
	return out
}
